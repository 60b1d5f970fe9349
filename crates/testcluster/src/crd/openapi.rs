//! OpenAPI v3 for custom resources, as kube-apiserver serves it under
//! `/openapi/v3/apis/<group>/<version>` (apiextensions-apiserver
//! `pkg/controller/openapi/builder`, one spec per CRD version merged per
//! group-version, built with kube-openapi's `builder3`).
//!
//! The document is what stock `kubectl explain` reads: it finds the
//! resource's path, takes the `x-kubernetes-group-version-kind` of its
//! operations, and renders the component schema carrying that
//! group-version-kind. So each served version of a CRD contributes
//!
//! - its schema as `components.schemas["<reversed group>.<version>.<Kind>"]`
//!   (`com.example.stable.v1.CronTab`): the `openAPIV3Schema` as
//!   kube-apiserver's structural schema keeps it (descriptions, types,
//!   value validations, `x-kubernetes-*` extensions;
//!   `x-kubernetes-int-or-string` unfolded into its `anyOf`), with
//!   `apiVersion`, `kind` and `metadata` (a reference to `ObjectMeta`) at
//!   the root and in every embedded resource, and its group-version-kind;
//! - the list kind (`com.example.stable.v1.CronTabList`);
//! - the operations on the collection, the object and its `status` and
//!   `scale` subresources, with kube-apiserver's operation ids, tags,
//!   parameters (among them `fieldValidation`, which kubectl looks for
//!   before it leaves validation to the server), request bodies and
//!   responses;
//! - the built-in schemas those refer to (`ObjectMeta`, `ListMeta`,
//!   `Status`, `DeleteOptions`, `Patch`, autoscaling/v1 `Scale`, see
//!   [`openapi_meta`](super::openapi_meta)).
//!
//! [`GroupVersionDocument`] serializes the document once and computes the
//! hash kube-apiserver puts in the `/openapi/v3` index
//! (`{"paths": {"apis/<group>/<version>": {"serverRelativeURL":
//! "/openapi/v3/apis/<group>/<version>?hash=<etag>"}}}`): the upper-case
//! hex SHA-512 of the body, so a changed CRD gets a new URL and kubectl's
//! HTTP cache never serves a stale document.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::definition::{CustomResourceDefinition, Version};
use super::openapi_meta::{query_parameters, schema, schema_ref, type_meta};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// `PartialObjectMetadata`'s documentation of `metadata`.
const OBJECT_META_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
/// `PartialObjectMetadataList`'s documentation of `metadata`.
const LIST_META_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
/// The `apiVersion` and `kind` of an embedded resource.
const EMBEDDED_API_VERSION_DOC: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DOC: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const PRETTY_DOC: &str = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).";
const NAMESPACE_DOC: &str = "object name and auth scope, such as for teams and projects";

/// The verbs kube-apiserver recognises at the start of an operation name
/// (`GetOperationIDAndTags`; the shortest match wins).
const OPERATION_VERBS: &[&str] = &[
    "get",
    "log",
    "read",
    "replace",
    "patch",
    "delete",
    "deletecollection",
    "watch",
    "connect",
    "proxy",
    "list",
    "create",
];

/// kube-apiserver's component name of a custom kind: the group's labels
/// reversed, then version and kind (`stable.example.com`, `v1`, `CronTab`
/// give `com.example.stable.v1.CronTab`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The key of a group-version in the `/openapi/v3` index
/// (`apis/<group>/<version>`).
pub fn index_key(group: &str, version: &str) -> String {
    format!("apis/{group}/{version}")
}

/// kube-apiserver's document for `group`/`version`: every CRD in `crds`
/// of that group serving that version contributes its paths and schemas.
/// `None` when none does (kube-apiserver answers 404).
pub fn group_version_document<'a>(
    crds: impl IntoIterator<Item = &'a CustomResourceDefinition>,
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut paths = Map::new();
    let mut components = Map::new();
    let mut found = false;
    for crd in crds {
        if crd.group != group {
            continue;
        }
        let Some(v) = crd.version(version).filter(|v| v.served) else {
            continue;
        };
        found = true;
        add_crd_version(crd, v, &mut paths, &mut components);
    }
    if !found {
        return None;
    }
    add_referenced_meta(&paths, &mut components);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": components},
    }))
}

/// A group-version's document serialized once, with the hash its URL
/// carries in the `/openapi/v3` index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupVersionDocument {
    group: String,
    version: String,
    body: Vec<u8>,
    etag: String,
}

