//! A custom object goes through a CRD schema as through kube-apiserver:
//! defaults, then pruning, then validation with kube-apiserver's 422 body.
#![allow(clippy::unwrap_used)]

use ctrlkit_testcluster::crd::Schema;
use ctrlkit_testcluster::crd::field::invalid_status;
use serde_json::json;

/// The schema of the Kubernetes docs' CronTab example, with defaults.
fn crontab() -> Schema {
    Schema::compile(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["cronSpec"],
                "properties": {
                    "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                    "image": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                },
            },
            "status": {
                "type": "object",
                "properties": {"replicas": {"type": "integer"}},
            },
        },
    }))
    .unwrap()
}

#[test]
fn a_valid_object_is_defaulted_and_pruned() {
    let mut obj = json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object", "namespace": "default"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "someRandomField": 42},
    });
    crontab().admit(&mut obj).unwrap();
    assert_eq!(
        obj,
        json!({
            "apiVersion": "stable.example.com/v1",
            "kind": "CronTab",
            "metadata": {"name": "my-new-cron-object", "namespace": "default"},
            "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 1},
        })
    );
}

#[test]
fn an_invalid_object_gets_kube_apiservers_422() {
    let mut obj = json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "bad"},
        "spec": {"cronSpec": "every minute", "replicas": 15},
    });
    let errors = crontab().admit(&mut obj).unwrap_err();
    let status = invalid_status("stable.example.com", "CronTab", "bad", &errors);
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "CronTab.stable.example.com \"bad\" is invalid: [spec.cronSpec: Invalid value: \"every minute\": \
         spec.cronSpec in body should match '^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$', \
         spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10]"
    );
    let causes = status["details"]["causes"].as_array().unwrap();
    assert_eq!(causes[0]["field"], "spec.cronSpec");
    assert_eq!(causes[0]["reason"], "FieldValueInvalid");
    assert_eq!(causes[1]["field"], "spec.replicas");
}

#[test]
fn a_missing_required_field_is_named() {
    let mut obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                         "metadata": {"name": "x"}, "spec": {}});
    let errors = crontab().admit(&mut obj).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].to_string(), "spec.cronSpec: Required value");
}
