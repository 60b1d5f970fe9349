//! Server-side Table columns of custom objects, as kube-apiserver's CRD
//! table convertor computes them (apiextensions-apiserver
//! `pkg/registry/customresource/tableconvertor`, with the columns of
//! `apihelpers.GetColumnsForVersion`).
//!
//! - `Name` (format `name`) comes first, then the version's
//!   `additionalPrinterColumns`; a version that declares none gets `Age`
//!   (a `date` column on `.metadata.creationTimestamp`). A version that
//!   declares columns shows `Age` only if it declares it.
//! - Each column's `jsonPath` is evaluated with client-go's JSONPath
//!   (missing keys allowed); only the first value counts. No value, or an
//!   evaluation error, is a `null` cell (kubectl prints a blank).
//! - `string` columns print the value as client-go's `PrintResults` does
//!   (objects and lists as JSON, `null` as `<no value>`); `integer`,
//!   `number` and `boolean` columns carry the JSON value when it has that
//!   type and `null` otherwise (an `integer` column truncates floats);
//!   `date` columns carry the age, `3m5s` as `kubectl get` prints it,
//!   `<unknown>` for an empty or zero time and `<invalid>` for text that
//!   is not RFC 3339.
//! - `priority` is passed through: kubectl shows columns above 0 only with
//!   `-o wide`.
//!
//! kube-apiserver does not validate a column's `jsonPath` beyond its
//! leading `.` when the CRD is written; a path that does not parse makes
//! its convertor keep only the columns before it (and log the error).
//! [`PrinterColumns::new`] does the same and keeps the error in
//! [`PrinterColumns::invalid`].

use jiff::Timestamp;
use serde_json::{Value, json};

use super::definition::{PrinterColumn, Version};
use super::field::go_quote;
use super::jsonpath::{JsonPath, JsonPathError, print_value};
use super::openapi_meta::object_meta_doc;
use crate::printers::{go_zero_time, human_duration, parse_rfc3339};

/// A column whose `jsonPath` client-go cannot parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unrecognized column definition {}", go_quote(.json_path))]
pub struct InvalidColumn {
    /// The column's `jsonPath`.
    pub json_path: String,
    /// Why it does not parse.
    #[source]
    pub source: JsonPathError,
}

/// Where a column's cells come from.
#[derive(Debug, Clone)]
enum Source {
    /// `metadata.name`.
    Name,
    /// A `jsonPath`, parsed as the template `{<jsonPath>}`.
    Path(JsonPath),
}

/// One column: its definition in a `meta.k8s.io/v1` `Table` and how to
/// compute its cell for an object.
#[derive(Debug, Clone)]
pub struct TableColumn {
    name: String,
    type_: String,
    format: String,
    description: String,
    priority: i64,
    source: Source,
}

impl TableColumn {
    /// The column header, e.g. `Name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub fn type_(&self) -> &str {
        &self.type_
    }

    /// The format hint (`name` for the Name column, often empty).
    pub fn format(&self) -> &str {
        &self.format
    }

    /// The description kubectl shows for the column.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// 0 for the default columns, more for `-o wide` ones.
    pub fn priority(&self) -> i64 {
        self.priority
    }

    /// The `columnDefinitions` entry: `name`, `type`, `format`,
    /// `description`, `priority` (all present, as kube-apiserver writes
    /// them).
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }

    /// This column's cell for `obj` (a whole custom object), with ages
    /// measured up to `now`.
    pub fn cell(&self, obj: &Value, now: Timestamp) -> Value {
        let path = match &self.source {
            Source::Name => {
                return Value::String(
                    obj.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                );
            }
            Source::Path(path) => path,
        };
        let Ok(results) = path.find_results(obj) else {
            return Value::Null;
        };
        let Some(value) = results.first().and_then(|r| r.first()) else {
            return Value::Null;
        };
        if self.type_ == "string" {
            return Value::String(print_value(value));
        }
        typed_cell(&self.type_, value, now)
    }
}

/// kube-apiserver's `cellForJSONValue`.
fn typed_cell(type_: &str, value: &Value, now: Timestamp) -> Value {
    match (type_, value) {
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => Value::from(i),
            // Go converts the float64 with int64(f): truncation.
            None => Value::from(n.as_f64().unwrap_or(0.0) as i64),
        },
        ("number", Value::Number(n)) => go_float_value(n.as_f64().unwrap_or(0.0)),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => Value::String(age(s, now)),
        _ => Value::Null,
    }
}

