//! A `CustomResourceDefinition` (apiextensions.k8s.io/v1): defaulting and
//! validation on create and update as kube-apiserver does them, and the
//! parsed definition the server serves a resource from.
//!
//! kube-apiserver converts a v1 CRD to its internal form before validating:
//! when every version has the same `schema` (`subresources`,
//! `additionalPrinterColumns`), it is moved to the top-level
//! `spec.validation` (`spec.subresources`, `spec.additionalPrinterColumns`).
//! Error paths follow that form, so a single-version CRD's schema errors
//! read `spec.validation.openAPIV3Schema...` and a CRD whose versions
//! differ reads `spec.versions[1].schema.openAPIV3Schema...`, as on a real
//! cluster.

use serde_json::{Value, json};

use super::field::{BadValue, FieldError, FieldPath, invalid_status};
use super::names;
use super::schema::Schema;
use super::structural;

/// The group of CustomResourceDefinitions.
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The kind of CustomResourceDefinitions.
pub const CRD_KIND: &str = "CustomResourceDefinition";

const PRINTER_COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const PRINTER_COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// Whether the custom resource is namespaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `Namespaced`.
    Namespaced,
    /// `Cluster`.
    Cluster,
}

/// `spec.names`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Names {
    /// Plural resource name, e.g. `crontabs`.
    pub plural: String,
    /// Singular name, e.g. `crontab`.
    pub singular: String,
    /// Kind, e.g. `CronTab`.
    pub kind: String,
    /// List kind, e.g. `CronTabList`.
    pub list_kind: String,
    /// Short names for kubectl, e.g. `ct`.
    pub short_names: Vec<String>,
    /// Categories for kubectl, e.g. `all`.
    pub categories: Vec<String>,
}

/// The scale subresource's paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    /// JSON path of the desired replicas, under `.spec`.
    pub spec_replicas_path: String,
    /// JSON path of the observed replicas, under `.status`.
    pub status_replicas_path: String,
    /// JSON path of the serialized label selector, if any.
    pub label_selector_path: Option<String>,
}

/// The subresources a version serves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subresources {
    /// `status` is served.
    pub status: bool,
    /// `scale` is served with these paths.
    pub scale: Option<Scale>,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// Optional format hint.
    pub format: Option<String>,
    /// Column description.
    pub description: Option<String>,
    /// 0 for the default columns, more for `-o wide`.
    pub priority: i64,
    /// Simple JSONPath into the object, e.g. `.spec.replicas`.
    pub json_path: String,
}

/// One served or stored version.
#[derive(Debug, Clone)]
pub struct Version {
    /// Version name, e.g. `v1`.
    pub name: String,
    /// Served over the REST API.
    pub served: bool,
    /// The storage version (exactly one is).
    pub storage: bool,
    /// Marked deprecated.
    pub deprecated: bool,
    /// The warning sent to clients of a deprecated version.
    pub deprecation_warning: Option<String>,
    /// The compiled schema.
    pub schema: Schema,
    /// The schema's JSON (for OpenAPI).
    pub schema_json: Value,
    /// Served subresources.
    pub subresources: Subresources,
    /// Extra printer columns.
    pub printer_columns: Vec<PrinterColumn>,
}

/// A validated, parsed CustomResourceDefinition.
#[derive(Debug, Clone)]
pub struct CustomResourceDefinition {
    /// `metadata.name`: `<plural>.<group>`.
    pub name: String,
    /// API group.
    pub group: String,
    /// Names.
    pub names: Names,
    /// Scope.
    pub scope: Scope,
    /// Versions in the order declared.
    pub versions: Vec<Version>,
}

impl CustomResourceDefinition {
    /// Defaults, validates and parses a CRD as kube-apiserver does on
    /// create. Errors are the causes of its `422` (see [`invalid_crd_status`]).
    pub fn from_value(crd: &Value) -> Result<Self, Vec<FieldError>> {
        let mut crd = crd.clone();
        apply_crd_defaults(&mut crd);
        let errors = validate_crd(&crd);
        if !errors.is_empty() {
            return Err(errors);
        }
        parse(&crd)
    }