impl GroupVersionDocument {
    /// Builds and serializes the document of `group`/`version` (see
    /// [`group_version_document`]); `None` when no CRD serves it.
    pub fn build<'a>(
        crds: impl IntoIterator<Item = &'a CustomResourceDefinition>,
        group: &str,
        version: &str,
    ) -> Option<Self> {
        let doc = group_version_document(crds, group, version)?;
        let body = doc.to_string().into_bytes();
        Some(Self {
            group: group.to_string(),
            version: version.to_string(),
            etag: etag(&body),
            body,
        })
    }

    /// The JSON body (`Content-Type: application/json`).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The hash kube-apiserver sends as `ETag` (quoted) and in the URL.
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The URL the index points at:
    /// `/openapi/v3/apis/<group>/<version>?hash=<etag>`.
    pub fn server_relative_url(&self) -> String {
        format!(
            "/openapi/v3/{}?hash={}",
            index_key(&self.group, &self.version),
            self.etag
        )
    }

    /// The entry for the `/openapi/v3` index's `paths`: its key
    /// (`apis/<group>/<version>`) and `{"serverRelativeURL": ...}`.
    pub fn index_entry(&self) -> (String, Value) {
        (
            index_key(&self.group, &self.version),
            json!({"serverRelativeURL": self.server_relative_url()}),
        )
    }
}

/// kube-openapi's `computeETag`: the upper-case hex SHA-512 of `body`.
pub fn etag(body: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, body);
    digest.as_ref().iter().map(|b| format!("{b:02X}")).collect()
}

fn add_crd_version(
    crd: &CustomResourceDefinition,
    v: &Version,
    paths: &mut Map<String, Value>,
    components: &mut Map<String, Value>,
) {
    let kind_name = definition_name(&crd.group, &v.name, &crd.names.kind);
    let list_name = definition_name(&crd.group, &v.name, &crd.names.list_kind);
    components.insert(kind_name.clone(), kind_schema(crd, v));
    components.insert(list_name.clone(), list_schema(crd, v, &kind_name));
    let routes = routes(crd, v);
    let mut by_path: BTreeMap<&str, Vec<&Route>> = BTreeMap::new();
    for route in &routes {
        by_path.entry(&route.path).or_default().push(route);
    }
    for (path, routes) in by_path {
        paths.insert(
            path.to_string(),
            path_item(crd, v, &routes, &kind_name, &list_name),
        );
    }
}

// ---------------------------------------------------------------- schemas

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// The kind's schema: the structural schema as kube-openapi writes it,
/// with the object's metadata fields and group-version-kind.
fn kind_schema(crd: &CustomResourceDefinition, v: &Version) -> Value {
    let mut root = if v.schema_json.is_object() {
        let mut root = convert(&v.schema_json, true);
        if let Some(props) = properties_mut(&mut root) {
            props.insert(
                "metadata".into(),
                json!({"$ref": schema_ref(OBJECT_META), "description": OBJECT_META_DOC}),
            );
            props.insert("apiVersion".into(), type_meta("apiVersion"));
            props.insert("kind".into(), type_meta("kind"));
        }
        add_embedded_properties(&mut root);
        root
    } else {
        json!({"type": "object"})
    };
    root["x-kubernetes-group-version-kind"] = json!([gvk(&crd.group, &v.name, &crd.names.kind)]);
    root
}

fn list_schema(crd: &CustomResourceDefinition, v: &Version, kind_name: &str) -> Value {
    json!({
        "description": format!("{} is a list of {}", crd.names.list_kind, crd.names.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": type_meta("apiVersion"),
            "kind": type_meta("kind"),
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", crd.names.plural),
                "type": "array",
                "items": {"$ref": schema_ref(kind_name)},
            },
            "metadata": {"$ref": schema_ref(LIST_META), "description": LIST_META_DOC},
        },
        "x-kubernetes-group-version-kind": [gvk(&crd.group, &v.name, &crd.names.list_kind)],
    })
}

/// The `properties` of a schema object, created when absent (`None` when
/// `s` is not an object).
fn properties_mut(s: &mut Value) -> Option<&mut Map<String, Value>> {
    let props = s
        .as_object_mut()?
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if !props.is_object() {
        *props = Value::Object(Map::new());
    }
    props.as_object_mut()
}

/// The int-or-string `anyOf` kube-apiserver's `Unfold` adds.
fn int_or_string_any_of() -> Value {
    json!([{"type": "integer"}, {"type": "string"}])
}