/// A float64 cell as Go's `encoding/json` writes it: integral values
/// without a fraction (`3`, not `3.0`), so a client sees the same number
/// kube-apiserver sends.
fn go_float_value(f: f64) -> Value {
    const I64_BOUND: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if f.fract() == 0.0 && f.abs() < I64_BOUND && !(f == 0.0 && f.is_sign_negative()) {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// A `date` cell: the age of an RFC 3339 time as kubectl prints it
/// (`metav1.Time.UnmarshalQueryParameter` then
/// `ConvertToHumanReadableDateType`).
fn age(text: &str, now: Timestamp) -> String {
    if text.is_empty() || text == "null" {
        return "<unknown>".to_string();
    }
    match parse_rfc3339(text) {
        None => "<invalid>".to_string(),
        Some(t) if t == go_zero_time() => "<unknown>".to_string(),
        Some(t) => human_duration(now.duration_since(t)),
    }
}

/// The Table columns of one version of a custom resource.
#[derive(Debug, Clone)]
pub struct PrinterColumns {
    columns: Vec<TableColumn>,
    invalid: Option<InvalidColumn>,
}

impl PrinterColumns {
    /// kube-apiserver's convertor for a version's declared columns: `Name`,
    /// then `declared` (or `Age` when none are declared). A column whose
    /// `jsonPath` does not parse ends the list, as on a real cluster; see
    /// [`invalid`](Self::invalid).
    pub fn new(declared: &[PrinterColumn]) -> Self {
        let age;
        let declared = if declared.is_empty() {
            age = [PrinterColumn {
                name: "Age".to_string(),
                type_: "date".to_string(),
                format: None,
                description: Some(object_meta_doc("creationTimestamp").to_string()),
                priority: 0,
                json_path: ".metadata.creationTimestamp".to_string(),
            }];
            &age[..]
        } else {
            declared
        };
        let mut columns = vec![TableColumn {
            name: "Name".to_string(),
            type_: "string".to_string(),
            format: "name".to_string(),
            description: object_meta_doc("name").to_string(),
            priority: 0,
            source: Source::Name,
        }];
        let mut invalid = None;
        for col in declared {
            let path = match JsonPath::parse(&format!("{{{}}}", col.json_path)) {
                Ok(path) => path,
                Err(source) => {
                    invalid = Some(InvalidColumn {
                        json_path: col.json_path.clone(),
                        source,
                    });
                    break;
                }
            };
            let description = match col.description.as_deref() {
                Some(d) if !d.is_empty() => d.to_string(),
                _ => format!(
                    "Custom resource definition column (in JSONPath format): {}",
                    col.json_path
                ),
            };
            columns.push(TableColumn {
                name: col.name.clone(),
                type_: col.type_.clone(),
                format: col.format.clone().unwrap_or_default(),
                description,
                priority: col.priority,
                source: Source::Path(path),
            });
        }
        Self { columns, invalid }
    }

    /// The columns of `version` (its `additionalPrinterColumns`).
    pub fn for_version(version: &Version) -> Self {
        Self::new(&version.printer_columns)
    }

    /// The columns, `Name` first.
    pub fn columns(&self) -> &[TableColumn] {
        &self.columns
    }

    /// The first declared column whose `jsonPath` does not parse, if any
    /// (it and the columns after it are not served).
    pub fn invalid(&self) -> Option<&InvalidColumn> {
        self.invalid.as_ref()
    }

    /// The Table's `columnDefinitions`.
    pub fn definitions(&self) -> Vec<Value> {
        self.columns.iter().map(TableColumn::definition).collect()
    }

    /// A row's `cells` for `obj`, ages measured up to `now`.
    pub fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        self.columns.iter().map(|c| c.cell(obj, now)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, type_: &str, path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.to_string(),
            type_: type_.to_string(),
            format: None,
            description: None,
            priority: 0,
            json_path: path.to_string(),
        }
    }

    fn now() -> Timestamp {
        "2026-01-02T03:04:05Z".parse().unwrap()
    }

    #[test]
    fn without_declared_columns_name_and_age() {
        let cols = PrinterColumns::new(&[]);
        let defs = cols.definitions();
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(defs[1]["name"], "Age");
        assert_eq!(defs[1]["type"], "date");
        assert_eq!(defs[1]["format"], "");
        assert!(
            defs[1]["description"]
                .as_str()
                .unwrap()
                .starts_with("CreationTimestamp is a timestamp")
        );
        let obj = json!({"metadata": {"name": "c", "creationTimestamp": "2026-01-02T02:59:00Z"}});
        assert_eq!(cols.cells(&obj, now()), vec![json!("c"), json!("5m5s")]);
    }

    #[test]
    fn declared_columns_replace_age() {
        let mut replicas = col("Replicas", "integer", ".spec.replicas");
        replicas.priority = 1;
        replicas.description = Some("How many".into());
        let cols = PrinterColumns::new(&[col("Spec", "string", ".spec.cronSpec"), replicas]);
        let names: Vec<&str> = cols.columns().iter().map(TableColumn::name).collect();
        assert_eq!(names, ["Name", "Spec", "Replicas"]);
        assert_eq!(
            cols.definitions()[1],
            json!({"name": "Spec", "type": "string", "format": "", "priority": 0,
                   "description": "Custom resource definition column (in JSONPath format): .spec.cronSpec"})
        );
        assert_eq!(cols.definitions()[2]["priority"], 1);
        assert_eq!(cols.definitions()[2]["description"], "How many");
    }

    #[test]
    fn cells_by_type() {
        let obj = json!({
            "metadata": {"name": "c", "creationTimestamp": "2025-12-30T03:04:05Z"},
            "spec": {"replicas": 3, "ratio": 2.0, "half": 0.5, "on": true, "word": "x",
                     "tags": ["a", "b"], "nothing": null, "when": "2026-01-02T03:04:00.123+00:00",
                     "bad": "yesterday", "zero": "0001-01-01T00:00:00Z"},
        });
        let cell =
            |t: &str, p: &str| PrinterColumns::new(&[col("C", t, p)]).cells(&obj, now())[1].clone();
        assert_eq!(cell("integer", ".spec.replicas"), json!(3));
        assert_eq!(cell("integer", ".spec.half"), json!(0));
        assert_eq!(cell("integer", ".spec.word"), Value::Null);
        assert_eq!(cell("number", ".spec.replicas"), json!(3));
        assert_eq!(cell("number", ".spec.half"), json!(0.5));
        assert_eq!(
            serde_json::to_string(&cell("number", ".spec.ratio")).unwrap(),
            "2"
        );
        assert_eq!(cell("boolean", ".spec.on"), json!(true));
        assert_eq!(cell("boolean", ".spec.word"), Value::Null);
        assert_eq!(cell("string", ".spec.replicas"), json!("3"));
        assert_eq!(cell("string", ".spec.tags"), json!(r#"["a","b"]"#));
        assert_eq!(cell("string", ".spec.nothing"), json!("<no value>"));
        assert_eq!(
            cell("string", ".spec.tags[*]"),
            json!("a"),
            "only the first value counts"
        );
        assert_eq!(cell("string", ".spec.missing"), Value::Null);
        assert_eq!(
            cell("string", ".spec.tags[7]"),
            Value::Null,
            "an error is an empty cell"
        );
        assert_eq!(cell("date", ".metadata.creationTimestamp"), json!("3d"));
        // 4.877s: Go truncates to whole seconds.
        assert_eq!(cell("date", ".spec.when"), json!("4s"));
        assert_eq!(cell("date", ".spec.bad"), json!("<invalid>"));
        assert_eq!(cell("date", ".spec.zero"), json!("<unknown>"));
        assert_eq!(cell("date", ".spec.replicas"), Value::Null);
        assert_eq!(cell("date", ".spec.missing"), Value::Null);
    }

    #[test]
    fn an_unparsable_path_ends_the_columns() {
        let cols = PrinterColumns::new(&[
            col("A", "string", ".spec.a"),
            col("B", "string", ".spec.b[?(@.x"),
            col("C", "string", ".spec.c"),
        ]);
        let names: Vec<&str> = cols.columns().iter().map(TableColumn::name).collect();
        assert_eq!(names, ["Name", "A"]);
        let invalid = cols.invalid().unwrap();
        assert_eq!(
            invalid.to_string(),
            r#"unrecognized column definition ".spec.b[?(@.x""#
        );
        assert_eq!(invalid.source, JsonPathError::UnterminatedFilter);
    }
}
