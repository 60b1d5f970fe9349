//! Bodies kubectl 1.32 sent for typed `kubectl create ...` and `kubectl
//! auth can-i` (captured from a listener answering JSON, which kubectl
//! accepted: it sends `Accept: application/vnd.kubernetes.protobuf,
//! application/json`), decoded into the JSON the server works with.
#![allow(clippy::unwrap_used)]

use ctrlkit_testcluster::protobuf::{ProtobufError, decode, is_protobuf};
use serde_json::json;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/protobuf_fixtures/kubectl-1.32-{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn configmap_and_secret() {
    assert_eq!(
        decode(&fixture("configmap")).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b", "c": "d"}})
    );
    // Secret data is bytes: base64 in JSON.
    assert_eq!(
        decode(&fixture("secret")).unwrap(),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"pw": "aHVudGVyMg=="}})
    );
}

#[test]
fn namespace() {
    assert_eq!(
        decode(&fixture("namespace")).unwrap(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}, "spec": {}, "status": {}})
    );
}

#[test]
fn deployment_keeps_explicit_zero_replicas() {
    let d = decode(&fixture("deployment")).unwrap();
    assert_eq!(d["apiVersion"], "apps/v1");
    assert_eq!(d["spec"]["replicas"], 0);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["name"], "nginx");
    assert_eq!(c["image"], "nginx");
    assert_eq!(c["ports"][0]["containerPort"], 80);
    assert_eq!(c["resources"], json!({}));
    // Unset strings (Go writes them as "") are left out.
    assert!(c.get("imagePullPolicy").is_none());
    assert!(d["metadata"].get("namespace").is_none());
    assert!(d["metadata"].get("creationTimestamp").is_none());
}

#[test]
fn service_int_or_string_target_port() {
    let s = decode(&fixture("service")).unwrap();
    assert_eq!(s["spec"]["type"], "ClusterIP");
    assert_eq!(
        s["spec"]["ports"][0]["targetPort"], 8080,
        "IntOrString of type int is a JSON number"
    );
    assert_eq!(s["spec"]["ports"][0]["name"], "80-8080");
    assert_eq!(s["spec"]["selector"], json!({"app": "svc1"}));
}

#[test]
fn self_subject_access_review_of_auth_can_i() {
    let r = decode(&fixture("selfsubjectaccessreview")).unwrap();
    assert_eq!(r["kind"], "SelfSubjectAccessReview");
    assert_eq!(
        r["spec"]["resourceAttributes"],
        json!({"namespace": "default", "resource": "pods", "verb": "create"})
    );
}

#[test]
fn bad_bodies_are_errors_not_panics() {
    assert_eq!(decode(b"{\"kind\":\"Pod\"}"), Err(ProtobufError::NoMagic));
    let mut truncated = fixture("deployment");
    truncated.truncate(truncated.len() - 7);
    assert!(matches!(
        decode(&truncated),
        Err(ProtobufError::Truncated(_))
    ));
    let mut unknown = b"k8s\0".to_vec();
    // typeMeta {apiVersion: "v1", kind: "Nope"}
    unknown.extend([
        0x0a, 0x0a, 0x0a, 0x02, b'v', b'1', 0x12, 0x04, b'N', b'o', b'p', b'e',
    ]);
    let err = decode(&unknown).unwrap_err();
    assert_eq!(
        err.to_string(),
        "protobuf bodies of kind \"Nope\" in \"v1\" are not supported by the test cluster; send JSON"
    );
    for cut in 0..fixture("service").len() {
        let _ = decode(&fixture("service")[..cut]);
    }
    assert!(is_protobuf(
        "application/vnd.kubernetes.protobuf; charset=utf-8"
    ));
    assert!(!is_protobuf("application/json"));
}
