//! Discovery documents (`/version`, `/api`, `/apis`, resource lists) in the
//! legacy (non-aggregated) format, which kubectl and kube-rs fall back to.

use serde_json::{Value, json};

use crate::resources::RESOURCES;

/// The Kubernetes version this fixture claims to be.
pub(crate) const MAJOR: &str = "1";
/// The Kubernetes minor version this fixture claims to be.
pub(crate) const MINOR: &str = "32";

pub(crate) fn version() -> Value {
    json!({
        "major": MAJOR,
        "minor": MINOR,
        "gitVersion": format!("v{MAJOR}.{MINOR}.0-ctrlkit-testcluster"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "none",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES {
        if !r.group.is_empty() && !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

pub(crate) fn group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(name: &str) -> Option<Value> {
    groups().into_iter().find(|(g, _)| *g == name).map(|(g, v)| {
        let mut doc = group_doc(g, v);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        doc
    })
}

const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

pub(crate) fn resource_list(group: &str, version: &str) -> Option<Value> {
    let defs: Vec<_> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for r in &defs {
        let mut doc = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": VERBS,
            "storageVersionHash": "",
        });
        if !r.short_names.is_empty() {
            doc["shortNames"] = json!(r.short_names);
        }
        if matches!(r.plural, "pods" | "replicationcontrollers" | "replicasets") {
            doc["categories"] = json!(["all"]);
        }
        resources.push(doc);
        for sub in r.subresources {
            let doc = match *sub {
                "scale" => json!({
                    "name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced,
                    "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
                }),
                "binding" => json!({
                    "name": format!("{}/binding", r.plural), "singularName": "", "namespaced": r.namespaced,
                    "kind": "Binding", "verbs": ["create"],
                }),
                _ => json!({
                    "name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
                    "kind": r.kind, "verbs": ["get", "patch", "update"],
                }),
            };
            resources.push(doc);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}
