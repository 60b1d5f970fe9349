//! Discovery documents (`/version`, `/api`, `/apis`, resource lists), in
//! the legacy format and as aggregated discovery (apidiscovery.k8s.io/v2,
//! which kubectl 1.32 asks for first), built from the registry's current
//! snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::crd::GroupVersionDocument;

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

/// The parts of a Kubernetes-style version (`v2`, `v1beta3`, `v1alpha1`)
/// for ordering: (stability, major, minor), higher is preferred.
fn kube_version(v: &str) -> Option<(u8, u64, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let major: u64 = rest.get(..digits)?.parse().ok()?;
    if rest.starts_with('0') {
        return None;
    }
    match &rest[digits..] {
        "" => Some((2, major, 0)),
        tail => {
            let (stability, minor) = if let Some(m) = tail.strip_prefix("beta") {
                (1, m)
            } else {
                (0, tail.strip_prefix("alpha")?)
            };
            if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((stability, major, minor.parse().ok()?))
        }
    }
}

/// apimachinery's `CompareKubeAwareVersionStrings` as a sort order:
/// GA before beta before alpha, higher versions first, then versions not
/// in that form, alphabetically.
fn by_version_priority(a: &&str, b: &&str) -> std::cmp::Ordering {
    match (kube_version(a), kube_version(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The served groups (the core group first) in registration order, each
/// with its versions, the preferred one first.
fn groups_with_versions(snap: &Snapshot) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for (g, v) in snap.group_versions() {
        match out.iter_mut().find(|(name, _)| *name == g) {
            Some((_, versions)) => versions.push(v),
            None => out.push((g, vec![v])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by(by_version_priority);
    }
    out
}

fn groups(snap: &Snapshot) -> Vec<(&'static str, Vec<&'static str>)> {
    groups_with_versions(snap)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .collect()
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": gvs, "preferredVersion": preferred})
}

pub(crate) fn group_list(snap: &Snapshot) -> Value {
    let groups: Vec<Value> = groups(snap)
        .into_iter()
        .map(|(g, v)| group_doc(g, &v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(snap: &Snapshot, name: &str) -> Option<Value> {
    groups(snap)
        .into_iter()
        .find(|(g, _)| *g == name)
        .map(|(g, v)| {
            let mut doc = group_doc(g, &v);
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
    for (g, versions) in groups_with_versions(snap) {
        if g.is_empty() != core {
            continue;
        }
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                let resources: Vec<Value> = served_in(snap, g, v)
                    .map(|r| resource_discovery(r))
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        let mut meta = json!({"creationTimestamp": null});
        if !g.is_empty() {
            meta["name"] = json!(g);
        }
        items.push(json!({"metadata": meta, "versions": versions}));
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// An OpenAPI v3 document serialized once, with the hash that kubectl's
/// cache keys it by.
#[derive(Debug)]
pub(crate) struct OpenApiDoc {
    body: Vec<u8>,
    etag: String,
}

impl OpenApiDoc {
    pub(crate) fn body(&self) -> &[u8] {
        &self.body
    }

    pub(crate) fn etag(&self) -> &str {
        &self.etag
    }
}

/// The OpenAPI v3 index: one entry per group-version, whose URL carries
/// the hash of its document (kube-apiserver's, so kubectl refetches a
/// document exactly when it changed): the custom resources' documents
/// from `custom`, the built-in groups' minimal ones otherwise.
pub(crate) fn openapi_root(
    snap: &Snapshot,
    custom: &BTreeMap<(String, String), GroupVersionDocument>,
) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, v) in snap.group_versions() {
        if let Some(doc) = custom.get(&(g.to_string(), v.to_string())) {
            let (key, entry) = doc.index_entry();
            paths.insert(key, entry);
            continue;
        }
        let key = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        if let Some(doc) = openapi_group_version(snap, g, v) {
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.etag)}),
            );
        }
    }
    json!({"paths": paths})
}

/// A minimal OpenAPI v3 document for one group-version of built-in
/// types: only the operations (no schemas), each tagged with its
/// group-version-kind and declaring the `fieldValidation` parameter, which
/// is what kubectl checks to hand validation to the server instead of
/// validating client-side.
pub(crate) fn openapi_group_version(
    snap: &Snapshot,
    group: &str,
    version: &str,
) -> Option<OpenApiDoc> {
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
    let doc = json!({
        "openapi": "3.0.0",
        "info": {"title": "ctrlkit-testcluster", "version": format!("v{MAJOR}.{MINOR}.0")},
        "paths": paths,
        "components": {},
    });
    let body = doc.to_string().into_bytes();
    Some(OpenApiDoc {
        etag: crate::crd::etag(&body),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_kube_apiserver_prefers_them() {
        let mut v = vec![
            "v1alpha1",
            "foo",
            "v1",
            "v2beta1",
            "v11alpha2",
            "v2",
            "v1beta1",
            "bar",
        ];
        v.sort_by(by_version_priority);
        assert_eq!(
            v,
            [
                "v2",
                "v1",
                "v2beta1",
                "v1beta1",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }
}