    /// The storage version.
    pub fn storage_version(&self) -> Option<&Version> {
        self.versions.iter().find(|v| v.storage)
    }

    /// The version named `name`.
    pub fn version(&self, name: &str) -> Option<&Version> {
        self.versions.iter().find(|v| v.name == name)
    }

    /// Whether objects are namespaced.
    pub fn namespaced(&self) -> bool {
        self.scope == Scope::Namespaced
    }
}

/// The `422 Invalid` `Status` for a rejected CRD:
/// `CustomResourceDefinition.apiextensions.k8s.io "<name>" is invalid: ...`.
pub fn invalid_crd_status(name: &str, errors: &[FieldError]) -> Value {
    invalid_status(CRD_GROUP, CRD_KIND, name, errors)
}

/// kube-apiserver's defaulting of a v1 CRD: `names.singular` (lower-case
/// kind), `names.listKind` (`<kind>List`), `conversion.strategy: None`,
/// `preserveUnknownFields: false`, a webhook service port of 443.
pub fn apply_crd_defaults(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if names
            .get("singular")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            && !kind.is_empty()
        {
            names.insert("singular".into(), Value::String(kind.to_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            && !kind.is_empty()
        {
            names.insert("listKind".into(), Value::String(format!("{kind}List")));
        }
    }
    let conversion = spec.entry("conversion").or_insert_with(|| json!({}));
    if let Some(conversion) = conversion.as_object_mut() {
        conversion
            .entry("strategy")
            .or_insert_with(|| json!("None"));
        if let Some(service) = conversion
            .get_mut("webhook")
            .and_then(|w| w.get_mut("clientConfig"))
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            service.entry("port").or_insert_with(|| json!(443));
        }
    }
    spec.entry("preserveUnknownFields")
        .or_insert(Value::Bool(false));
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A Go-syntax rendering of `spec.versions` for errors whose bad value is
/// the whole list (kube-apiserver prints the internal structs with `%#v`;
/// this keeps the fields a reader needs, not the pointers).
fn versions_value(versions: &[Value]) -> BadValue {
    let items: Vec<String> = versions
        .iter()
        .map(|v| {
            format!(
                "apiextensions.CustomResourceDefinitionVersion{{Name:{}, Served:{}, Storage:{}}}",
                super::field::go_quote(s(v, "name")),
                v.get("served").and_then(Value::as_bool).unwrap_or(false),
                v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            )
        })
        .collect();
    BadValue::Raw(format!(
        "[]apiextensions.CustomResourceDefinitionVersion{{{}}}",
        items.join(", ")
    ))
}

/// Where each per-version section is validated: at the top level when all
/// versions carry the same value (kube-apiserver's internal form), per
/// version otherwise.
struct Sections {
    schema_top: bool,
    subresources_top: bool,
    columns_top: bool,
}

fn sections(versions: &[Value]) -> Sections {
    let identical = |key: &str| {
        versions.first().is_some_and(|first| {
            let value = first.get(key).filter(|v| !v.is_null());
            value.is_some()
                && versions
                    .iter()
                    .all(|v| v.get(key).filter(|v| !v.is_null()) == value)
        })
    };
    Sections {
        schema_top: identical("schema"),
        subresources_top: identical("subresources"),
        columns_top: identical("additionalPrinterColumns")
            && versions
                .first()
                .and_then(|v| v.get("additionalPrinterColumns"))
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()),
    }
}

/// Validates a (defaulted) v1 CRD as kube-apiserver does on create.
pub fn validate_crd(crd: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let group = s(&spec, "group");
    let names = spec.get("names").cloned().unwrap_or(Value::Null);
    let plural = s(&names, "plural");

    // metadata.name: a DNS subdomain equal to <plural>.<group>.
    let meta = crd.get("metadata").cloned().unwrap_or(Value::Null);
    let name = s(&meta, "name");
    if name.is_empty() && s(&meta, "generateName").is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if !name.is_empty() {
        let mut problems = names::dns1123_subdomain(name);
        if name != format!("{plural}.{group}") {
            problems.push("must be spec.names.plural+\".\"+spec.group".to_string());
        }
        for p in problems {
            errs.push(FieldError::invalid("metadata.name", BadValue::str(name), p));
        }
    }

    errs.extend(validate_api_approval(&meta, group));

    let spec_path = FieldPath::new("spec");
    if group.is_empty() {
        errs.push(FieldError::required(spec_path.child("group"), ""));
    } else {
        let problems = names::dns1123_subdomain(group);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                spec_path.child("group"),
                BadValue::str(group),
                problems.join(","),
            ));
        } else if !group.contains('.') {
            errs.push(FieldError::invalid(
                spec_path.child("group"),
                BadValue::str(group),
                "should be a domain with at least one dot",
            ));
        }
    }
    match s(&spec, "scope") {
        "" => errs.push(FieldError::required(spec_path.child("scope"), "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            spec_path.child("scope"),
            BadValue::str(other),
            &["Cluster", "Namespaced"],
        )),
    }

    let versions: Vec<Value> = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let sec = sections(&versions);
    let top_schema = if sec.schema_top {
        versions.first().and_then(|v| v.get("schema"))
    } else {
        None
    };
    let top_subresources = if sec.subresources_top {
        versions.first().and_then(|v| v.get("subresources"))
    } else {
        None
    };
    let status_enabled = |v: &Value| {
        let sub = if sec.subresources_top {
            top_subresources
        } else {
            v.get("subresources")
        };
        sub.and_then(|s| s.get("status"))
            .is_some_and(|s| !s.is_null())
    };
    let any_status = versions.iter().any(status_enabled);

    // Every version needs a schema (pruning requires one).
    if top_schema.and_then(|s| s.get("openAPIV3Schema")).is_none() {
        for (i, v) in versions.iter().enumerate() {
            if v.get("schema")
                .and_then(|s| s.get("openAPIV3Schema"))
                .is_none_or(Value::is_null)
            {
                errs.push(FieldError::required(
                    spec_path
                        .child("versions")
                        .index(i)
                        .child("schema")
                        .child("openAPIV3Schema"),
                    "schemas are required",
                ));
            }
        }
    }

    let mut storage = 0;
    let mut seen = Vec::new();
    let mut unique = true;
    for (i, v) in versions.iter().enumerate() {
        let vpath = spec_path.child("versions").index(i);
        let vname = s(v, "name");
        if v.get("storage").and_then(Value::as_bool).unwrap_or(false) {
            storage += 1;
        }
        if seen.contains(&vname) {
            unique = false;
        } else {
            seen.push(vname);
        }
        let problems = names::dns1035_label(vname);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                vpath.child("name"),
                BadValue::str(vname),
                problems.join(","),
            ));
        }
        let deprecated = v
            .get("deprecated")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if let Some(warning) = v.get("deprecationWarning").and_then(Value::as_str) {
            let wpath = vpath.child("deprecationWarning");
            if !deprecated {
                errs.push(FieldError::invalid(
                    wpath.clone(),
                    BadValue::str(warning),
                    "can only be set for deprecated versions",
                ));
            }
            if warning.len() > 256 {
                errs.push(FieldError::invalid(
                    wpath.clone(),
                    BadValue::str(warning),
                    "must be <= 256 characters long",
                ));
            }
            if warning.is_empty() {
                errs.push(FieldError::invalid(
                    wpath,
                    BadValue::str(warning),
                    "must not be an empty string",
                ));
            }
        }
        if !sec.schema_top
            && let Some(schema) = v.get("schema").and_then(|s| s.get("openAPIV3Schema"))
        {
            let sp = vpath.child("schema").child("openAPIV3Schema");
            errs.extend(structural::validate_schema(schema, status_enabled(v), &sp));
        }
        if !sec.subresources_top {
            errs.extend(validate_subresources(
                v.get("subresources"),
                &vpath.child("subresources"),
            ));
        }
        if !sec.columns_top {
            errs.extend(validate_columns(
                v.get("additionalPrinterColumns"),
                &vpath.child("additionalPrinterColumns"),
            ));
        }
    }
    if !unique {
        errs.push(FieldError::invalid(
            spec_path.child("versions"),
            versions_value(&versions),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            spec_path.child("versions"),
            versions_value(&versions),
            "must have exactly one version marked as storage version",
        ));
    }

    for (key, field) in [
        ("plural", "plural"),
        ("singular", "singular"),
        ("kind", "kind"),
        ("listKind", "listKind"),
    ] {
        if s(&names, key).is_empty() {
            errs.push(FieldError::required(
                spec_path.child("names").child(field),
                "",
            ));
        }
    }
    errs.extend(validate_names(&names, &spec_path.child("names")));

    if let Some(schema) = top_schema.and_then(|s| s.get("openAPIV3Schema")) {
        let sp = spec_path.child("validation").child("openAPIV3Schema");
        errs.extend(structural::validate_schema(schema, any_status, &sp));
    }
    if sec.subresources_top {
        errs.extend(validate_subresources(
            top_subresources,
            &spec_path.child("subresources"),
        ));
    }
    if sec.columns_top {
        errs.extend(validate_columns(
            versions
                .first()
                .and_then(|v| v.get("additionalPrinterColumns")),
            &spec_path.child("additionalPrinterColumns"),
        ));
    }
    errs.extend(validate_conversion(
        spec.get("conversion"),
        &spec_path.child("conversion"),
    ));
    if spec.get("preserveUnknownFields") == Some(&Value::Bool(true)) {
        errs.push(FieldError::invalid(
            spec_path.child("preserveUnknownFields"),
            BadValue::Json(Value::Bool(true)),
            "cannot set to true, set x-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    errs
}

/// The annotation a CRD in a protected group (`k8s.io`, `kubernetes.io`
/// and their subdomains) must carry.
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

/// apiextensions' `ValidateAPIApproval` on create: a CRD in a protected
/// group needs [`API_APPROVED_ANNOTATION`] with a URL or a reason starting
/// with `unapproved`.
fn validate_api_approval(meta: &Value, group: &str) -> Vec<FieldError> {
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|p| group == *p || group.ends_with(&format!(".{p}")));
    if !protected {
        return Vec::new();
    }
    let value = meta
        .pointer(&format!("/annotations/{API_APPROVED_ANNOTATION}"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let path = FieldPath::new("metadata")
        .child("annotations")
        .key(API_APPROVED_ANNOTATION);
    if value.is_empty() {
        return vec![FieldError::required(
            path,
            format!(
                "protected groups must have approval annotation {}, see https://github.com/kubernetes/enhancements/pull/1111",
                super::field::go_quote(API_APPROVED_ANNOTATION)
            ),
        )];
    }
    let is_url = value.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty() && !rest.is_empty() && !rest.starts_with('/')
    });
    if value.starts_with("unapproved") || is_url {
        return Vec::new();
    }
    vec![FieldError::invalid(
        path,
        BadValue::str(value),
        format!(
            "protected groups must have approval annotation {} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111",
            super::field::go_quote(API_APPROVED_ANNOTATION)
        ),
    )]
}

/// Validates an update of `old` to `new` (both defaulted): everything a
/// create checks, plus the immutable `spec.group` and
/// `spec.names.plural`, and `spec.scope` and `spec.names.kind` once `old`
/// is Established.
pub fn validate_crd_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_crd(new);
    let immutable = |path: &str, pointer: &str, errs: &mut Vec<FieldError>| {
        let n = new.pointer(pointer).cloned().unwrap_or(Value::Null);
        if Some(&n) != old.pointer(pointer).or(Some(&Value::Null)) {
            errs.push(FieldError::invalid(
                path,
                BadValue::Json(n),
                "field is immutable",
            ));
        }
    };
    let established = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| s(c, "type") == "Established" && s(c, "status") == "True")
        });
    if established {
        immutable("spec.scope", "/spec/scope", &mut errs);
        immutable("spec.names.kind", "/spec/names/kind", &mut errs);
    }
    immutable("spec.group", "/spec/group", &mut errs);
    immutable("spec.names.plural", "/spec/names/plural", &mut errs);
    errs
}

