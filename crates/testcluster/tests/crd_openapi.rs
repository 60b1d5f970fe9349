//! Stock `kubectl explain` (1.32, OpenAPI v3) against the document
//! `ctrlkit_testcluster::crd` builds for a CRD, served with discovery by a
//! small fake API server.
//!
//! Needs kubectl at /usr/bin/kubectl (or on PATH); CI installs it.
#![allow(clippy::unwrap_used)]

#[path = "crd_openapi/fake_apiserver.rs"]
mod fake_apiserver;

use ctrlkit_testcluster::crd::{CustomResourceDefinition, GroupVersionDocument};
use fake_apiserver::{FakeApiserver, kubectl};
use serde_json::json;

fn crontab_crd() -> CustomResourceDefinition {
    CustomResourceDefinition::from_value(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "CronTab runs a command on a schedule.",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "description": "CronTabSpec is the desired schedule.",
                            "required": ["cronSpec"],
                            "properties": {
                                "cronSpec": {"type": "string", "description": "The schedule in cron format."},
                                "image": {"type": "string", "description": "The image the job runs."},
                                "replicas": {"type": "integer", "minimum": 0, "description": "How many jobs run at once."},
                                "policy": {"type": "string", "enum": ["Allow", "Forbid"], "description": "What happens when runs overlap."},
                                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                             "x-kubernetes-preserve-unknown-fields": true,
                                             "description": "The object each run creates."},
                            },
                        },
                        "status": {"type": "object", "properties": {
                            "lastRun": {"type": "string", "format": "date-time", "description": "When it last ran."},
                        }},
                    },
                }},
                "subresources": {"status": {}},
            }],
        },
    }))
    .unwrap()
}

#[test]
fn kubectl_explain_reads_the_crd_schema() {
    let server = FakeApiserver::start(crontab_crd(), Vec::new(), jiff::Timestamp::UNIX_EPOCH);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig(dir.path());
    let cache = dir.path().join("cache");
    let explain = |args: &[&str]| {
        let mut all = vec!["explain"];
        all.extend_from_slice(args);
        kubectl(&kubeconfig, &cache, &all)
    };

    let top = explain(&["crontabs"]).unwrap();
    for expected in [
        "GROUP:      stable.example.com",
        "KIND:       CronTab",
        "VERSION:    v1",
        "CronTab runs a command on a schedule.",
        "apiVersion\t<string>",
        "metadata\t<ObjectMeta>",
        "Standard object's metadata.",
        "spec\t<Object>",
        "CronTabSpec is the desired schedule.",
        "status\t<Object>",
    ] {
        assert!(top.contains(expected), "missing {expected:?} in:\n{top}");
    }

    let spec = explain(&["crontabs.spec"]).unwrap();
    for expected in [
        "FIELD: spec <Object>",
        "CronTabSpec is the desired schedule.",
        "cronSpec\t<string> -required-",
        "The schedule in cron format.",
        "replicas\t<integer>",
        "How many jobs run at once.",
        "policy\t<string>",
        "enum: Allow, Forbid",
        "template\t<Object>",
    ] {
        assert!(spec.contains(expected), "missing {expected:?} in:\n{spec}");
    }

    // Short names resolve, nested fields and the embedded resource's
    // metadata work.
    let field = explain(&["ct.spec.cronSpec"]).unwrap();
    assert!(field.contains("FIELD: cronSpec <string>"), "{field}");
    assert!(field.contains("The schedule in cron format."), "{field}");
    let embedded = explain(&["crontabs.spec.template"]).unwrap();
    assert!(embedded.contains("kind\t<string> -required-"), "{embedded}");
    assert!(embedded.contains("metadata\t<ObjectMeta>"), "{embedded}");

    // metadata follows the reference into ObjectMeta.
    let name = explain(&["crontabs.metadata.name"]).unwrap();
    assert!(name.contains("FIELD: name <string>"), "{name}");
    assert!(
        name.contains("Name must be unique within a namespace."),
        "{name}"
    );

    // Unknown fields are reported as on a real cluster.
    let err = explain(&["crontabs.spec.nope"]).unwrap_err();
    assert!(err.contains("field \"nope\" does not exist"), "{err}");

    // kubectl fetched the document by the URL the index gave it.
    let doc = GroupVersionDocument::build([&crontab_crd()], "stable.example.com", "v1").unwrap();
    let url = doc.server_relative_url();
    assert!(
        server.requests().iter().any(|r| r.starts_with(&url)),
        "{url} not requested: {:?}",
        server.requests()
    );
}

#[test]
fn kubectl_explain_recursive_lists_every_field() {
    let server = FakeApiserver::start(crontab_crd(), Vec::new(), jiff::Timestamp::UNIX_EPOCH);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig(dir.path());
    let out = kubectl(
        &kubeconfig,
        &dir.path().join("cache"),
        &["explain", "crontabs.spec", "--recursive"],
    )
    .unwrap();
    for field in [
        "cronSpec",
        "image",
        "policy",
        "replicas",
        "template",
        "apiVersion",
        "kind",
        "metadata",
    ] {
        assert!(out.contains(field), "missing {field} in:\n{out}");
    }
    // ObjectMeta's own fields appear under the embedded metadata.
    assert!(out.contains("ownerReferences"), "{out}");
}
