//! A compiled `openAPIV3Schema` (apiextensions.k8s.io/v1 `JSONSchemaProps`)
//! that validates, prunes and defaults custom objects as kube-apiserver
//! does.
//!
//! kube-apiserver handles a custom object in this order: the request body
//! is decoded and **defaulted** (`structuraldefaulting.Default`), then
//! **pruned** of fields the schema does not specify (`structuralpruning`
//! plus `PruneNonNullableNullsWithoutDefaults`, and ObjectMeta coercion),
//! then **validated** (kube-openapi's schema validator, embedded-resource
//! metadata, `x-kubernetes-list-type` uniqueness). Objects read from
//! storage are defaulted again with the storage version's schema.
//! [`Schema::admit`] runs the three steps in that order.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use super::field::FieldError;

/// Why an `openAPIV3Schema` could not be compiled: a keyword has the wrong
/// JSON type (kube-apiserver fails to decode such a CRD) or a pattern is
/// not a valid regular expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaError {
    /// Where in the schema, e.g. `openAPIV3Schema.properties[spec].type`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug, Clone)]
pub(crate) enum Additional {
    Allows(bool),
    Schema(Box<Node>),
}

/// One node of a compiled schema. Field names follow `JSONSchemaProps`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub(crate) type_: Option<String>,
    pub(crate) nullable: bool,
    /// The format as written, if it is one kube-apiserver validates.
    pub(crate) format: Option<String>,
    pub(crate) enum_: Option<Vec<Value>>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) max_length: Option<i64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) pattern: Option<(String, Regex)>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_items: Option<i64>,
    pub(crate) unique_items: bool,
    pub(crate) max_properties: Option<i64>,
    pub(crate) min_properties: Option<i64>,
    pub(crate) required: Vec<String>,
    pub(crate) properties: BTreeMap<String, Node>,
    pub(crate) additional: Option<Additional>,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) all_of: Vec<Node>,
    pub(crate) any_of: Vec<Node>,
    pub(crate) one_of: Vec<Node>,
    pub(crate) not: Option<Box<Node>>,
    pub(crate) default: Option<Value>,
    pub(crate) preserve_unknown: bool,
    pub(crate) int_or_string: bool,
    pub(crate) embedded_resource: bool,
    pub(crate) list_type: Option<String>,
    pub(crate) list_map_keys: Vec<String>,
}

impl Node {
    /// The schema of `additionalProperties`, if it is one.
    pub(crate) fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }
}

/// A compiled `openAPIV3Schema` for one version of a custom resource.
#[derive(Debug, Clone)]
pub struct Schema {
    pub(crate) root: Node,
}

/// Formats kube-apiserver validates in CRD schemas (apiextensions'
/// `supportedVersionedFormats`, matched after removing `-`); any other
/// format is ignored, as kube-apiserver strips it before validating.
const SUPPORTED_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// Whether kube-apiserver validates `format`.
pub(crate) fn is_supported_format(format: &str) -> bool {
    SUPPORTED_FORMATS.contains(&format.replace('-', "").as_str())
}

impl Schema {
    /// Compiles an `openAPIV3Schema` object.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        Ok(Self {
            root: compile_node(schema, "openAPIV3Schema")?,
        })
    }

    /// Defaults, prunes and validates `obj` (a whole custom object) in
    /// kube-apiserver's order. On success `obj` is what would be stored;
    /// on failure the errors are those of a `422 Invalid` answer.
    pub fn admit(&self, obj: &mut Value) -> Result<(), Vec<FieldError>> {
        self.apply_defaults(obj);
        self.prune(obj);
        let errors = self.validate(obj);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

fn shape(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: path.to_string(),
        message: message.into(),
    }
}

fn get_bool(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<bool, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(shape(&format!("{path}.{key}"), "must be a boolean")),
    }
}

fn get_f64(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<f64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(shape(&format!("{path}.{key}"), "must be a number")),
    }
}

fn get_i64(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<i64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| shape(&format!("{path}.{key}"), "must be an integer")),
        Some(_) => Err(shape(&format!("{path}.{key}"), "must be an integer")),
    }
}

fn get_str<'a>(
    obj: &'a serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(shape(&format!("{path}.{key}"), "must be a string")),
    }
}

fn get_strings(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Vec<String>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| shape(&format!("{path}.{key}"), "must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(shape(&format!("{path}.{key}"), "must be a list of strings")),
    }
}

fn compile_list(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Vec<Node>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| compile_node(s, &format!("{path}.{key}[{i}]")))
            .collect(),
        Some(_) => Err(shape(&format!("{path}.{key}"), "must be a list of schemas")),
    }
}

