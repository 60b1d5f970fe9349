//! The CRD generated from the Rust types: the committed YAML is exactly
//! what the binary prints, kube-apiserver's CRD validation accepts it (as
//! imitated by ctrlkit-testcluster), and its schema rejects the bad specs
//! a real server rejects and fills in the defaults.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use ctrlkit_example_webapp::resource::{WebApp, WebAppSpec, crd, crd_yaml};
use ctrlkit_testcluster::crd::CustomResourceDefinition;
use serde_json::{Value, json};

const REGENERATE: &str = "cargo run -p ctrlkit-example-webapp --bin webapp-operator -- --print-crd > deploy/webapp-operator/crd.yaml";

fn committed() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/webapp-operator/crd.yaml");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn the_committed_crd_is_the_generated_one() {
    assert!(
        committed() == crd_yaml().unwrap(),
        "deploy/webapp-operator/crd.yaml is stale; regenerate it from the repository root:\n  {REGENERATE}"
    );
}

#[test]
fn print_crd_prints_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_webapp-operator"))
        .arg("--print-crd")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), crd_yaml().unwrap());
}

fn accepted() -> CustomResourceDefinition {
    let value = serde_json::to_value(crd()).unwrap();
    CustomResourceDefinition::from_value(&value)
        .unwrap_or_else(|errors| panic!("kube-apiserver would reject the CRD: {errors:?}"))
}

#[test]
fn the_api_server_accepts_it_with_the_names_columns_and_subresources() {
    let crd = accepted();
    assert_eq!(crd.name, "webapps.example.ctrlkit.dev");
    assert!(crd.namespaced());
    assert_eq!(crd.names.kind, "WebApp");
    assert_eq!(crd.names.plural, "webapps");
    assert_eq!(crd.names.short_names, ["wa"]);
    assert_eq!(crd.names.categories, ["all"]);
    let v1 = crd.version("v1").unwrap();
    assert!(v1.served && v1.storage);
    assert!(v1.subresources.status);
    let columns: Vec<_> = v1.printer_columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(columns, ["Replicas", "Ready", "Status", "URL", "Age"]);
}

/// A WebApp as a client would send it, admitted by the schema.
fn admit(spec: Value) -> Result<Value, Vec<String>> {
    let crd = accepted();
    let mut obj = json!({
        "apiVersion": "example.ctrlkit.dev/v1",
        "kind": "WebApp",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": spec,
    });
    crd.version("v1")
        .unwrap()
        .schema
        .admit(&mut obj)
        .map(|()| obj)
        .map_err(|errors| {
            errors
                .iter()
                .map(|e| format!("{}: {}", e.field, e.body()))
                .collect()
        })
}

#[test]
fn the_schema_rejects_what_the_reconcile_must_never_see_from_a_real_server() {
    let errors = admit(json!({"image": "", "replicas": 101, "port": 0})).unwrap_err();
    assert_eq!(
        errors,
        [
            "spec.image: Invalid value: \"\": spec.image in body should be at least 1 chars long",
            "spec.port: Invalid value: 0: spec.port in body should be greater than or equal to 1",
            "spec.replicas: Invalid value: 101: spec.replicas in body should be less than or equal to 100",
        ]
    );
    let errors = admit(json!({"replicas": -1})).unwrap_err();
    assert!(
        errors.contains(&"spec.image: Required value".to_string()),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("spec.replicas")),
        "{errors:?}"
    );
}

#[test]
fn the_schema_fills_in_the_defaults_the_rust_type_has() {
    let stored = admit(json!({"image": "nginx"})).unwrap();
    assert_eq!(
        stored["spec"],
        json!({"image": "nginx", "replicas": 1, "port": 8080})
    );
    let app: WebApp = serde_json::from_value(stored).unwrap();
    assert_eq!(
        app.spec,
        WebAppSpec {
            image: "nginx".into(),
            replicas: 1,
            port: 8080,
            config: None
        }
    );
}

#[test]
fn the_statuses_the_operator_writes_pass_the_schema() {
    use ctrlkit_example_webapp::status::{Outcome, desired_status};
    use ctrlkit_example_webapp::validate::validate;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    let mut app = WebApp::new(
        "web",
        WebAppSpec {
            image: "nginx".into(),
            replicas: 2,
            port: 80,
            config: None,
        },
    );
    app.metadata.namespace = Some("shop".into());
    app.metadata.generation = Some(3);
    let now = Time(Timestamp::from_second(1_700_000_000).unwrap());
    let rolling = desired_status(&app, Outcome::Applied(&Deployment::default()), &now);
    let failed = desired_status(
        &app,
        Outcome::Failed {
            reason: "FailedCreate",
            message: "quota",
        },
        &now,
    );
    app.spec.image.clear();
    let invalid = desired_status(&app, Outcome::Invalid(&validate(&app).unwrap_err()), &now);
    let crd = accepted();
    for status in [rolling, failed, invalid] {
        let mut obj = serde_json::to_value(&app).unwrap();
        obj["spec"]["image"] = json!("nginx");
        obj["status"] = serde_json::to_value(&status).unwrap();
        let before = obj["status"].clone();
        crd.version("v1").unwrap().schema.admit(&mut obj).unwrap();
        assert_eq!(obj["status"], before, "nothing pruned or defaulted");
    }
}