/// A schema node as kube-apiserver's structural schema keeps it and
/// kube-openapi writes it (`Structural.ToKubeOpenAPI`: empty values
/// omitted, `example`, `id` and the like dropped). `structural` nodes (not
/// those under `allOf`/`anyOf`/`oneOf`/`not`) are also unfolded: an
/// `x-kubernetes-int-or-string` node gets its `anyOf` of integer and
/// string.
fn convert(s: &Value, structural: bool) -> Value {
    let Some(obj) = s.as_object() else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (key, value) in obj {
        let kept = match key.as_str() {
            "type" | "description" | "title" | "format" | "pattern" => value
                .as_str()
                .is_some_and(|s| !s.is_empty())
                .then(|| value.clone()),
            "x-kubernetes-list-type" | "x-kubernetes-map-type" => {
                value.is_string().then(|| value.clone())
            }
            "nullable"
            | "exclusiveMaximum"
            | "exclusiveMinimum"
            | "uniqueItems"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-embedded-resource"
            | "x-kubernetes-int-or-string" => (value == &Value::Bool(true)).then(|| value.clone()),
            "maximum" | "minimum" | "multipleOf" | "maxLength" | "minLength" | "maxItems"
            | "minItems" | "maxProperties" | "minProperties" => {
                value.is_number().then(|| value.clone())
            }
            "enum" | "required" | "x-kubernetes-list-map-keys" | "x-kubernetes-validations" => {
                value
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
                    .then(|| value.clone())
            }
            "default" => (!value.is_null()).then(|| value.clone()),
            "externalDocs" => value.as_object().map(|docs| {
                let mut kept = Map::new();
                for field in ["description", "url"] {
                    if let Some(text) = docs
                        .get(field)
                        .filter(|t| t.as_str().is_some_and(|t| !t.is_empty()))
                    {
                        kept.insert(field.to_string(), text.clone());
                    }
                }
                Value::Object(kept)
            }),
            "items" | "additionalProperties" if value.is_object() => {
                Some(convert(value, structural))
            }
            "additionalProperties" => value.is_boolean().then(|| value.clone()),
            "properties" => value.as_object().filter(|p| !p.is_empty()).map(|props| {
                Value::Object(
                    props
                        .iter()
                        .map(|(k, v)| (k.clone(), convert(v, structural)))
                        .collect(),
                )
            }),
            "allOf" | "anyOf" | "oneOf" => value
                .as_array()
                .filter(|a| !a.is_empty())
                .map(|a| Value::Array(a.iter().map(|s| convert(s, false)).collect())),
            "not" if value.is_object() => Some(convert(value, false)),
            _ => None,
        };
        if let Some(kept) = kept {
            out.insert(key.clone(), kept);
        }
    }
    if structural && out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        unfold_int_or_string(&mut out);
    }
    Value::Object(out)
}

/// kube-apiserver's `Structural.Unfold` for one int-or-string node.
fn unfold_int_or_string(out: &mut Map<String, Value>) {
    let pattern = int_or_string_any_of();
    let any_of_is_pattern = out.get("anyOf") == Some(&pattern);
    let all_of_starts_with_pattern = out
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|first| first.get("anyOf"))
        == Some(&pattern);
    if any_of_is_pattern || all_of_starts_with_pattern {
        return;
    }
    if out.contains_key("anyOf") {
        let mut all_of = vec![json!({"anyOf": pattern})];
        if let Some(Value::Array(rest)) = out.remove("allOf") {
            all_of.extend(rest);
        }
        out.insert("allOf".into(), Value::Array(all_of));
    } else {
        out.insert("anyOf".into(), pattern);
    }
}

/// The builder's `addEmbeddedProperties`: every
/// `x-kubernetes-embedded-resource` object gets `apiVersion`, `kind` and
/// `metadata`, and requires `kind` and `apiVersion`.
fn add_embedded_properties(s: &mut Value) {
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        props.values_mut().for_each(add_embedded_properties);
    }
    if let Some(items) = s.get_mut("items") {
        add_embedded_properties(items);
    }
    if let Some(additional) = s.get_mut("additionalProperties").filter(|a| a.is_object()) {
        add_embedded_properties(additional);
    }
    if s.get("x-kubernetes-embedded-resource") != Some(&Value::Bool(true)) {
        return;
    }
    if let Some(props) = properties_mut(s) {
        props.insert(
            "apiVersion".into(),
            json!({"description": EMBEDDED_API_VERSION_DOC, "type": "string"}),
        );
        props.insert(
            "kind".into(),
            json!({"description": EMBEDDED_KIND_DOC, "type": "string"}),
        );
        props.insert(
            "metadata".into(),
            json!({"$ref": schema_ref(OBJECT_META), "description": OBJECT_META_DOC}),
        );
    }
    let mut required: Vec<Value> = s
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for field in ["kind", "apiVersion"] {
        if !required.iter().any(|r| r == field) {
            required.push(json!(field));
        }
    }
    s["required"] = Value::Array(required);
}

/// Adds the built-in definitions the paths and schemas refer to, and what
/// those refer to in turn (kube-openapi includes only referenced ones).
fn add_referenced_meta(paths: &Map<String, Value>, components: &mut Map<String, Value>) {
    let mut pending = Vec::new();
    collect_refs(&Value::Object(paths.clone()), &mut pending);
    components
        .values()
        .for_each(|s| collect_refs(s, &mut pending));
    let mut seen: BTreeSet<String> = components.keys().cloned().collect();
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(def) = schema(&name) {
            collect_refs(def, &mut pending);
            components.insert(name, def.clone());
        }
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(name) = m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
            {
                out.push(name.to_string());
            }
            m.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

// ------------------------------------------------------------------ paths

/// What a route reads or returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    Kind,
    List,
    Status,
    Patch,
    Scale,
    DeleteOptions,
}

/// One route of the builder (`buildRoute`).
#[derive(Debug)]
struct Route {
    path: String,
    method: &'static str,
    /// `x-kubernetes-action`.
    action: &'static str,
    /// `list`, `create`, `read`, … (the operation's verb).
    verb: &'static str,
    subresource: &'static str,
    returns: Model,
    /// The request body and whether it is required.
    reads: Option<(Model, bool)>,
    /// The operation name before its id is derived.
    operation: String,
}

