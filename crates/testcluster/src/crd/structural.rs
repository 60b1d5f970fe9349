//! Checks of an `openAPIV3Schema` when a CRD is created or updated:
//! apiextensions' `ValidateCustomResourceDefinitionOpenAPISchema` (what a
//! CRD schema may contain), `ValidateStructural` (the structural schema
//! rules) and `ValidateDefaults` (defaults must validate and be pruned).
//! They work on the schema's JSON, so every keyword the user wrote is seen.

use serde_json::{Map, Value};

use super::field::{BadValue, FieldError, FieldPath};
use super::schema::Schema;

const OPENAPI_V3_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];
const META_FIELDS: &[&str] = &["metadata", "kind", "apiVersion"];

/// Keywords allowed at the root of a schema when the status subresource is
/// enabled (`allowedFieldsAtRootSchema`), as JSON names.
const ALLOWED_AT_ROOT_WITH_STATUS: &[&str] = &[
    "description",
    "type",
    "format",
    "title",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
];
const GO_FIELD_NAMES_AT_ROOT: &str = "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";

fn str_of<'a>(s: &'a Map<String, Value>, key: &str) -> &'a str {
    s.get(key).and_then(Value::as_str).unwrap_or("")
}

fn bool_of(s: &Map<String, Value>, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn props(s: &Map<String, Value>) -> Option<&Map<String, Value>> {
    s.get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty())
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
    }
}

