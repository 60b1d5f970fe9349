//! Validation of a custom object against its compiled schema, following
//! kube-openapi's `SchemaValidator` (the validators run per value in its
//! order: type, allOf/anyOf/oneOf/not, string, format, number, array, enum,
//! object) and apiextensions' conversion of its results into field errors
//! (`kubeOpenAPIResultToFieldErrors`), then embedded-resource metadata and
//! `x-kubernetes-list-type` uniqueness as the custom resource strategy
//! does.
//!
//! Paths are kube-openapi's: `spec.replicas`, `spec.list[0].name`;
//! messages are its texts (`spec.replicas in body must be of type integer:
//! "string"`). Errors of the logic junctors (`anyOf`, ...) are not tied to
//! a field, and kube-apiserver reports them on the field `<nil>`.

use serde_json::{Map, Number, Value};

use super::field::{BadValue, FieldError, FieldPath, go_float, go_quote};
use super::formats;
use super::names;
use super::schema::{Additional, Node, Schema};

/// The field kube-apiserver reports errors with no path on.
const NO_FIELD: &str = "<nil>";

impl Schema {
    /// Validates a whole custom object (after defaulting and pruning) and
    /// returns kube-apiserver's field errors; empty when valid.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_node(&self.root, "", obj, &mut errs);
        validate_embedded(&self.root, &FieldPath::default(), obj, &mut errs, true);
        validate_list_types(&self.root, &FieldPath::default(), obj, &mut errs);
        errs
    }

    /// kube-openapi's validation of `value` against this schema alone
    /// (errors on the value itself have the field `<nil>`).
    pub(crate) fn validate_value(&self, value: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_node(&self.root, "", value, &mut errs);
        errs
    }
}

/// kube-openapi's error name (`.spec`, `spec.x`) as a field path.
fn err_path(name: &str) -> String {
    let trimmed = name.strip_prefix('.').unwrap_or(name);
    if name.is_empty() || name == "." {
        NO_FIELD.to_string()
    } else {
        trimmed.to_string()
    }
}

/// `errors.InvalidType`: `<name> in body must be of type <type>: "<value>"`.
fn invalid_type(name: &str, type_name: &str, value: &str) -> FieldError {
    FieldError::type_invalid(
        err_path(name),
        BadValue::str(value),
        format!(
            "{name} in body must be of type {type_name}: {}",
            go_quote(value)
        ),
    )
}

/// A `default:` case error: `field.Invalid(path, value, message)`.
fn invalid(name: &str, value: BadValue, message: String) -> FieldError {
    FieldError::invalid(err_path(name), value, message)
}

/// A junctor's error, which has no field.
fn composite(message: String) -> FieldError {
    FieldError::invalid(NO_FIELD, BadValue::str(""), message)
}