fn routes(crd: &CustomResourceDefinition, v: &Version) -> Vec<Route> {
    let kind = &crd.names.kind;
    let base = format!("/apis/{}/{}", crd.group, v.name);
    let namespaced = if crd.namespaced() { "Namespaced" } else { "" };
    let route = |root: &str,
                 sub_path: &str,
                 method: &'static str,
                 action: &'static str,
                 verb: &'static str,
                 returns: Model,
                 reads: Option<(Model, bool)>| {
        let subresource = match sub_path {
            "/{name}/status" => "status",
            "/{name}/scale" => "scale",
            _ => "",
        };
        let mut title = subresource.to_string();
        if let Some(first) = title.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        Route {
            path: format!("{root}{sub_path}"),
            method,
            action,
            verb,
            subresource,
            returns,
            reads,
            operation: format!("{verb}{namespaced}{kind}{title}"),
        }
    };
    let mut out = Vec::new();
    let mut root = format!("{base}/{}", crd.names.plural);
    if crd.namespaced() {
        let mut all = route(&root, "", "GET", "list", "list", Model::List, None);
        all.operation = format!("list{kind}ForAllNamespaces");
        out.push(all);
        root = format!("{base}/namespaces/{{namespace}}/{}", crd.names.plural);
    }
    out.push(route(&root, "", "GET", "list", "list", Model::List, None));
    out.push(route(
        &root,
        "",
        "POST",
        "post",
        "create",
        Model::Kind,
        Some((Model::Kind, true)),
    ));
    out.push(route(
        &root,
        "",
        "DELETE",
        "deletecollection",
        "deletecollection",
        Model::Status,
        None,
    ));
    out.push(route(
        &root,
        "/{name}",
        "GET",
        "get",
        "read",
        Model::Kind,
        None,
    ));
    out.push(route(
        &root,
        "/{name}",
        "PUT",
        "put",
        "replace",
        Model::Kind,
        Some((Model::Kind, true)),
    ));
    out.push(route(
        &root,
        "/{name}",
        "DELETE",
        "delete",
        "delete",
        Model::Status,
        Some((Model::DeleteOptions, false)),
    ));
    out.push(route(
        &root,
        "/{name}",
        "PATCH",
        "patch",
        "patch",
        Model::Kind,
        Some((Model::Patch, true)),
    ));
    if v.subresources.status {
        out.push(route(
            &root,
            "/{name}/status",
            "GET",
            "get",
            "read",
            Model::Kind,
            None,
        ));
        out.push(route(
            &root,
            "/{name}/status",
            "PUT",
            "put",
            "replace",
            Model::Kind,
            Some((Model::Kind, true)),
        ));
        out.push(route(
            &root,
            "/{name}/status",
            "PATCH",
            "patch",
            "patch",
            Model::Kind,
            Some((Model::Patch, true)),
        ));
    }
    if v.subresources.scale.is_some() {
        out.push(route(
            &root,
            "/{name}/scale",
            "GET",
            "get",
            "read",
            Model::Scale,
            None,
        ));
        out.push(route(
            &root,
            "/{name}/scale",
            "PUT",
            "put",
            "replace",
            Model::Scale,
            Some((Model::Scale, true)),
        ));
        out.push(route(
            &root,
            "/{name}/scale",
            "PATCH",
            "patch",
            "patch",
            Model::Scale,
            Some((Model::Patch, true)),
        ));
    }
    out
}

/// A route parameter (body excluded).
#[derive(Debug, Clone, PartialEq)]
struct Param {
    name: &'static str,
    path: bool,
    description: String,
    type_: &'static str,
}

impl Param {
    fn to_json(&self) -> Value {
        let mut p = json!({
            "name": self.name,
            "in": if self.path { "path" } else { "query" },
            "schema": {"type": self.type_, "uniqueItems": true},
        });
        if !self.description.is_empty() {
            p["description"] = json!(self.description);
        }
        if self.path {
            p["required"] = json!(true);
        }
        p
    }
}

/// The route's parameters in the order kube-apiserver adds them: `pretty`,
/// the path parameters, then the options type's.
fn params(route: &Route, kind: &str) -> Vec<Param> {
    let mut out = vec![Param {
        name: "pretty",
        path: false,
        description: PRETTY_DOC.to_string(),
        type_: "string",
    }];
    if route.path.contains("{namespace}") {
        out.push(Param {
            name: "namespace",
            path: true,
            description: NAMESPACE_DOC.to_string(),
            type_: "string",
        });
    }
    if route.path.contains("{name}") {
        out.push(Param {
            name: "name",
            path: true,
            description: format!("name of the {kind}"),
            type_: "string",
        });
    }
    let options = match route.action {
        "get" => "GetOptions",
        "list" | "deletecollection" => "ListOptions",
        "put" => "UpdateOptions",
        "patch" => "PatchOptions",
        "post" => "CreateOptions",
        _ => "DeleteOptions",
    };
    out.extend(
        query_parameters(options)
            .into_iter()
            .map(|(name, type_, description)| Param {
                name,
                path: false,
                description: description.to_string(),
                type_,
            }),
    );
    out
}