/// Validates the `openAPIV3Schema` at `path` (`...schema.openAPIV3Schema`).
pub(crate) fn validate_schema(
    schema: &Value,
    status_enabled: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(root) = schema.as_object() else {
        errs.push(FieldError::invalid(
            path.clone(),
            BadValue::Json(schema.clone()),
            "must be an object",
        ));
        return errs;
    };
    if status_enabled {
        for (k, v) in root {
            if is_zero(v) {
                continue;
            }
            if k == "type" {
                if v.as_str() != Some("object") {
                    errs.push(FieldError::invalid(
                        format!("{path}.type"),
                        BadValue::Json(v.clone()),
                        "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                    ));
                    break;
                }
                continue;
            }
            if !ALLOWED_AT_ROOT_WITH_STATUS.contains(&k.as_str()) {
                errs.push(FieldError::invalid(
                    path.clone(),
                    BadValue::Raw(format!("{{{k}: ...}}")),
                    format!("only {GO_FIELD_NAMES_AT_ROOT} fields are allowed at the root of the schema if the status subresource is enabled"),
                ));
                break;
            }
        }
    }
    if bool_of(root, "nullable") {
        errs.push(FieldError::forbidden(
            format!("{path}.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let ctx = Ctx {
        defaults_forbidden: None,
        inside_meta: false,
    };
    openapi_schema(root, path, &ctx, true, &mut errs);

    let mut structural_errs = Vec::new();
    invariants(root, Level::Root, path, &mut structural_errs);
    completeness(root, path, &mut structural_errs);
    structural_errs.sort_by_key(ToString::to_string);
    let structural_ok = structural_errs.is_empty();
    errs.extend(structural_errs);
    if structural_ok && errs.is_empty() {
        validate_defaults(schema, path, &mut errs);
    }
    errs
}

struct Ctx {
    /// `Some(reason)` where defaults are forbidden.
    defaults_forbidden: Option<String>,
    inside_meta: bool,
}

fn openapi_schema(
    s: &Map<String, Value>,
    path: &FieldPath,
    ctx: &Ctx,
    is_root: bool,
    errs: &mut Vec<FieldError>,
) {
    let ty = str_of(s, "type");
    if !ty.is_empty() && !OPENAPI_V3_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            path.child("type"),
            BadValue::str(ty),
            OPENAPI_V3_TYPES,
        ));
    }
    if s.contains_key("default")
        && let Some(reason) = &ctx.defaults_forbidden
    {
        errs.push(FieldError::forbidden(
            path.child("default"),
            format!("must not be set {reason}"),
        ));
    }
    for (key, what) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if s.get(key).is_some_and(|v| !is_zero(v)) {
            errs.push(FieldError::forbidden(path.child(key), what));
        }
    }
    if ty == "null" {
        errs.push(FieldError::forbidden(
            path.child("type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if s.get("items").is_some_and(Value::is_array) {
        errs.push(FieldError::forbidden(
            path.child("items"),
            "items must be a schema object and not an array",
        ));
    }
    if ctx.inside_meta && bool_of(s, "x-kubernetes-embedded-resource") {
        errs.push(FieldError::forbidden(
            path.child("x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }
    if bool_of(s, "uniqueItems") {
        errs.push(FieldError::forbidden(
            path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(add) = s.get("additionalProperties").filter(|v| !v.is_null()) {
        if props(s).is_some() && (add == &Value::Bool(false) || add.is_object()) {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Some(sub) = add.as_object() {
            let sub_ctx = Ctx {
                defaults_forbidden: if ctx.inside_meta {
                    Some("inside additionalProperties applying to object metadata".into())
                } else {
                    ctx.defaults_forbidden.clone()
                },
                inside_meta: ctx.inside_meta,
            };
            openapi_schema(
                sub,
                &path.child("additionalProperties"),
                &sub_ctx,
                false,
                errs,
            );
        }
    }
    if let Some(properties) = props(s) {
        let embedded = bool_of(s, "x-kubernetes-embedded-resource");
        for (name, sub) in properties {
            let Some(sub) = sub.as_object() else { continue };
            let mut sub_ctx = Ctx {
                defaults_forbidden: ctx.defaults_forbidden.clone(),
                inside_meta: ctx.inside_meta,
            };
            if (is_root || embedded) && META_FIELDS.contains(&name.as_str()) {
                sub_ctx.inside_meta = true;
                if is_root {
                    sub_ctx.defaults_forbidden = Some(format!("in top-level {name}"));
                }
            }
            openapi_schema(
                sub,
                &path.child("properties").key(name),
                &sub_ctx,
                false,
                errs,
            );
        }
    }
    if let Some(not) = s.get("not").and_then(Value::as_object) {
        openapi_schema(not, &path.child("not"), ctx, false, errs);
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        if let Some(list) = s.get(junctor).and_then(Value::as_array) {
            for (i, sub) in list.iter().enumerate() {
                if let Some(sub) = sub.as_object() {
                    openapi_schema(sub, &path.child(junctor).index(i), ctx, false, errs);
                }
            }
        }
    }
    if let Some(items) = s.get("items").and_then(Value::as_object) {
        openapi_schema(items, &path.child("items"), ctx, false, errs);
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            BadValue::Json(Value::Bool(false)),
            "must be true or undefined",
        ));
    }
    list_and_map_types(s, path, ty, errs);
    if let Some(rules) = s.get("x-kubernetes-validations").and_then(Value::as_array) {
        for (i, rule) in rules.iter().enumerate() {
            let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
            let message = rule.get("message").and_then(Value::as_str).unwrap_or("");
            let rule_path = path.child("x-kubernetes-validations").index(i);
            if text.trim().is_empty() {
                errs.push(FieldError::required(
                    rule_path.child("rule"),
                    "rule is not specified",
                ));
            } else if !message.is_empty() && message.trim().is_empty() {
                errs.push(FieldError::invalid(
                    rule_path.child("message"),
                    BadValue::str(message),
                    "message must be non-empty if specified",
                ));
            } else if message.trim().contains(['\n', '\r']) {
                errs.push(FieldError::invalid(
                    rule_path.child("message"),
                    BadValue::str(message),
                    "message must not contain line breaks",
                ));
            } else if text.trim().contains(['\n', '\r']) && message.trim().is_empty() {
                errs.push(FieldError::required(
                    rule_path.child("message"),
                    "message must be specified if rule contains line breaks",
                ));
            }
        }
    }
}

fn list_and_map_types(
    s: &Map<String, Value>,
    path: &FieldPath,
    ty: &str,
    errs: &mut Vec<FieldError>,
) {
    let map_type = s.get("x-kubernetes-map-type").and_then(Value::as_str);
    if let Some(mt) = map_type {
        if ty != "object" {
            if ty.is_empty() {
                errs.push(FieldError::required(
                    path.child("type"),
                    "must be object if x-kubernetes-map-type is specified",
                ));
            } else {
                errs.push(FieldError::invalid(
                    path.child("type"),
                    BadValue::str(ty),
                    "must be object if x-kubernetes-map-type is specified",
                ));
            }
        }
        if mt != "atomic" && mt != "granular" {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-map-type"),
                BadValue::str(mt),
                &["atomic", "granular"],
            ));
        }
    }
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    let items = s.get("items").and_then(Value::as_object);
    if let Some(lt) = list_type {
        if ty != "array" {
            if ty.is_empty() {
                errs.push(FieldError::required(
                    path.child("type"),
                    "must be array if x-kubernetes-list-type is specified",
                ));
            } else {
                errs.push(FieldError::invalid(
                    path.child("type"),
                    BadValue::str(ty),
                    "must be array if x-kubernetes-list-type is specified",
                ));
            }
        } else if lt == "set"
            && let Some(items) = items
        {
            match str_of(items, "type") {
                "array" => {
                    if let Some(inner) = items.get("x-kubernetes-list-type").and_then(Value::as_str)
                        && inner != "atomic"
                    {
                        errs.push(FieldError::invalid(
                            path.child("items").child("x-kubernetes-list-type"),
                            BadValue::str(inner),
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ));
                    }
                }
                "object"
                    if items.get("x-kubernetes-map-type").and_then(Value::as_str)
                        != Some("atomic") =>
                {
                    errs.push(FieldError::invalid(
                        path.child("items").child("x-kubernetes-map-type"),
                        BadValue::Raw("(*string)(nil)".into()),
                        "must be atomic as item of a list with x-kubernetes-list-type=set",
                    ));
                }
                _ => {}
            }
        }
        if !["atomic", "set", "map"].contains(&lt) {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-list-type"),
                BadValue::str(lt),
                &["atomic", "set", "map"],
            ));
        }
    }
    let keys: Vec<&str> = s
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !keys.is_empty() {
        match list_type {
            None => errs.push(FieldError::required(
                path.child("x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => errs.push(FieldError::invalid(
                path.child("x-kubernetes-list-type"),
                BadValue::str(other),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(
                path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match items {
            None => errs.push(FieldError::required(
                path.child("items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(items) if str_of(items, "type") != "object" => errs.push(FieldError::invalid(
                path.child("items").child("type"),
                BadValue::str(str_of(items, "type")),
                "must be object if parent array's x-kubernetes-list-type is map",
            )),
            Some(items) => {
                let item_props = items.get("properties").and_then(Value::as_object);
                let required: Vec<&str> = items
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let keys_value = BadValue::Json(Value::from(keys.clone()));
                for (i, k) in keys.iter().enumerate() {
                    match item_props
                        .and_then(|p| p.get(*k))
                        .and_then(Value::as_object)
                    {
                        Some(p) => {
                            let kt = str_of(p, "type");
                            if kt == "array" || kt == "object" {
                                errs.push(FieldError::invalid(
                                    path.child("items").child("properties").key(k).child("type"),
                                    BadValue::str("object"),
                                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                ));
                            }
                            if !required.contains(k) && !p.contains_key("default") {
                                errs.push(FieldError::required(
                                    path.child("items").child("properties").key(k).child("default"),
                                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                                ));
                            }
                            if bool_of(p, "nullable") {
                                errs.push(FieldError::forbidden(
                                    path.child("items").child("properties").key(k).child("nullable"),
                                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                                ));
                            }
                        }
                        None => errs.push(FieldError::invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            keys_value.clone(),
                            "entries must all be names of item properties",
                        )),
                    }
                    if keys[..i].contains(k) {
                        errs.push(FieldError::invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            keys_value.clone(),
                            "must not contain duplicate entries",
                        ));
                    }
                }
            }
        }
    }
    if matches!(list_type, Some("set" | "map"))
        && let Some(items) = items
        && bool_of(items, "nullable")
    {
        errs.push(FieldError::forbidden(
            path.child("items").child("nullable"),
            format!(
                "cannot be nullable when x-kubernetes-list-type is {}",
                list_type.unwrap_or("")
            ),
        ));
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    any_of == Some(&serde_json::json!([{"type": "integer"}, {"type": "string"}]))
}

/// `validateStructuralInvariants`.
fn invariants(s: &Map<String, Value>, lvl: Level, path: &FieldPath, errs: &mut Vec<FieldError>) {
    let ty = str_of(s, "type");
    let items = s.get("items").and_then(Value::as_object);
    if ty == "array" && items.is_none() {
        errs.push(FieldError::required(
            path.child("items"),
            "must be specified",
        ));
    }
    if let Some(items) = items {
        invariants(items, Level::Item, &path.child("items"), errs);
    }
    if let Some(properties) = s.get("properties").and_then(Value::as_object) {
        for (k, v) in properties {
            if let Some(v) = v.as_object() {
                invariants(v, Level::Field, &path.child("properties").key(k), errs);
            }
        }
    }
    let additional = s.get("additionalProperties").filter(|v| !v.is_null());
    if let Some(add) = additional {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(sub) = add.as_object() {
            invariants(sub, Level::Field, &path.child("additionalProperties"), errs);
        }
    }
    let int_or_string = bool_of(s, "x-kubernetes-int-or-string");
    let preserve = bool_of(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = bool_of(s, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            BadValue::Json(Value::Bool(true)),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-embedded-resource"),
            BadValue::Json(Value::Bool(true)),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(s.get("anyOf"));
    let skip_first_all_of_any_of = s
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .is_some_and(|first| is_int_or_string_any_of(first.get("anyOf")));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, path, errs);

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && ty != "object" {
        if ty.is_empty() {
            errs.push(FieldError::required(
                path.child("type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                path.child("type"),
                BadValue::str(ty),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let why = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(path.child("type"), why));
    }
    if embedded && additional.is_some() {
        errs.push(FieldError::forbidden(
            path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            path.child("type"),
            BadValue::str(ty),
            "must be object at the root",
        ));
    }
    let properties = s.get("properties").and_then(Value::as_object);
    for meta in ["kind", "apiVersion"] {
        if let Some(p) = properties
            .and_then(|p| p.get(meta))
            .and_then(Value::as_object)
            && check_metadata
            && str_of(p, "type") != "string"
        {
            errs.push(FieldError::invalid(
                path.child("properties").key(meta).child("type"),
                BadValue::str(str_of(p, "type")),
                "must be string",
            ));
        }
    }
    if let Some(meta) = properties
        .and_then(|p| p.get("metadata"))
        .and_then(Value::as_object)
    {
        let meta_path = path.child("properties").key("metadata");
        if check_metadata && str_of(meta, "type") != "object" {
            errs.push(FieldError::invalid(
                meta_path.child("type"),
                BadValue::str(str_of(meta, "type")),
                "must be object",
            ));
        }
        if lvl == Level::Root {
            let only_names = meta
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
            let other_keys = meta
                .keys()
                .any(|k| !matches!(k.as_str(), "type" | "default" | "properties"));
            if !only_names || other_keys {
                errs.push(FieldError::forbidden(
                    meta_path,
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if embedded && !preserve && properties.is_none_or(Map::is_empty) {
        errs.push(FieldError::required(
            path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn value_validation(
    s: &Map<String, Value>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of && let Some(list) = s.get("anyOf").and_then(Value::as_array) {
        for (i, v) in list.iter().enumerate() {
            if let Some(v) = v.as_object() {
                nested(v, false, &path.child("anyOf").index(i), errs);
            }
        }
    }
    if let Some(list) = s.get("allOf").and_then(Value::as_array) {
        for (i, v) in list.iter().enumerate() {
            if let Some(v) = v.as_object() {
                nested(
                    v,
                    skip_first_all_of_any_of && i == 0,
                    &path.child("allOf").index(i),
                    errs,
                );
            }
        }
    }
    if let Some(list) = s.get("oneOf").and_then(Value::as_array) {
        for (i, v) in list.iter().enumerate() {
            if let Some(v) = v.as_object() {
                nested(v, false, &path.child("oneOf").index(i), errs);
            }
        }
    }
    if let Some(not) = s.get("not").and_then(Value::as_object) {
        nested(not, false, &path.child("not"), errs);
    }
    if let Some(pattern) = s.get("pattern").and_then(Value::as_str)
        && let Err(e) = regex::Regex::new(pattern)
    {
        errs.push(FieldError::invalid(
            path.child("pattern"),
            BadValue::str(pattern),
            format!("must be a valid regular expression, but isn't: error parsing regexp: {e}"),
        ));
    }
}

/// `validateNestedValueValidation`: what a schema under a logic junctor
/// may not specify.
fn nested(v: &Map<String, Value>, skip_any_of: bool, path: &FieldPath, errs: &mut Vec<FieldError>) {
    value_validation(v, skip_any_of, false, path, errs);
    if let Some(items) = v.get("items").and_then(Value::as_object) {
        nested(items, false, &path.child("items"), errs);
    }
    if let Some(properties) = v.get("properties").and_then(Value::as_object) {
        for (k, p) in properties {
            if let Some(p) = p.as_object() {
                nested(p, false, &path.child("properties").key(k), errs);
            }
        }
    }
    let present = |k: &str| v.get(k).is_some_and(|x| !is_zero(x));
    if present("type") {
        errs.push(FieldError::forbidden(
            path.child("type"),
            "must be empty to be structural",
        ));
    }
    if v.get("additionalProperties").is_some_and(|x| !x.is_null()) {
        errs.push(FieldError::forbidden(
            path.child("additionalProperties"),
            "must be undefined to be structural",
        ));
    }
    if v.get("default").is_some_and(|x| !x.is_null()) {
        errs.push(FieldError::forbidden(
            path.child("default"),
            "must be undefined to be structural",
        ));
    }
    for (key, why) in [
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        ("externalDocs", "must be undefined to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        ),
        (
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        ),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ] {
        if present(key) {
            errs.push(FieldError::forbidden(path.child(key), why));
        }
    }
    if v.get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("metadata"))
    {
        errs.push(FieldError::forbidden(
            path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateStructuralCompleteness`: every field or array a junctor speaks
/// of is also specified outside of it.
fn completeness(s: &Map<String, Value>, path: &FieldPath, errs: &mut Vec<FieldError>) {
    value_completeness(s, Some(s), path, path, errs);
}

fn value_completeness(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &FieldPath,
    v_path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    if let Some(not) = v.get("not").and_then(Value::as_object) {
        nested_completeness(not, s, s_path, &v_path.child("not"), errs);
    }
    for junctor in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = v.get(junctor).and_then(Value::as_array) {
            for (i, x) in list.iter().enumerate() {
                if let Some(x) = x.as_object() {
                    nested_completeness(x, s, s_path, &v_path.child(junctor).index(i), errs);
                }
            }
        }
    }
}

fn nested_completeness(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &FieldPath,
    v_path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path.clone(),
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    value_completeness(v, Some(s), s_path, v_path, errs);
    if let Some(items) = v.get("items").and_then(Value::as_object) {
        nested_completeness(
            items,
            s.get("items").and_then(Value::as_object),
            &s_path.child("items"),
            &v_path.child("items"),
            errs,
        );
    }
    if let Some(properties) = v.get("properties").and_then(Value::as_object) {
        let s_props = s.get("properties").and_then(Value::as_object);
        for (k, p) in properties {
            let Some(p) = p.as_object() else { continue };
            match s_props.and_then(|sp| sp.get(k)).and_then(Value::as_object) {
                None => errs.push(FieldError::required(
                    s_path.child("properties").key(k),
                    format!(
                        "because it is defined in {}",
                        v_path.child("properties").key(k)
                    ),
                )),
                Some(sp) => nested_completeness(
                    p,
                    Some(sp),
                    &s_path.child("properties").key(k),
                    &v_path.child("properties").key(k),
                    errs,
                ),
            }
        }
    }
}

/// `ValidateDefaults`: each default must validate against its schema and
/// be pruned (contain no unknown fields).
fn validate_defaults(schema: &Value, path: &FieldPath, errs: &mut Vec<FieldError>) {
    walk_defaults(schema, path, errs);
}

fn walk_defaults(s: &Value, path: &FieldPath, errs: &mut Vec<FieldError>) {
    let Some(obj) = s.as_object() else { return };
    if let Some(default) = obj.get("default").filter(|d| !d.is_null()) {
        // Compile this node on its own; its validation paths start at the
        // default, as kube-apiserver's do.
        if let Ok(node_schema) = Schema::compile(s) {
            let mut pruned = default.clone();
            node_schema.prune_value(&mut pruned);
            let default_path = path.child("default");
            if &pruned != default {
                errs.push(FieldError::invalid(
                    default_path.clone(),
                    BadValue::Json(default.clone()),
                    "must not have unknown fields",
                ));
            }
            for mut e in node_schema.validate_value(default) {
                e.field = if e.field == "<nil>" {
                    default_path.to_string()
                } else {
                    default_path.child(&e.field).to_string()
                };
                errs.push(e);
            }
        }
    }
    if let Some(properties) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in properties {
            walk_defaults(v, &path.child("properties").key(k), errs);
        }
    }
    if let Some(items) = obj.get("items") {
        walk_defaults(items, &path.child("items"), errs);
    }
    if let Some(add) = obj.get("additionalProperties").filter(|a| a.is_object()) {
        walk_defaults(add, &path.child("additionalProperties"), errs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value) -> Vec<String> {
        validate_schema(
            &schema,
            false,
            &FieldPath::new("spec.validation.openAPIV3Schema"),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn a_structural_schema_passes() {
        assert!(check(json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "replicas": {"type": "integer", "default": 1},
                }},
            }
        }))
        .is_empty());
    }

    #[test]
    fn missing_types_are_named_by_path() {
        assert_eq!(
            check(
                json!({"type": "object", "properties": {"spec": {"properties": {"x": {"type": "string"}}}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
            ]
        );
        assert_eq!(
            check(json!({"type": "object", "properties": {"l": {"type": "array"}}})),
            vec![
                "spec.validation.openAPIV3Schema.properties[l].items: Required value: must be specified"
            ]
        );
        assert_eq!(
            check(json!({"properties": {}})),
            vec![
                "spec.validation.openAPIV3Schema.type: Required value: must not be empty at the root"
            ]
        );
    }

    #[test]
    fn crd_schema_restrictions() {
        let errs = check(json!({
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}},
                "b": {"type": "string", "uniqueItems": true},
                "c": {"type": "null"},
                "d": {"type": "strin"},
                "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            }
        }));
        assert!(errs.contains(&"spec.validation.openAPIV3Schema.properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive".to_string()), "{errs:?}");
        assert!(errs.contains(&"spec.validation.openAPIV3Schema.properties[b].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic".to_string()));
        assert!(errs.contains(&"spec.validation.openAPIV3Schema.properties[c].type: Forbidden: type cannot be set to null, use nullable as an alternative".to_string()));
        assert!(errs.contains(&"spec.validation.openAPIV3Schema.properties[d].type: Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"".to_string()));
        assert!(errs.contains(&"spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified".to_string()));
    }

    #[test]
    fn junctors_may_not_carry_types() {
        assert_eq!(
            check(json!({
                "type": "object",
                "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}, {"pattern": "^x"}]}}
            })),
            vec![
                "spec.validation.openAPIV3Schema.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"
            ]
        );
        // Fields a root-level junctor speaks of must be specified.
        assert_eq!(
            check(json!({
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "anyOf": [{"required": ["a"]}, {"properties": {"z": {"minimum": 1}}}]
            })),
            vec![
                "spec.validation.openAPIV3Schema.properties[z]: Required value: because it is defined in spec.validation.openAPIV3Schema.anyOf[1].properties[z]"
            ]
        );
    }

    #[test]
    fn defaults_must_validate_and_be_pruned() {
        assert_eq!(
            check(
                json!({"type": "object", "properties": {"r": {"type": "integer", "default": "one"}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[r].default: Invalid value: \"string\":  in body must be of type integer: \"string\""
            ]
        );
        assert_eq!(
            check(
                json!({"type": "object", "properties": {"o": {"type": "object", "default": {"a": 1},
                        "properties": {"b": {"type": "integer"}}}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[o].default: Invalid value: map[string]interface {}{\"a\":1}: must not have unknown fields"
            ]
        );
        assert_eq!(
            check(
                json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}})
            ),
            vec![
                "spec.validation.openAPIV3Schema.properties[metadata].default: Forbidden: must not be set in top-level metadata"
            ]
        );
    }
}
