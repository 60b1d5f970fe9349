//! CustomResourceDefinitions the CRD tests install.

use serde_json::{Value, json};

/// The Kubernetes docs' CronTab, with a default, validation, the status
/// and scale subresources, printer columns, a short name and the `all`
/// category.
pub(crate) fn crontab() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab",
                      "shortNames": ["ct"], "categories": ["all"]},
            "versions": [crontab_version("v1", true)],
        },
    })
}

/// One version of the CronTab schema.
pub(crate) fn crontab_version(name: &str, storage: bool) -> Value {
    json!({
        "name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {
            "type": "object",
            "description": "CronTab runs a command on a schedule.",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["cronSpec"],
                    "properties": {
                        "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$",
                                     "description": "The schedule in cron format."},
                        "image": {"type": "string"},
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                        "selector": {"type": "string"},
                    },
                },
                "status": {"type": "object", "properties": {
                    "replicas": {"type": "integer"},
                    "selector": {"type": "string"},
                }},
            },
        }},
        "subresources": {
            "status": {},
            "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                      "labelSelectorPath": ".status.selector"},
        },
        "additionalPrinterColumns": [
            {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    })
}

/// A CronTab object.
pub(crate) fn crontab_object(name: &str, cron_spec: &str) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name},
        "spec": {"cronSpec": cron_spec, "image": "busybox"},
    })
}