fn validate_names(names: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in ["plural", "singular"] {
        let v = s(names, key);
        let problems = names::dns1035_label(v);
        if !v.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(
                path.child(key),
                BadValue::str(v),
                problems.join(","),
            ));
        }
    }
    for key in ["kind", "listKind"] {
        let v = s(names, key);
        let problems = names::dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(
                path.child(key),
                BadValue::str(v),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    problems.join(",")
                ),
            ));
        }
    }
    for (i, short) in strings(names, "shortNames").iter().enumerate() {
        let problems = names::dns1035_label(short);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                path.child("shortNames").index(i),
                BadValue::str(short.as_str()),
                problems.join(","),
            ));
        }
    }
    let kind = s(names, "kind");
    if !kind.is_empty() && kind == s(names, "listKind") {
        errs.push(FieldError::invalid(
            path.child("listKind"),
            BadValue::str(kind),
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in strings(names, "categories").iter().enumerate() {
        let problems = names::dns1035_label(category);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                path.child("categories").index(i),
                BadValue::str(category.as_str()),
                problems.join(","),
            ));
        }
    }
    errs
}

fn validate_conversion(conversion: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(conversion) = conversion.filter(|c| !c.is_null()) else {
        return errs;
    };
    match s(conversion, "strategy") {
        "" => errs.push(FieldError::required(path.child("strategy"), "")),
        "None" => {
            if conversion.get("webhook").is_some_and(|w| !w.is_null()) {
                errs.push(FieldError::forbidden(
                    path.child("webhookClientConfig"),
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        "Webhook" => errs.push(FieldError::forbidden(
            path.child("strategy"),
            "Webhook conversion is not supported by the test cluster (ctrlkit-testcluster serves every version from one stored object without conversion); use None",
        )),
        other => errs.push(FieldError::not_supported(path.child("strategy"), BadValue::str(other), &["None", "Webhook"])),
    }
    errs
}

/// apiextensions' `validateSimpleJSONPath`.
fn validate_simple_json_path(p: &str, path: &FieldPath) -> Vec<FieldError> {
    if p.is_empty() {
        vec![FieldError::invalid(
            path.clone(),
            BadValue::str(p),
            "must not be empty",
        )]
    } else if !p.starts_with('.') {
        vec![FieldError::invalid(
            path.clone(),
            BadValue::str(p),
            "must be a simple json path starting with .",
        )]
    } else {
        Vec::new()
    }
}

fn validate_subresources(sub: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(scale) = sub.and_then(|s| s.get("scale")).filter(|s| !s.is_null()) else {
        return errs;
    };
    for (key, prefix, under) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let p = s(scale, key);
        let fpath = path.child(&format!("scale.{key}"));
        if p.is_empty() {
            errs.push(FieldError::required(fpath, ""));
        } else {
            let e = validate_simple_json_path(p, &fpath);
            if !e.is_empty() {
                errs.extend(e);
            } else if !p.starts_with(prefix) {
                errs.push(FieldError::invalid(fpath, BadValue::str(p), under));
            }
        }
    }
    let selector = s(scale, "labelSelectorPath");
    if !selector.is_empty() {
        let fpath = path.child("scale.labelSelectorPath");
        let e = validate_simple_json_path(selector, &fpath);
        if !e.is_empty() {
            errs.extend(e);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            errs.push(FieldError::invalid(
                fpath,
                BadValue::str(selector),
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

fn validate_columns(columns: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(columns) = columns.and_then(Value::as_array) else {
        return errs;
    };
    for (i, col) in columns.iter().enumerate() {
        let cpath = path.index(i);
        if s(col, "name").is_empty() {
            errs.push(FieldError::required(cpath.child("name"), ""));
        }
        let types = format!("must be one of {}", PRINTER_COLUMN_TYPES.join(","));
        match s(col, "type") {
            "" => errs.push(FieldError::required(cpath.child("type"), types)),
            t if !PRINTER_COLUMN_TYPES.contains(&t) => errs.push(FieldError::invalid(
                cpath.child("type"),
                BadValue::str(t),
                types,
            )),
            _ => {}
        }
        let format = s(col, "format");
        if !format.is_empty() && !PRINTER_COLUMN_FORMATS.contains(&format) {
            errs.push(FieldError::invalid(
                cpath.child("format"),
                BadValue::str(format),
                format!("must be one of {}", PRINTER_COLUMN_FORMATS.join(",")),
            ));
        }
        let json_path = s(col, "jsonPath");
        if json_path.is_empty() {
            errs.push(FieldError::required(cpath.child("JSONPath"), ""));
        } else {
            errs.extend(validate_simple_json_path(
                json_path,
                &cpath.child("JSONPath"),
            ));
        }
    }
    errs
}

fn parse_subresources(v: Option<&Value>) -> Subresources {
    let Some(v) = v else {
        return Subresources::default();
    };
    Subresources {
        status: v.get("status").is_some_and(|s| !s.is_null()),
        scale: v.get("scale").filter(|s| !s.is_null()).map(|scale| Scale {
            spec_replicas_path: s(scale, "specReplicasPath").to_string(),
            status_replicas_path: s(scale, "statusReplicasPath").to_string(),
            label_selector_path: scale
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(str::to_string),
        }),
    }
}

fn parse_columns(v: Option<&Value>) -> Vec<PrinterColumn> {
    v.and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: s(c, "name").to_string(),
                    type_: s(c, "type").to_string(),
                    format: c.get("format").and_then(Value::as_str).map(str::to_string),
                    description: c
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: s(c, "jsonPath").to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn parse(crd: &Value) -> Result<CustomResourceDefinition, Vec<FieldError>> {
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let names = spec.get("names").cloned().unwrap_or(Value::Null);
    let mut versions = Vec::new();
    let list = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, v) in list.iter().enumerate() {
        let schema_json = v
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or(Value::Null);
        let schema = Schema::compile(&schema_json).map_err(|e| {
            vec![FieldError::invalid(
                format!("spec.versions[{i}].schema.{}", e.path),
                BadValue::str(""),
                e.message,
            )]
        })?;
        versions.push(Version {
            name: s(v, "name").to_string(),
            served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            deprecated: v
                .get("deprecated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            deprecation_warning: v
                .get("deprecationWarning")
                .and_then(Value::as_str)
                .map(str::to_string),
            schema,
            schema_json,
            subresources: parse_subresources(v.get("subresources")),
            printer_columns: parse_columns(v.get("additionalPrinterColumns")),
        });
    }
    Ok(CustomResourceDefinition {
        name: s(crd.get("metadata").unwrap_or(&Value::Null), "name").to_string(),
        group: s(&spec, "group").to_string(),
        names: Names {
            plural: s(&names, "plural").to_string(),
            singular: s(&names, "singular").to_string(),
            kind: s(&names, "kind").to_string(),
            list_kind: s(&names, "listKind").to_string(),
            short_names: strings(&names, "shortNames"),
            categories: strings(&names, "categories"),
        },
        scope: if s(&spec, "scope") == "Cluster" {
            Scope::Cluster
        } else {
            Scope::Namespaced
        },
        versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "cronSpec": {"type": "string"},
                            "replicas": {"type": "integer"},
                        }},
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                    }}},
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}],
                }],
            }
        })
    }

    fn errors(crd: &Value) -> Vec<String> {
        match CustomResourceDefinition::from_value(crd) {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn a_valid_crd_parses() {
        let crd = CustomResourceDefinition::from_value(&crontab()).unwrap();
        assert_eq!(crd.names.list_kind, "CronTabList", "listKind is defaulted");
        assert_eq!(crd.storage_version().unwrap().name, "v1");
        let v1 = crd.version("v1").unwrap();
        assert!(v1.subresources.status);
        assert_eq!(
            v1.subresources.scale.as_ref().unwrap().spec_replicas_path,
            ".spec.replicas"
        );
        assert_eq!(v1.printer_columns[0].json_path, ".spec.cronSpec");
        assert!(crd.namespaced());
    }

    #[test]
    fn name_must_be_plural_dot_group() {
        let mut crd = crontab();
        crd["metadata"]["name"] = json!("crontab.stable.example.com");
        assert_eq!(
            errors(&crd),
            vec![
                "metadata.name: Invalid value: \"crontab.stable.example.com\": must be spec.names.plural+\".\"+spec.group"
            ]
        );
    }

    #[test]
    fn storage_and_scope_and_names() {
        let mut crd = crontab();
        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["scope"] = json!("Global");
        crd["spec"]["names"]["kind"] = json!("Cron Tab");
        crd["spec"]["names"]["shortNames"] = json!(["CT"]);
        let errs = errors(&crd);
        assert!(errs.contains(&"spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"".to_string()), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.starts_with(
                "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{"
            ) && e
                .ends_with("must have exactly one version marked as storage version"))
        );
        assert!(errs.iter().any(|e| e.starts_with("spec.names.kind: Invalid value: \"Cron Tab\": may have mixed case, but should otherwise match: a DNS-1035 label")));
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.names.shortNames[0]: Invalid value: \"CT\""))
        );
    }

    #[test]
    fn schema_errors_have_kube_apiserver_paths() {
        let mut crd = crontab();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["cronSpec"] = json!({});
        assert_eq!(
            errors(&crd),
            vec![
                "spec.validation.openAPIV3Schema.properties[spec].properties[cronSpec].type: Required value: must not be empty for specified object fields"
            ]
        );
        // With two versions whose schemas differ, the path is per version.
        let mut two = crontab();
        let mut v2 = two["spec"]["versions"][0].clone();
        v2["name"] = json!("v2");
        v2["storage"] = json!(false);
        v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"] =
            json!({"properties": {}});
        two["spec"]["versions"].as_array_mut().unwrap().push(v2);
        assert_eq!(
            errors(&two),
            vec![
                "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[replicas].type: Required value: must not be empty for specified object fields"
            ]
        );
    }

    #[test]
    fn missing_schema_and_webhook_conversion() {
        let mut crd = crontab();
        crd["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}});
        let errs = errors(&crd);
        assert!(
            errs.contains(
                &"spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"
                    .to_string()
            ),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.starts_with("spec.conversion.strategy: Forbidden: Webhook conversion is not supported by the test cluster")));
    }

    #[test]
    fn subresource_and_column_paths() {
        let mut crd = crontab();
        crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] =
            json!(".status.replicas");
        crd["spec"]["versions"][0]["additionalPrinterColumns"] =
            json!([{"name": "X", "type": "datetime", "jsonPath": "spec.x"}]);
        assert_eq!(
            errors(&crd),
            vec![
                "spec.subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": should be a json path under .spec",
                "spec.additionalPrinterColumns[0].type: Invalid value: \"datetime\": must be one of boolean,date,integer,number,string",
                "spec.additionalPrinterColumns[0].JSONPath: Invalid value: \"spec.x\": must be a simple json path starting with .",
            ]
        );
    }

    #[test]
    fn status_subresource_restricts_the_root() {
        let mut crd = crontab();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["additionalProperties"] =
            json!(true);
        let errs = errors(&crd);
        assert!(errs.iter().any(|e| e.starts_with("spec.validation.openAPIV3Schema: Invalid value:") && e.contains("fields are allowed at the root of the schema if the status subresource is enabled")), "{errs:?}");
    }

    #[test]
    fn protected_groups_need_approval() {
        let mut crd = crontab();
        crd["metadata"]["name"] = json!("crontabs.stable.k8s.io");
        crd["spec"]["group"] = json!("stable.k8s.io");
        assert_eq!(
            errors(&crd),
            vec![
                "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
            ]
        );
        crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "soon"});
        assert!(errors(&crd)[0].contains("Invalid value: \"soon\": protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\""));
        for ok in [
            "unapproved, testing only",
            "https://github.com/kubernetes/kubernetes/pull/1",
        ] {
            crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": ok});
            assert!(errors(&crd).is_empty(), "{ok}");
        }
    }

    #[test]
    fn updates_keep_group_and_plural() {
        let old = crontab();
        let mut new = crontab();
        new["spec"]["names"]["plural"] = json!("crontabz");
        new["metadata"]["name"] = json!("crontabz.stable.example.com");
        apply_crd_defaults(&mut new);
        let errs: Vec<String> = validate_crd_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec!["spec.names.plural: Invalid value: \"crontabz\": field is immutable"]
        );
        let status = invalid_crd_status(
            "crontabs.stable.example.com",
            &validate_crd_update(&new, &old),
        );
        assert_eq!(
            status["message"],
            "CustomResourceDefinition.apiextensions.k8s.io \"crontabs.stable.example.com\" is invalid: spec.names.plural: Invalid value: \"crontabz\": field is immutable"
        );
    }
}