/// The JSON type and Go-decoded format kube-openapi infers for a value.
fn schema_info(data: &Value) -> (&'static str, &'static str) {
    match data {
        Value::Null => ("", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_i64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

fn is_integral(n: &Number) -> bool {
    n.as_f64()
        .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

fn types_of(node: &Node) -> Vec<&str> {
    if node.int_or_string {
        vec!["integer", "string"]
    } else {
        node.type_.as_deref().into_iter().collect()
    }
}

fn validate_node(node: &Node, path: &str, data: &Value, errs: &mut Vec<FieldError>) {
    if data.is_null() {
        check_type(node, path, data, errs);
        check_enum(node, path, data, errs);
        return;
    }
    check_type(node, path, data, errs);
    check_junctors(node, path, data, errs);
    if let Value::String(s) = data {
        check_string(node, path, s, errs);
        if let Some(format) = &node.format
            && !formats::validates(format, s)
        {
            errs.push(FieldError::type_invalid(
                err_path(path),
                BadValue::str(s.as_str()),
                format!("{path} in body must be of type {format}: {}", go_quote(s)),
            ));
        }
    }
    if let Value::Number(n) = data {
        check_number(node, path, n, errs);
    }
    if let Value::Array(items) = data {
        check_array(node, path, items, errs);
    }
    check_enum(node, path, data, errs);
    if let Value::Object(map) = data {
        check_object(node, path, map, errs);
    }
}

fn check_type(node: &Node, path: &str, data: &Value, errs: &mut Vec<FieldError>) {
    let types = types_of(node);
    let format = node.format.as_deref().unwrap_or("");
    if types.is_empty() && format.is_empty() {
        return;
    }
    if data.is_null() {
        if !types.is_empty() && !types.contains(&"null") && !node.nullable {
            errs.push(invalid_type(path, &types.join(","), "null"));
        }
        return;
    }
    let (sch_type, data_format) = schema_info(data);
    let is_float_int = matches!(data, Value::Number(n) if !n.is_i64() && is_integral(n))
        && types.contains(&"integer");
    let is_int_float = sch_type == "integer" && types.contains(&"number");
    let stringish = matches!(data, Value::String(_) | Value::Array(_));
    let has_format = !format.is_empty();
    // A number or boolean under a format is checked against the format.
    let matches_format =
        types.contains(&sch_type) || data_format == format || is_float_int || is_int_float;
    if has_format && !stringish && !matches_format {
        errs.push(invalid_type(path, format, data_format));
        return;
    }
    // A string under a format of a non-numeric type is left to the format
    // check.
    let numeric = types.contains(&"number") || types.contains(&"integer");
    if has_format && stringish && !numeric {
        return;
    }
    if !(types.contains(&sch_type) || is_float_int || is_int_float) {
        errs.push(invalid_type(path, &types.join(","), sch_type));
    }
}

/// Validates `data` against `node` alone, for a junctor.
fn sub_errors(node: &Node, path: &str, data: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_node(node, path, data, &mut errs);
    errs
}

fn check_junctors(node: &Node, path: &str, data: &Value, errs: &mut Vec<FieldError>) {
    if !node.any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node
            .any_of
            .iter()
            .map(|s| sub_errors(s, path, data))
            .collect();
        if !results.iter().any(Vec::is_empty) {
            errs.push(composite(format!(
                "{} must validate at least one schema (anyOf)",
                go_quote(path)
            )));
            // kube-openapi adds the errors of the best failing alternative.
            if let Some(best) = results.into_iter().min_by_key(Vec::len) {
                errs.extend(best);
            }
        }
    }
    if !node.one_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node
            .one_of
            .iter()
            .map(|s| sub_errors(s, path, data))
            .collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        if valid != 1 {
            let why = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errs.push(composite(format!(
                "{} must validate one and only one schema (oneOf). {why}",
                go_quote(path)
            )));
            if valid == 0
                && let Some(best) = results.into_iter().min_by_key(Vec::len)
            {
                errs.extend(best);
            }
        }
    }
    if !node.all_of.is_empty() {
        let mut validated = 0;
        for s in &node.all_of {
            let r = sub_errors(s, path, data);
            if r.is_empty() {
                validated += 1;
            }
            errs.extend(r);
        }
        if validated != node.all_of.len() {
            let extra = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            errs.push(composite(format!(
                "{} must validate all the schemas (allOf){extra}",
                go_quote(path)
            )));
        }
    }
    if let Some(not) = &node.not
        && sub_errors(not, path, data).is_empty()
    {
        errs.push(composite(format!(
            "{} must not validate the schema (not)",
            go_quote(path)
        )));
    }
}

fn check_string(node: &Node, path: &str, s: &str, errs: &mut Vec<FieldError>) {
    let len = s.chars().count() as i64;
    if let Some(max) = node.max_length
        && len > max
    {
        errs.push(FieldError::too_long(err_path(path), BadValue::str(s), max));
        return;
    }
    if let Some(min) = node.min_length
        && len < min
    {
        errs.push(invalid(
            path,
            BadValue::str(s),
            format!("{path} in body should be at least {min} chars long"),
        ));
        return;
    }
    if let Some((pattern, re)) = &node.pattern
        && !re.is_match(s)
    {
        errs.push(invalid(
            path,
            BadValue::str(s),
            format!("{path} in body should match '{pattern}'"),
        ));
    }
}

/// `swag.IsFloat64AJSONInteger`.
fn is_json_integer(f: f64) -> bool {
    if !f.is_finite() {
        return false;
    }
    let rounded = f.round();
    f == rounded || ((f - rounded).abs() / f.abs().max(1.0)) < 1e-9
}

fn check_number(node: &Node, path: &str, n: &Number, errs: &mut Vec<FieldError>) {
    let value = BadValue::Json(Value::Number(n.clone()));
    let mut multiple = Vec::new();
    if let Some(factor) = node.multiple_of {
        if factor < 0.0 {
            multiple.push(invalid(
                path,
                BadValue::Raw(go_float(factor)),
                format!(
                    "factor MultipleOf declared for {path} must be positive: {}",
                    go_float(factor)
                ),
            ));
        } else if let Some(i) = n.as_i64() {
            let f = factor as i64;
            if f != 0 && i % f != 0 {
                multiple.push(invalid(
                    path,
                    value.clone(),
                    format!("{path} in body should be a multiple of {f}"),
                ));
            }
        } else {
            let data = n.as_f64().unwrap_or(f64::NAN);
            let mult = if factor < 1.0 {
                1.0 / factor * data
            } else {
                data / factor
            };
            if !is_json_integer(mult) {
                multiple.push(invalid(
                    path,
                    value.clone(),
                    format!(
                        "{path} in body should be a multiple of {}",
                        go_float(factor)
                    ),
                ));
            }
        }
    }
    let bound = |limit: f64, exclusive: bool, upper: bool| -> Option<FieldError> {
        // Integers compare against the bound cut to an integer, and print it
        // as one; floats print it as Go prints a float64.
        let (fails, shown) = match n.as_i64() {
            Some(i) => {
                let l = limit as i64;
                let fails = if upper {
                    (!exclusive && i > l) || (exclusive && i >= l)
                } else {
                    (!exclusive && i < l) || (exclusive && i <= l)
                };
                (fails, l.to_string())
            }
            None => {
                let d = n.as_f64().unwrap_or(f64::NAN);
                let fails = if upper {
                    (!exclusive && d > limit) || (exclusive && d >= limit)
                } else {
                    (!exclusive && d < limit) || (exclusive && d <= limit)
                };
                (fails, go_float(limit))
            }
        };
        fails.then(|| {
            let relation = match (upper, exclusive) {
                (true, false) => "less than or equal to",
                (true, true) => "less than",
                (false, false) => "greater than or equal to",
                (false, true) => "greater than",
            };
            invalid(
                path,
                value.clone(),
                format!("{path} in body should be {relation} {shown}"),
            )
        })
    };
    let maximum = node
        .maximum
        .and_then(|m| bound(m, node.exclusive_maximum, true));
    let minimum = node
        .minimum
        .and_then(|m| bound(m, node.exclusive_minimum, false));
    errs.extend(multiple);
    errs.extend(minimum);
    errs.extend(maximum);
}

fn check_array(node: &Node, path: &str, items: &[Value], errs: &mut Vec<FieldError>) {
    if let Some(item_schema) = &node.items {
        for (i, item) in items.iter().enumerate() {
            validate_node(item_schema, &format!("{path}[{i}]"), item, errs);
        }
    }
    let size = items.len() as i64;
    if let Some(min) = node.min_items
        && size < min
    {
        errs.push(invalid(
            path,
            BadValue::Count(size),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = node.max_items
        && size > max
    {
        errs.push(FieldError::too_many(err_path(path), size, max));
    }
    if node.unique_items {
        let duplicated = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| a == b));
        if duplicated {
            errs.push(invalid(
                path,
                BadValue::str(""),
                format!("{path} in body shouldn't contain duplicates"),
            ));
        }
    }
}

/// Whether `data` matches the enum value `allowed` as kube-openapi decides
/// (equal, or equal after converting `data` to the allowed value's Go type:
/// an integer matches the same float, a float matches the integer it
/// truncates to).
fn enum_matches(data: &Value, allowed: &Value) -> bool {
    if data == allowed {
        return true;
    }
    match (data, allowed) {
        (Value::Number(d), Value::Number(a)) => match (d.as_i64(), a.as_i64()) {
            (Some(di), None) => a.as_f64() == Some(di as f64),
            (None, Some(ai)) => d.as_f64().map(|f| f.trunc() as i64) == Some(ai),
            _ => d.as_f64() == a.as_f64(),
        },
        _ => false,
    }
}

fn check_enum(node: &Node, path: &str, data: &Value, errs: &mut Vec<FieldError>) {
    let Some(values) = &node.enum_ else { return };
    if values.is_empty() || values.iter().any(|a| enum_matches(data, a)) {
        return;
    }
    let supported: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    let refs: Vec<&str> = supported.iter().map(String::as_str).collect();
    errs.push(FieldError::not_supported(
        err_path(path),
        BadValue::Json(data.clone()),
        &refs,
    ));
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn check_object(node: &Node, path: &str, map: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    let keys = map.len() as i64;
    if let Some(min) = node.min_properties
        && keys < min
    {
        errs.push(invalid(
            path,
            BadValue::Count(keys),
            format!("{path} in body should have at least {min} properties"),
        ));
        return;
    }
    if let Some(max) = node.max_properties
        && keys > max
    {
        errs.push(FieldError::too_many(err_path(path), keys, max));
        return;
    }
    match &node.additional {
        Some(Additional::Allows(false)) => {
            for key in map.keys().filter(|k| !node.properties.contains_key(*k)) {
                errs.push(invalid(
                    path,
                    BadValue::str(key.as_str()),
                    format!("{path}.{key} in body is a forbidden property"),
                ));
            }
        }
        Some(Additional::Schema(schema)) => {
            for (key, value) in map
                .iter()
                .filter(|(k, _)| !node.properties.contains_key(*k))
            {
                validate_node(schema, &format!("{path}.{key}"), value, errs);
            }
        }
        _ => {}
    }
    for (name, prop) in &node.properties {
        if let Some(value) = map.get(name) {
            validate_node(prop, &child_path(path, name), value, errs);
        }
    }
    for required in &node.required {
        if !map.contains_key(required) {
            errs.push(FieldError::required(
                err_path(&format!("{path}.{required}")),
                "",
            ));
        }
    }
}

/// apimachinery's `schema.ParseGroupVersion` error, if any.
fn parse_group_version(gv: &str) -> Option<String> {
    if gv.is_empty() || gv == "/" {
        return None;
    }
    (gv.matches('/').count() > 1).then(|| format!("unexpected GroupVersion string: {gv}"))
}

/// Embedded resources (`x-kubernetes-embedded-resource`) must carry
/// `apiVersion` and `kind`, and valid metadata (objectmeta.Validate).
fn validate_embedded(
    node: &Node,
    path: &FieldPath,
    data: &Value,
    errs: &mut Vec<FieldError>,
    root: bool,
) {
    match data {
        Value::Object(map) => {
            if node.embedded_resource && !root {
                validate_embedded_resource(path, map, errs);
            }
            for (k, v) in map {
                if let Some(prop) = node.properties.get(k) {
                    validate_embedded(prop, &path.child(k), v, errs, false);
                } else if let Some(add) = node.additional_schema() {
                    validate_embedded(add, &path.key(k), v, errs, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &node.items {
                for (i, v) in items.iter().enumerate() {
                    validate_embedded(item, &path.index(i), v, errs, false);
                }
            }
        }
        _ => {}
    }
}

fn validate_embedded_resource(
    path: &FieldPath,
    map: &Map<String, Value>,
    errs: &mut Vec<FieldError>,
) {
    if !map.contains_key("apiVersion") {
        errs.push(FieldError::required(path.child("apiVersion"), ""));
    }
    if !map.contains_key("kind") {
        errs.push(FieldError::required(path.child("kind"), ""));
    }
    if let Some(v) = map.get("apiVersion") {
        match v.as_str() {
            None => errs.push(FieldError::invalid(
                path.child("apiVersion"),
                BadValue::Json(v.clone()),
                "must be a string",
            )),
            Some("") => errs.push(FieldError::required(path.child("apiVersion"), "")),
            Some(gv) => {
                if let Some(why) = parse_group_version(gv) {
                    errs.push(FieldError::invalid(
                        path.child("apiVersion"),
                        BadValue::str(gv),
                        why,
                    ));
                }
            }
        }
    }
    if let Some(v) = map.get("kind") {
        match v.as_str() {
            None => errs.push(FieldError::invalid(
                path.child("kind"),
                BadValue::Json(v.clone()),
                "must be a string",
            )),
            Some("") => errs.push(FieldError::required(path.child("kind"), "")),
            Some(kind) => {
                let problems = names::dns1035_label(&kind.to_lowercase());
                if !problems.is_empty() {
                    errs.push(FieldError::invalid(
                        path.child("kind"),
                        BadValue::str(kind),
                        format!(
                            "may have mixed case, but should otherwise match: {}",
                            problems.join(",")
                        ),
                    ));
                }
            }
        }
    }
    if let Some(Value::Object(meta)) = map.get("metadata")
        && let Some(Value::String(name)) = meta.get("name")
    {
        for why in names::path_segment_name(name) {
            errs.push(FieldError::invalid(
                path.child("metadata").child("name"),
                BadValue::str(name.as_str()),
                why,
            ));
        }
    }
}

/// `x-kubernetes-list-type: set` items must be unique, `map` items unique
/// by their `x-kubernetes-list-map-keys` (structural `listtype` validation).
fn validate_list_types(node: &Node, path: &FieldPath, data: &Value, errs: &mut Vec<FieldError>) {
    match data {
        Value::Object(map) => {
            for (k, v) in map {
                if let Some(prop) = node.properties.get(k) {
                    validate_list_types(prop, &path.child(k), v, errs);
                } else if let Some(add) = node.additional_schema() {
                    validate_list_types(add, &path.key(k), v, errs);
                }
            }
        }
        Value::Array(items) => {
            match node.list_type.as_deref() {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].contains(item) {
                            errs.push(FieldError::duplicate(
                                path.index(i),
                                BadValue::Json(item.clone()),
                            ));
                        }
                    }
                }
                Some("map") => {
                    let mut seen: Vec<Value> = Vec::new();
                    for (i, item) in items.iter().enumerate() {
                        let Value::Object(obj) = item else {
                            errs.push(FieldError::invalid(
                                path.index(i),
                                BadValue::Json(item.clone()),
                                "must be an object for an array of list-type map",
                            ));
                            continue;
                        };
                        let mut key = Map::new();
                        for k in &node.list_map_keys {
                            if let Some(v) = obj.get(k) {
                                key.insert(k.clone(), v.clone());
                            }
                        }
                        let key = Value::Object(key);
                        if seen.contains(&key) {
                            errs.push(FieldError::duplicate(path.index(i), BadValue::Json(key)));
                        } else {
                            seen.push(key);
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = &node.items {
                for (i, v) in items.iter().enumerate() {
                    validate_list_types(item_schema, &path.index(i), v, errs);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(spec: Value) -> Schema {
        Schema::compile(&json!({
            "type": "object",
            "properties": {"spec": spec}
        }))
        .unwrap()
    }

    fn messages(s: &Schema, obj: Value) -> Vec<String> {
        s.validate(&obj).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn type_errors_use_kube_openapi_texts() {
        let s = schema(json!({"type": "object", "properties": {"replicas": {"type": "integer"}}}));
        assert_eq!(
            messages(&s, json!({"spec": {"replicas": "3"}})),
            vec![
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
            ]
        );
        // 2.0 decodes as a float but is an integer for the type check.
        assert!(messages(&s, json!({"spec": {"replicas": 2.0}})).is_empty());
        assert_eq!(
            messages(&s, json!({"spec": {"replicas": 2.5}})),
            vec![
                "spec.replicas: Invalid value: \"number\": spec.replicas in body must be of type integer: \"number\""
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"replicas": null}})),
            vec![
                "spec.replicas: Invalid value: \"null\": spec.replicas in body must be of type integer: \"null\""
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": "x"})),
            vec![
                "spec: Invalid value: \"string\": spec in body must be of type object: \"string\""
            ]
        );
    }

    #[test]
    fn nullable_accepts_null() {
        let s = schema(
            json!({"type": "object", "properties": {"x": {"type": "string", "nullable": true}}}),
        );
        assert!(messages(&s, json!({"spec": {"x": null}})).is_empty());
    }

    #[test]
    fn number_is_satisfied_by_integers() {
        let s = schema(
            json!({"type": "object", "properties": {"ratio": {"type": "number", "maximum": 1.5}}}),
        );
        assert!(messages(&s, json!({"spec": {"ratio": 1}})).is_empty());
        assert_eq!(
            messages(&s, json!({"spec": {"ratio": 2}})),
            vec![
                "spec.ratio: Invalid value: 2: spec.ratio in body should be less than or equal to 1"
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"ratio": 2.5}})),
            vec![
                "spec.ratio: Invalid value: 2.5: spec.ratio in body should be less than or equal to 1.5"
            ]
        );
    }

    #[test]
    fn required_and_bounds() {
        let s = schema(json!({
            "type": "object",
            "required": ["replicas", "image"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                "image": {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^[a-z]+$"},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "port": {"type": "integer", "exclusiveMinimum": true, "minimum": 0, "multipleOf": 2},
            }
        }));
        assert_eq!(
            messages(&s, json!({"spec": {}})),
            vec![
                "spec.replicas: Required value",
                "spec.image: Required value"
            ]
        );
        assert_eq!(
            messages(
                &s,
                json!({"spec": {"replicas": 11, "image": "ab", "mode": "medium", "port": 0}})
            ),
            vec![
                "spec.image: Invalid value: \"ab\": spec.image in body should be at least 3 chars long",
                "spec.mode: Unsupported value: \"medium\": supported values: \"fast\", \"slow\"",
                "spec.port: Invalid value: 0: spec.port in body should be greater than 0",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
            ]
        );
        assert_eq!(
            messages(
                &s,
                json!({"spec": {"replicas": 1, "image": "ABCD", "port": 3}})
            ),
            vec![
                "spec.image: Invalid value: \"ABCD\": spec.image in body should match '^[a-z]+$'",
                "spec.port: Invalid value: 3: spec.port in body should be a multiple of 2",
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"replicas": 1, "image": "abcdefghij"}})),
            vec!["spec.image: Too long: may not be more than 8 bytes"]
        );
    }

    #[test]
    fn arrays_and_maps() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
                "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
                "ports": {"type": "array", "items": {"type": "object", "required": ["port"],
                    "properties": {"port": {"type": "integer"}}}},
            }
        }));
        assert_eq!(
            messages(&s, json!({"spec": {"tags": []}})),
            vec!["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"tags": ["a", 1, "c"]}})),
            vec![
                "spec.tags[1]: Invalid value: \"integer\": spec.tags[1] in body must be of type string: \"integer\"",
                "spec.tags: Too many: 3: must have at most 2 items",
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"labels": {"a": "x", "b": "y"}}})),
            vec!["spec.labels: Too many: 2: must have at most 1 items"]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"labels": {"a": 1}}})),
            vec![
                "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\""
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"ports": [{"port": 1}, {}]}})),
            vec!["spec.ports[1].port: Required value"]
        );
    }

    #[test]
    fn int_or_string_and_formats() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "port": {"x-kubernetes-int-or-string": true},
                "id": {"type": "string", "format": "uuid"},
                "when": {"type": "string", "format": "date-time"},
                "count": {"type": "integer", "format": "int32"},
            }
        }));
        assert!(messages(&s, json!({"spec": {"port": 80}})).is_empty());
        assert!(messages(&s, json!({"spec": {"port": "http"}})).is_empty());
        assert_eq!(
            messages(&s, json!({"spec": {"port": true}})),
            vec![
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""
            ]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"id": "nope"}})),
            vec![
                "spec.id: Invalid value: \"nope\": spec.id in body must be of type uuid: \"nope\""
            ]
        );
        assert!(
            messages(
                &s,
                json!({"spec": {"id": "123e4567-e89b-12d3-a456-426614174000"}})
            )
            .is_empty()
        );
        assert!(messages(&s, json!({"spec": {"when": "2024-01-02T03:04:05Z"}})).is_empty());
        assert_eq!(
            messages(&s, json!({"spec": {"when": "yesterday"}})),
            vec![
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\""
            ]
        );
        // int32 is not checked by kube-apiserver: out-of-range passes.
        assert!(messages(&s, json!({"spec": {"count": 9_000_000_000_i64}})).is_empty());
    }

    #[test]
    fn junctors_report_on_nil_field() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "size": {"type": "string", "anyOf": [{"pattern": "^[0-9]+$"}, {"enum": ["small", "large"]}]},
                "kind": {"type": "string", "not": {"enum": ["bad"]}},
            }
        }));
        assert!(messages(&s, json!({"spec": {"size": "12"}})).is_empty());
        assert!(messages(&s, json!({"spec": {"size": "small"}})).is_empty());
        let m = messages(&s, json!({"spec": {"size": "medium"}}));
        assert_eq!(
            m[0],
            "<nil>: Invalid value: \"\": \"spec.size\" must validate at least one schema (anyOf)"
        );
        assert_eq!(m.len(), 2);
        assert_eq!(
            messages(&s, json!({"spec": {"kind": "bad"}})),
            vec!["<nil>: Invalid value: \"\": \"spec.kind\" must not validate the schema (not)"]
        );
    }

    #[test]
    fn list_types_and_embedded_resources() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true},
            }
        }));
        assert_eq!(
            messages(&s, json!({"spec": {"set": ["a", "b", "a"]}})),
            vec!["spec.set[2]: Duplicate value: \"a\""]
        );
        assert_eq!(
            messages(
                &s,
                json!({"spec": {"map": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]}})
            ),
            vec!["spec.map[1]: Duplicate value: map[string]interface {}{\"name\":\"a\"}"]
        );
        assert_eq!(
            messages(
                &s,
                json!({"spec": {"template": {"metadata": {"name": "x"}}}})
            ),
            vec![
                "spec.template.apiVersion: Required value",
                "spec.template.kind: Required value"
            ]
        );
        assert!(
            messages(
                &s,
                json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod"}}})
            )
            .is_empty()
        );
    }
}