fn model_ref(model: Model, kind_name: &str, list_name: &str) -> Value {
    let name = match model {
        Model::Kind => kind_name,
        Model::List => list_name,
        Model::Status => STATUS,
        Model::Patch => PATCH,
        Model::Scale => SCALE,
        Model::DeleteOptions => DELETE_OPTIONS,
    };
    json!({"$ref": schema_ref(name)})
}

/// kube-apiserver's `descriptionFor`.
fn description(route: &Route, kind: &str) -> String {
    let article = match route.verb {
        "list" => " objects of kind ".to_string(),
        "read" | "replace" | "patch" => " the specified ".to_string(),
        "create" | "delete" => article_for(kind),
        _ => String::new(),
    };
    let sub = if route.subresource.is_empty() {
        String::new()
    } else {
        format!(" {} of", route.subresource)
    };
    match route.verb {
        "patch" => format!("partially update{sub}{article}{kind}"),
        "deletecollection" => {
            let sub = if sub.is_empty() {
                sub
            } else {
                format!("{sub} a")
            };
            format!("delete collection of{sub} {kind}")
        }
        verb => format!("{verb}{sub}{article}{kind}"),
    }
}

/// `endpoints.GetArticleForNoun(noun, " ")`.
fn article_for(noun: &str) -> String {
    if !noun.ends_with("ss") && noun.ends_with('s') {
        return " ".to_string();
    }
    let vowel = noun
        .chars()
        .next()
        .is_some_and(|c| matches!(c.to_ascii_lowercase(), 'a' | 'e' | 'i' | 'o' | 'u'));
    if vowel {
        " an ".to_string()
    } else {
        " a ".to_string()
    }
}

/// kube-openapi's `ToValidOperationID`: letters, `_` and (not first)
/// digits kept, the letter after anything else capitalized.
fn to_operation_id(s: &str, capitalize_first: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut capitalize = capitalize_first;
    for (i, c) in s.char_indices() {
        if c.is_alphabetic() || c == '_' || (i != 0 && c.is_ascii_digit()) {
            if capitalize {
                out.extend(c.to_uppercase());
                capitalize = false;
            } else {
                out.push(c);
            }
        } else {
            capitalize = true;
        }
    }
    out
}

/// kube-apiserver's `GetOperationIDAndTags` for a route under
/// `/apis/<group>/<version>`.
fn operation_id_and_tag(route: &Route, group: &str, version: &str) -> (String, String) {
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    let tag = format!(
        "{}_{}",
        to_operation_id(trimmed, false),
        to_operation_id(version, false)
    );
    let verb = OPERATION_VERBS
        .iter()
        .filter(|v| route.operation.starts_with(**v))
        .min_by_key(|v| v.len())
        .copied()
        .unwrap_or("");
    let capitalize = !verb.is_empty();
    let id = format!(
        "{verb}{}{}{}",
        to_operation_id(trimmed, capitalize),
        to_operation_id(version, capitalize),
        to_operation_id(&route.operation[verb.len()..], capitalize)
    );
    (id, tag)
}

/// The responses of a route: its status codes with the model in JSON and
/// YAML, and the common 401.
fn responses(route: &Route, kind_name: &str, list_name: &str) -> Value {
    let model = model_ref(route.returns, kind_name, list_name);
    let response = |message: &str| {
        json!({
            "description": message,
            "content": {
                "application/json": {"schema": model},
                "application/yaml": {"schema": model},
            },
        })
    };
    let mut out = Map::new();
    out.insert("200".into(), response("OK"));
    match route.action {
        "post" => {
            out.insert("201".into(), response("Created"));
            out.insert("202".into(), response("Accepted"));
        }
        "delete" => {
            out.insert("202".into(), response("Accepted"));
        }
        "put" => {
            out.insert("201".into(), response("Created"));
        }
        _ => {}
    }
    out.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(out)
}

fn request_body(route: &Route, kind_name: &str, list_name: &str) -> Option<Value> {
    let (model, required) = route.reads?;
    let consumes: &[&str] = if route.method == "PATCH" {
        &[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]
    } else {
        &["application/json", "application/yaml"]
    };
    let schema = model_ref(model, kind_name, list_name);
    let content: Map<String, Value> = consumes
        .iter()
        .map(|c| ((*c).to_string(), json!({"schema": schema})))
        .collect();
    let mut body = json!({"content": content});
    if required {
        body["required"] = json!(true);
    }
    Some(body)
}