pub(crate) fn compile_node(schema: &Value, path: &str) -> Result<Node, SchemaError> {
    let obj = schema
        .as_object()
        .ok_or_else(|| shape(path, "must be an object"))?;
    let mut node = Node {
        type_: get_str(obj, "type", path)?.map(str::to_string),
        nullable: get_bool(obj, "nullable", path)?,
        format: get_str(obj, "format", path)?
            .filter(|f| is_supported_format(f))
            .map(str::to_string),
        maximum: get_f64(obj, "maximum", path)?,
        exclusive_maximum: get_bool(obj, "exclusiveMaximum", path)?,
        minimum: get_f64(obj, "minimum", path)?,
        exclusive_minimum: get_bool(obj, "exclusiveMinimum", path)?,
        multiple_of: get_f64(obj, "multipleOf", path)?,
        max_length: get_i64(obj, "maxLength", path)?,
        min_length: get_i64(obj, "minLength", path)?,
        max_items: get_i64(obj, "maxItems", path)?,
        min_items: get_i64(obj, "minItems", path)?,
        unique_items: get_bool(obj, "uniqueItems", path)?,
        max_properties: get_i64(obj, "maxProperties", path)?,
        min_properties: get_i64(obj, "minProperties", path)?,
        required: get_strings(obj, "required", path)?,
        all_of: compile_list(obj, "allOf", path)?,
        any_of: compile_list(obj, "anyOf", path)?,
        one_of: compile_list(obj, "oneOf", path)?,
        default: obj.get("default").filter(|d| !d.is_null()).cloned(),
        preserve_unknown: get_bool(obj, "x-kubernetes-preserve-unknown-fields", path)?,
        int_or_string: get_bool(obj, "x-kubernetes-int-or-string", path)?,
        embedded_resource: get_bool(obj, "x-kubernetes-embedded-resource", path)?,
        list_type: get_str(obj, "x-kubernetes-list-type", path)?.map(str::to_string),
        list_map_keys: get_strings(obj, "x-kubernetes-list-map-keys", path)?,
        ..Node::default()
    };
    match obj.get("enum") {
        None | Some(Value::Null) => {}
        Some(Value::Array(values)) => node.enum_ = Some(values.clone()),
        Some(_) => return Err(shape(&format!("{path}.enum"), "must be a list")),
    }
    if let Some(pattern) = get_str(obj, "pattern", path)? {
        let re = Regex::new(pattern).map_err(|e| {
            shape(
                &format!("{path}.pattern"),
                format!("must be a valid regular expression, but isn't: {e}"),
            )
        })?;
        node.pattern = Some((pattern.to_string(), re));
    }
    match obj.get("properties") {
        None | Some(Value::Null) => {}
        Some(Value::Object(props)) => {
            for (name, sub) in props {
                let sub_path = format!("{path}.properties[{name}]");
                node.properties
                    .insert(name.clone(), compile_node(sub, &sub_path)?);
            }
        }
        Some(_) => return Err(shape(&format!("{path}.properties"), "must be an object")),
    }
    node.additional = match obj.get("additionalProperties") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(Additional::Allows(*b)),
        Some(s @ Value::Object(_)) => Some(Additional::Schema(Box::new(compile_node(
            s,
            &format!("{path}.additionalProperties"),
        )?))),
        Some(_) => {
            return Err(shape(
                &format!("{path}.additionalProperties"),
                "must be a boolean or a schema",
            ));
        }
    };
    node.items = match obj.get("items") {
        None | Some(Value::Null) => None,
        Some(s @ Value::Object(_)) => Some(Box::new(compile_node(s, &format!("{path}.items"))?)),
        Some(_) => {
            return Err(shape(
                &format!("{path}.items"),
                "items must be a schema object and not an array",
            ));
        }
    };
    node.not = match obj.get("not") {
        None | Some(Value::Null) => None,
        Some(s) => Some(Box::new(compile_node(s, &format!("{path}.not"))?)),
    };
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_nested_schemas() {
        let s = Schema::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["replicas"],
                    "properties": {
                        "replicas": {"type": "integer", "format": "int32", "minimum": 0},
                        "id": {"type": "string", "format": "uuid"},
                        "when": {"type": "string", "format": "date-time"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    }
                }
            }
        }))
        .unwrap();
        let spec = &s.root.properties["spec"];
        assert_eq!(spec.required, vec!["replicas"]);
        // int32 is not a format kube-apiserver validates: it is dropped.
        assert_eq!(spec.properties["replicas"].format, None);
        assert_eq!(spec.properties["id"].format.as_deref(), Some("uuid"));
        assert_eq!(spec.properties["when"].format.as_deref(), Some("date-time"));
        assert!(spec.properties["labels"].additional_schema().is_some());
        assert!(spec.properties["tags"].items.is_some());
    }

    #[test]
    fn wrong_shapes_name_the_keyword() {
        let err = Schema::compile(&json!({"type": "object", "properties": {"a": {"type": 5}}}))
            .unwrap_err();
        assert_eq!(err.path, "openAPIV3Schema.properties[a].type");
        let err = Schema::compile(&json!({"type": "string", "pattern": "(unclosed"})).unwrap_err();
        assert_eq!(err.path, "openAPIV3Schema.pattern");
        assert!(
            err.message
                .starts_with("must be a valid regular expression")
        );
        let err =
            Schema::compile(&json!({"type": "array", "items": [{"type": "string"}]})).unwrap_err();
        assert_eq!(
            err.message,
            "items must be a schema object and not an array"
        );
    }
}
