//! Discovery documents (`/version`, `/api`, `/apis`, resource lists), in
//! the legacy format and as aggregated discovery (apidiscovery.k8s.io/v2,
//! which kubectl 1.32 asks for first), built from the registry's current
//! snapshot.

use serde_json::{Value, json};

use std::sync::Arc;

use crate::resources::{ResourceDef, Snapshot};

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

fn groups(snap: &Snapshot) -> Vec<(&'static str, &'static str)> {
    snap.group_versions()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .collect()
}

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

pub(crate) fn group_list(snap: &Snapshot) -> Value {
    let groups: Vec<Value> = groups(snap)
        .into_iter()
        .map(|(g, v)| group_doc(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(snap: &Snapshot, name: &str) -> Option<Value> {
    groups(snap)
        .into_iter()
        .find(|(g, _)| *g == name)
        .map(|(g, v)| {
            let mut doc = group_doc(g, v);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

/// The verbs of a subresource.
fn sub_verbs(sub: &str) -> &'static [&'static str] {
    match sub {
        "binding" => &["create"],
        _ => &["get", "patch", "update"],
    }
}

/// (group, version, kind) a subresource answers with.
fn sub_kind(def: &ResourceDef, sub: &str) -> (&'static str, &'static str, &'static str) {
    match sub {
        "scale" => ("autoscaling", "v1", "Scale"),
        "binding" => ("", "v1", "Binding"),
        _ => (def.group, def.version, def.kind),
    }
}

fn served_in<'a>(
    snap: &'a Snapshot,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a Arc<ResourceDef>> + 'a {
    snap.served()
        .filter(move |r| r.group == group && r.version == version)
}

pub(crate) fn resource_list(snap: &Snapshot, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in served_in(snap, group, version) {
        let mut doc = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
            "storageVersionHash": "",
        });
        if !r.short_names.is_empty() {
            doc["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            doc["categories"] = json!(r.categories);
        }
        resources.push(doc);
        for sub in r.subresources() {
            let (g, v, kind) = sub_kind(r, sub);
            let mut doc = json!({
                "name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": kind, "verbs": sub_verbs(sub),
            });
            if sub == "scale" {
                doc["group"] = json!(g);
                doc["version"] = json!(v);
            }
            resources.push(doc);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// The media type of aggregated discovery (apidiscovery.k8s.io/v2).
pub(crate) const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header asks for aggregated discovery v2, as kubectl
/// 1.32 and client-go do first for `/api` and `/apis`.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.first().is_some_and(|t| *t == "application/json")
            && params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

fn resource_discovery(r: &ResourceDef) -> Value {
    let subresources: Vec<Value> = r
        .subresources()
        .map(|sub| {
            let (g, v, kind) = sub_kind(r, sub);
            json!({
                "subresource": sub,
                "responseKind": {"group": g, "version": v, "kind": kind},
                "verbs": sub_verbs(sub),
            })
        })
        .collect();
    let mut doc = json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        doc["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        doc["categories"] = json!(r.categories);
    }
    if !subresources.is_empty() {
        doc["subresources"] = json!(subresources);
    }
    doc
}

/// The aggregated discovery document of the core group (`core`) or of
/// every named group: `APIGroupDiscoveryList` as kube-apiserver serves it
/// at `/api` and `/apis`.
pub(crate) fn aggregated(snap: &Snapshot, core: bool) -> Value {
    let mut items = Vec::new();
    for (g, v) in snap.group_versions() {
        if g.is_empty() != core {
            continue;
        }
        let resources: Vec<Value> = served_in(snap, g, v)
            .map(|r| resource_discovery(r))
            .collect();
        let mut meta = json!({"creationTimestamp": null});
        if !g.is_empty() {
            meta["name"] = json!(g);
        }
        items.push(json!({
            "metadata": meta,
            "versions": [{"version": v, "resources": resources, "freshness": "Current"}],
        }));
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// The OpenAPI v3 index: one entry per group-version.
pub(crate) fn openapi_root(snap: &Snapshot) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, v) in snap.group_versions() {
        let key = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash=ctrlkit")}),
        );
    }
    json!({"paths": paths})
}

/// A minimal OpenAPI v3 document for one group-version: only the
/// operations (no schemas), each tagged with its group-version-kind and
/// declaring the `fieldValidation` parameter, which is what kubectl checks
/// to hand validation to the server instead of validating client-side.
pub(crate) fn openapi_group_version(snap: &Snapshot, group: &str, version: &str) -> Option<Value> {
    let defs: Vec<_> = served_in(snap, group, version).collect();
    if defs.is_empty() {
        return None;
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = serde_json::Map::new();
    for r in defs {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let (collection, item) = if r.namespaced {
            (
                format!("{prefix}/namespaces/{{namespace}}/{}", r.plural),
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
            )
        } else {
            (
                format!("{prefix}/{}", r.plural),
                format!("{prefix}/{}/{{name}}", r.plural),
            )
        };
        paths.insert(collection, json!({"post": op("post"), "get": op("list")}));
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "ctrlkit-testcluster", "version": format!("v{MAJOR}.{MINOR}.0")},
        "paths": paths,
        "components": {},
    }))
}