/// A path item: the routes on one path, with the parameters all of them
/// share moved to the path (kube-openapi's `findCommonParameters`, sorted
/// by location then name).
fn path_item(
    crd: &CustomResourceDefinition,
    v: &Version,
    routes: &[&Route],
    kind_name: &str,
    list_name: &str,
) -> Value {
    let kind = &crd.names.kind;
    let per_route: Vec<Vec<Param>> = routes.iter().map(|r| params(r, kind)).collect();
    let mut common: Vec<Param> = per_route
        .first()
        .map(|first| {
            first
                .iter()
                .filter(|p| {
                    per_route
                        .iter()
                        .all(|ps| ps.iter().any(|q| q.name == p.name && q.path == p.path))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    common.sort_by(|a, b| (!a.path, a.name).cmp(&(!b.path, b.name)));
    let mut item = Map::new();
    for (route, route_params) in routes.iter().zip(&per_route) {
        let (operation_id, tag) = operation_id_and_tag(route, &crd.group, &v.name);
        let own: Vec<Value> = route_params
            .iter()
            .filter(|p| !common.iter().any(|c| c.name == p.name && c.path == p.path))
            .map(Param::to_json)
            .collect();
        let mut op = json!({
            "tags": [tag],
            "description": description(route, kind),
            "operationId": operation_id,
            "responses": responses(route, kind_name, list_name),
            "x-kubernetes-action": route.action,
            "x-kubernetes-group-version-kind": {"group": crd.group, "version": v.name, "kind": kind},
        });
        if !own.is_empty() {
            op["parameters"] = Value::Array(own);
        }
        if let Some(body) = request_body(route, kind_name, list_name) {
            op["requestBody"] = body;
        }
        item.insert(route.method.to_ascii_lowercase(), op);
    }
    item.insert(
        "parameters".into(),
        Value::Array(common.iter().map(Param::to_json).collect()),
    );
    Value::Object(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(scope: &str, extra_version: Option<Value>) -> CustomResourceDefinition {
        let mut versions = vec![json!({
            "name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "description": "A widget.",
                "example": {"ignored": true},
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "port": {"x-kubernetes-int-or-string": true},
                        "size": {"x-kubernetes-int-or-string": true, "anyOf": [{"minimum": 1}]},
                        "exact": {"x-kubernetes-int-or-string": true,
                                  "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "pod": {"type": "object", "x-kubernetes-embedded-resource": true,
                                "x-kubernetes-preserve-unknown-fields": true, "required": ["spec"]},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a", "description": ""},
                    }},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                },
            }},
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
        })];
        versions.extend(extra_version);
        CustomResourceDefinition::from_value(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.k8s.io",
                         "annotations": {"api-approved.kubernetes.io": "unapproved, a test fixture"}},
            "spec": {
                "group": "example.k8s.io",
                "scope": scope,
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": versions,
            },
        }))
        .unwrap()
    }

    fn doc(crd: &CustomResourceDefinition) -> Value {
        group_version_document([crd], "example.k8s.io", "v1").unwrap()
    }

    #[test]
    fn names_follow_kube_apiserver() {
        assert_eq!(
            definition_name("stable.example.com", "v1", "CronTab"),
            "com.example.stable.v1.CronTab"
        );
        assert_eq!(
            index_key("stable.example.com", "v1"),
            "apis/stable.example.com/v1"
        );
        let e = etag(b"{}");
        assert_eq!(e.len(), 128);
        assert!(
            e.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        );
    }

    #[test]
    fn the_kind_schema_is_the_structural_schema_with_object_metadata() {
        let d = doc(&crd("Namespaced", None));
        let s = &d["components"]["schemas"]["io.k8s.example.v1.Widget"];
        assert_eq!(s["description"], "A widget.");
        assert!(
            s.get("example").is_none(),
            "not part of a structural schema"
        );
        assert_eq!(
            s["x-kubernetes-group-version-kind"],
            json!([{"group": "example.k8s.io", "kind": "Widget", "version": "v1"}])
        );
        assert_eq!(
            s["properties"]["metadata"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(
            s["properties"]["apiVersion"]["description"]
                .as_str()
                .unwrap()
                .starts_with("APIVersion defines")
        );
        let spec = &s["properties"]["spec"]["properties"];
        // int-or-string unfolded as kube-apiserver's Unfold does.
        assert_eq!(
            spec["port"]["anyOf"],
            json!([{"type": "integer"}, {"type": "string"}])
        );
        assert_eq!(
            spec["size"]["allOf"],
            json!([{"anyOf": [{"type": "integer"}, {"type": "string"}]}])
        );
        assert_eq!(spec["size"]["anyOf"], json!([{"minimum": 1}]));
        assert!(spec["exact"].get("allOf").is_none());
        assert_eq!(spec["tags"]["x-kubernetes-list-type"], "set");
        assert_eq!(
            spec["labels"]["additionalProperties"],
            json!({"type": "string"})
        );
        assert_eq!(
            spec["mode"],
            json!({"type": "string", "enum": ["a", "b"], "default": "a"})
        );
        // Embedded resources get their own type and object metadata.
        let pod = &spec["pod"];
        assert_eq!(pod["required"], json!(["spec", "kind", "apiVersion"]));
        assert_eq!(pod["properties"]["kind"]["type"], "string");
        assert!(
            pod["properties"]["metadata"]["$ref"]
                .as_str()
                .unwrap()
                .ends_with("ObjectMeta")
        );
    }

    #[test]
    fn the_list_kind_and_referenced_meta_schemas_are_included() {
        let d = doc(&crd("Namespaced", None));
        let schemas = d["components"]["schemas"].as_object().unwrap();
        let list = &schemas["io.k8s.example.v1.WidgetList"];
        assert_eq!(list["description"], "WidgetList is a list of Widget");
        assert_eq!(list["required"], json!(["items"]));
        assert_eq!(
            list["properties"]["items"]["items"]["$ref"],
            "#/components/schemas/io.k8s.example.v1.Widget"
        );
        assert_eq!(
            list["x-kubernetes-group-version-kind"][0]["kind"],
            "WidgetList"
        );
        for name in [
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
            "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
            "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
            "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
            "io.k8s.api.autoscaling.v1.Scale",
            "io.k8s.api.autoscaling.v1.ScaleSpec",
        ] {
            assert!(schemas.contains_key(name), "{name} missing");
        }
        // Without a scale subresource, Scale is not referenced.
        let mut plain = crd("Namespaced", None);
        plain.versions[0].subresources.scale = None;
        assert!(
            !doc(&plain)["components"]["schemas"]
                .as_object()
                .unwrap()
                .contains_key("io.k8s.api.autoscaling.v1.Scale")
        );
    }

    #[test]
    fn namespaced_paths_and_operations() {
        let d = doc(&crd("Namespaced", None));
        let paths = d["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "/apis/example.k8s.io/v1/namespaces/{namespace}/widgets",
                "/apis/example.k8s.io/v1/namespaces/{namespace}/widgets/{name}",
                "/apis/example.k8s.io/v1/namespaces/{namespace}/widgets/{name}/scale",
                "/apis/example.k8s.io/v1/namespaces/{namespace}/widgets/{name}/status",
                "/apis/example.k8s.io/v1/widgets",
            ]
        );
        let collection = &paths["/apis/example.k8s.io/v1/namespaces/{namespace}/widgets"];
        let list = &collection["get"];
        assert_eq!(list["operationId"], "listExampleV1NamespacedWidget");
        assert_eq!(list["tags"], json!(["example_v1"]));
        assert_eq!(list["description"], "list objects of kind Widget");
        assert_eq!(list["x-kubernetes-action"], "list");
        assert_eq!(
            list["x-kubernetes-group-version-kind"],
            json!({"group": "example.k8s.io", "version": "v1", "kind": "Widget"})
        );
        assert_eq!(
            list["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.example.v1.WidgetList"
        );
        assert_eq!(
            list["responses"]["401"],
            json!({"description": "Unauthorized"})
        );
        let names = |params: &Value| -> Vec<String> {
            params
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(&collection["parameters"]), ["namespace", "pretty"]);
        assert_eq!(
            names(&list["parameters"])[..3],
            ["labelSelector", "fieldSelector", "watch"]
        );
        let create = &collection["post"];
        assert_eq!(create["operationId"], "createExampleV1NamespacedWidget");
        assert_eq!(create["description"], "create a Widget");
        assert_eq!(
            names(&create["parameters"]),
            ["dryRun", "fieldManager", "fieldValidation"]
        );
        assert_eq!(create["requestBody"]["required"], true);
        assert!(
            create["responses"].get("201").is_some() && create["responses"].get("202").is_some()
        );
        assert_eq!(
            collection["delete"]["operationId"],
            "deleteExampleV1CollectionNamespacedWidget"
        );
        assert_eq!(
            collection["delete"]["description"],
            "delete collection of Widget"
        );

        let object = &paths["/apis/example.k8s.io/v1/namespaces/{namespace}/widgets/{name}"];
        assert_eq!(
            names(&object["parameters"]),
            ["name", "namespace", "pretty"]
        );
        assert_eq!(object["parameters"][0]["description"], "name of the Widget");
        assert_eq!(object["parameters"][0]["required"], true);
        let patch = &object["patch"];
        assert_eq!(patch["operationId"], "patchExampleV1NamespacedWidget");
        assert_eq!(
            patch["description"],
            "partially update the specified Widget"
        );
        // kubectl looks for fieldValidation on PATCH before leaving
        // validation to the server.
        assert_eq!(
            names(&patch["parameters"]),
            ["dryRun", "force", "fieldManager", "fieldValidation"]
        );
        let consumes: Vec<&String> = patch["requestBody"]["content"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            consumes,
            [
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json"
            ]
        );
        assert!(object["delete"]["requestBody"].get("required").is_none());
        assert_eq!(
            object["get"]["operationId"],
            "readExampleV1NamespacedWidget"
        );
        assert_eq!(names(&object["get"]["parameters"]), ["resourceVersion"]);

        let status = &paths["/apis/example.k8s.io/v1/namespaces/{namespace}/widgets/{name}/status"];
        assert_eq!(
            status["put"]["operationId"],
            "replaceExampleV1NamespacedWidgetStatus"
        );
        assert_eq!(
            status["put"]["description"],
            "replace status of the specified Widget"
        );
        let scale = &paths["/apis/example.k8s.io/v1/namespaces/{namespace}/widgets/{name}/scale"];
        assert_eq!(
            scale["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
        );
        assert_eq!(
            scale["get"]["x-kubernetes-group-version-kind"]["kind"],
            "Widget"
        );

        let all = &paths["/apis/example.k8s.io/v1/widgets"];
        assert_eq!(
            all["get"]["operationId"],
            "listExampleV1WidgetForAllNamespaces"
        );
        assert!(
            all["get"].get("parameters").is_none(),
            "a lone route's parameters are the path's"
        );
        let all_params = names(&all["parameters"]);
        let mut sorted = all_params.clone();
        sorted.sort();
        assert_eq!(all_params, sorted);
        assert!(
            all_params.contains(&"pretty".to_string()) && all_params.contains(&"watch".to_string())
        );
    }

    #[test]
    fn cluster_scoped_resources_have_no_namespace() {
        let d = doc(&crd("Cluster", None));
        let paths = d["paths"].as_object().unwrap();
        assert!(paths.keys().all(|k| !k.contains("{namespace}")));
        assert_eq!(
            paths["/apis/example.k8s.io/v1/widgets"]["get"]["operationId"],
            "listExampleV1Widget"
        );
        assert_eq!(
            paths["/apis/example.k8s.io/v1/widgets/{name}"]["delete"]["operationId"],
            "deleteExampleV1Widget"
        );
    }

    #[test]
    fn versions_and_crds_of_a_group_version_merge() {
        let mut v2 = crd("Namespaced", None).versions[0].schema_json.clone();
        v2["description"] = json!("The second version.");
        let two = crd(
            "Namespaced",
            Some(json!({"name": "v2", "served": true, "storage": false,
                        "schema": {"openAPIV3Schema": v2}})),
        );
        let d2 = group_version_document([&two], "example.k8s.io", "v2").unwrap();
        assert_eq!(
            d2["components"]["schemas"]["io.k8s.example.v2.Widget"]["description"],
            "The second version."
        );
        assert!(
            d2["paths"]
                .as_object()
                .unwrap()
                .keys()
                .all(|k| k.contains("/v2/"))
        );
        // No status subresource declared on v2.
        assert!(
            d2["paths"]
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.ends_with("/status"))
        );

        let mut other = crd("Cluster", None);
        other.names.kind = "Gadget".into();
        other.names.list_kind = "GadgetList".into();
        other.names.plural = "gadgets".into();
        let merged = group_version_document([&two, &other], "example.k8s.io", "v1").unwrap();
        let schemas = merged["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.example.v1.Widget"));
        assert!(schemas.contains_key("io.k8s.example.v1.Gadget"));
        assert!(
            merged["paths"]
                .as_object()
                .unwrap()
                .contains_key("/apis/example.k8s.io/v1/gadgets")
        );

        // Versions not served, and other groups, have no document.
        let mut unserved = crd("Namespaced", None);
        unserved.versions[0].served = false;
        assert!(group_version_document([&unserved], "example.k8s.io", "v1").is_none());
        assert!(group_version_document([&two], "other.example.com", "v1").is_none());
        assert!(group_version_document([&two], "example.k8s.io", "v3").is_none());
    }

    #[test]
    fn the_index_entry_carries_the_body_hash() {
        let widgets = crd("Namespaced", None);
        let doc = GroupVersionDocument::build([&widgets], "example.k8s.io", "v1").unwrap();
        assert_eq!(doc.etag(), etag(doc.body()));
        let parsed: Value = serde_json::from_slice(doc.body()).unwrap();
        assert_eq!(
            parsed,
            group_version_document([&widgets], "example.k8s.io", "v1").unwrap()
        );
        let (key, entry) = doc.index_entry();
        assert_eq!(key, "apis/example.k8s.io/v1");
        assert_eq!(
            entry["serverRelativeURL"],
            format!("/openapi/v3/apis/example.k8s.io/v1?hash={}", doc.etag())
        );
        // A changed CRD gets a new hash.
        let mut changed = widgets.clone();
        changed.versions[0].schema_json["description"] = json!("Changed.");
        let doc2 = GroupVersionDocument::build([&changed], "example.k8s.io", "v1").unwrap();
        assert_ne!(doc.etag(), doc2.etag());
    }

    #[test]
    fn operation_ids_and_articles() {
        assert_eq!(
            to_operation_id("stable.example.com", true),
            "StableExampleCom"
        );
        assert_eq!(
            to_operation_id("stable.example.com", false),
            "stableExampleCom"
        );
        assert_eq!(to_operation_id("k8s-1.io", false), "k8s1Io");
        assert_eq!(to_operation_id("v1beta1", true), "V1beta1");
        assert_eq!(article_for("Ingress"), " an ");
        assert_eq!(article_for("CronTab"), " a ");
        assert_eq!(article_for("Things"), " ");
    }
}
