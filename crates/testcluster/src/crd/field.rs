//! Field-level validation errors rendered as kube-apiserver renders them.
//!
//! kube-apiserver collects validation failures as apimachinery's
//! `field.ErrorList` and answers `422 Invalid` with a `Status` whose message
//! is `<Kind>.<group> "<name>" is invalid: <errors>` and whose
//! `details.causes` carry one entry per error (`reason`, `message`,
//! `field`). [`FieldError`] is one such error; [`invalid_status`] builds the
//! `Status` body. The text of each error follows `field.Error.Error()`:
//! `<field>: <type text>[: <bad value>][: <detail>]`, with the bad value
//! printed the way Go's `fmt` prints it.

use std::fmt;

use serde_json::{Value, json};

/// The kind of a field error; its [`reason`](ErrorType::reason) is the
/// cause type in the `Status`, its [`text`](ErrorType::text) opens the
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// A referenced value was not found.
    NotFound,
    /// A required value is missing.
    Required,
    /// A value that must be unique is repeated.
    Duplicate,
    /// A malformed value.
    Invalid,
    /// A value outside an enumerated set.
    NotSupported,
    /// A value that is valid in form but not allowed here.
    Forbidden,
    /// A value that is too long (the value itself is not printed).
    TooLong,
    /// A list or map with too many items.
    TooMany,
    /// An error not caused by the input.
    Internal,
    /// A value of the wrong type for the schema.
    TypeInvalid,
}

impl ErrorType {
    /// The machine-readable cause type (`FieldValueInvalid`, ...).
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human-readable text the message starts with (`Invalid value`,
    /// ...).
    pub fn text(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }
}

/// The offending value of a [`FieldError`], kept with the Go type it has in
/// kube-apiserver so it prints the same way.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// Not printed at all (`field.TooMany` with an unknown count, ...).
    Omitted,
    /// A JSON value as decoded from a request: strings print quoted,
    /// numbers and booleans bare, `null` as `"null"`, objects and arrays in
    /// Go's `%#v` syntax.
    Json(Value),
    /// A Go `int` (counts such as the number of list items).
    Count(i64),
    /// A value printed verbatim (a Go `fmt.Stringer` or a pre-rendered
    /// struct).
    Raw(String),
}

impl BadValue {
    /// A string value (printed quoted).
    pub fn str(s: impl Into<String>) -> Self {
        Self::Json(Value::String(s.into()))
    }
}

/// One validation error: what is wrong, where, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The kind of error.
    pub error_type: ErrorType,
    /// The field path, e.g. `spec.versions[0].name` or
    /// `spec.validation.openAPIV3Schema.properties[spec].type`.
    pub field: String,
    /// The offending value.
    pub bad_value: BadValue,
    /// Why the value is wrong (may be empty).
    pub detail: String,
}

impl FieldError {
    fn new(
        error_type: ErrorType,
        field: impl Into<String>,
        bad_value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            error_type,
            field: field.into(),
            bad_value,
            detail: detail.into(),
        }
    }

    /// `field.Required`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::str(""), detail)
    }

    /// `field.Invalid`.
    pub fn invalid(field: impl Into<String>, value: BadValue, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, value, detail)
    }

    /// `field.TypeInvalid`.
    pub fn type_invalid(
        field: impl Into<String>,
        value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::TypeInvalid, field, value, detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::str(""), detail)
    }

    /// `field.Duplicate`.
    pub fn duplicate(field: impl Into<String>, value: BadValue) -> Self {
        Self::new(ErrorType::Duplicate, field, value, "")
    }

    /// `field.NotSupported`: the detail lists the supported values, quoted.
    pub fn not_supported(field: impl Into<String>, value: BadValue, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, field, value, detail)
    }

    /// `field.TooLong`: `max` is in bytes.
    pub fn too_long(field: impl Into<String>, value: BadValue, max: i64) -> Self {
        let detail = if max == 1 {
            "may not be more than 1 byte".to_string()
        } else if max >= 0 {
            format!("may not be more than {max} bytes")
        } else {
            "value is too long".to_string()
        };
        Self::new(ErrorType::TooLong, field, value, detail)
    }

    /// `field.TooMany`.
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            format!("must have at most {max} items")
        } else {
            "has too many items".to_string()
        };
        let value = if actual >= 0 {
            BadValue::Count(actual)
        } else {
            BadValue::Omitted
        };
        Self::new(ErrorType::TooMany, field, value, detail)
    }

    /// The message without the field path (`field.Error.ErrorBody`); this
    /// is a cause's `message`.
    pub fn body(&self) -> String {
        let mut s = match self.error_type {
            ErrorType::Required
            | ErrorType::Forbidden
            | ErrorType::TooLong
            | ErrorType::Internal => self.error_type.text().to_string(),
            _ => match &self.bad_value {
                BadValue::Omitted => self.error_type.text().to_string(),
                BadValue::Count(n) => format!("{}: {n}", self.error_type.text()),
                BadValue::Raw(r) => format!("{}: {r}", self.error_type.text()),
                BadValue::Json(v) => format!("{}: {}", self.error_type.text(), go_value(v)),
            },
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The `details.causes` entry for this error.
    pub fn to_cause(&self) -> Value {
        json!({
            "reason": self.error_type.reason(),
            "message": self.body(),
            "field": self.field,
        })
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for FieldError {}

/// A path to a field, built like apimachinery's `field.Path`:
/// `child` appends `.name`, `index` appends `[i]`, `key` appends `[k]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldPath(String);

impl FieldPath {
    /// A path starting at `name`.
    pub fn new(name: &str) -> Self {
        Self(name.to_string())
    }

    /// The path of a named child.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_string())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// The path of a list element.
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// The path of a map entry.
    pub fn key(&self, k: &str) -> Self {
        Self(format!("{}[{k}]", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&FieldPath> for String {
    fn from(p: &FieldPath) -> String {
        p.0.clone()
    }
}

impl From<FieldPath> for String {
    fn from(p: FieldPath) -> String {
        p.0
    }
}

/// The errors joined as apimachinery's `ErrorList.ToAggregate().Error()`
/// does: duplicates (by text) dropped, one error as itself, several as
/// `[a, b]`. `None` for an empty list.
pub fn aggregate_message(errors: &[FieldError]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let texts: Vec<String> = errors
        .iter()
        .map(ToString::to_string)
        .filter(|t| seen.insert(t.clone()))
        .collect();
    match texts.len() {
        0 => None,
        1 => texts.into_iter().next(),
        _ => Some(format!("[{}]", texts.join(", "))),
    }
}

/// The `422 Invalid` `Status` body kube-apiserver answers for `errors` on
/// the object `name` of `kind` in `group` (`apierrors.NewInvalid`): message
/// `<Kind>.<group> "<name>" is invalid: ...` and one cause per error.
pub fn invalid_status(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Value {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let message = match aggregate_message(errors) {
        Some(agg) => format!("{qualified} {} is invalid: {agg}", go_quote(name)),
        None => format!("{qualified} {} is invalid", go_quote(name)),
    };
    let mut status = crate::status::status_value(422, "Invalid", &message);
    let causes: Vec<Value> = errors.iter().map(FieldError::to_cause).collect();
    status["details"] = json!({
        "name": name,
        "group": group,
        "kind": kind,
        "causes": causes,
    });
    status
}

/// A string quoted as Go's `strconv.Quote` / `%q` quotes it.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A float as Go's `%v` prints a `float64` (`strconv.FormatFloat(f, 'g',
/// -1, 64)`): shortest round-trip digits, in exponent form when the
/// decimal exponent is below -4 or at least 6 (`1e+06`, `1e-05`).
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.5e6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let mant = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{mant}e{esign}{:02}", exp.abs());
    }
    // Plain decimal notation.
    let point = exp + 1; // digits before the decimal point
    let text = if point <= 0 {
        format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{a}.{b}")
    };
    format!("{sign}{text}")
}

/// A JSON number printed as Go prints the value apimachinery decoded it to
/// (`int64` when integral and in range, `float64` otherwise).
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A decoded JSON value as `field.Error` prints a bad value: strings
/// quoted, scalars bare, `null` as `"null"`, objects and arrays in Go's
/// `%#v` syntax.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "\"null\"".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(_) | Value::Object(_) => go_sharp_v(v),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{...}`,
/// `[]interface {}{...}`), map keys sorted as `fmt` sorts them.
pub fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_sharp_v(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_float_matches_fmt_v() {
        assert_eq!(go_float(10.0), "10");
        assert_eq!(go_float(10.5), "10.5");
        assert_eq!(go_float(100000.0), "100000");
        assert_eq!(go_float(1000000.0), "1e+06");
        assert_eq!(go_float(1234567.0), "1.234567e+06");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(-2.5), "-2.5");
        assert_eq!(go_float(0.1), "0.1");
    }

    #[test]
    fn quoting_follows_strconv_quote() {
        assert_eq!(go_quote("a\"b"), "\"a\\\"b\"");
        assert_eq!(go_quote("tab\there"), "\"tab\\there\"");
        assert_eq!(go_quote("\u{1}"), "\"\\x01\"");
        assert_eq!(go_quote("héllo"), "\"héllo\"");
    }

    #[test]
    fn bodies_render_like_field_error() {
        let e = FieldError::type_invalid(
            "spec.replicas",
            BadValue::str("string"),
            "spec.replicas in body must be of type integer: \"string\"",
        );
        assert_eq!(
            e.to_string(),
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        );
        assert_eq!(e.to_cause()["reason"], "FieldValueTypeInvalid");
        let r = FieldError::required("spec.names.plural", "");
        assert_eq!(r.to_string(), "spec.names.plural: Required value");
        let ns = FieldError::not_supported(
            "spec.scope",
            BadValue::str("Global"),
            &["Cluster", "Namespaced"],
        );
        assert_eq!(
            ns.to_string(),
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\""
        );
        let tm = FieldError::too_many("spec.list", 3, 2);
        assert_eq!(
            tm.to_string(),
            "spec.list: Too many: 3: must have at most 2 items"
        );
        let tl = FieldError::too_long("spec.name", BadValue::str("abcdef"), 5);
        assert_eq!(
            tl.to_string(),
            "spec.name: Too long: may not be more than 5 bytes"
        );
        let m = FieldError::invalid(
            "spec.x",
            BadValue::Json(serde_json::json!({"b": [1, "x"], "a": null})),
            "bad",
        );
        assert_eq!(
            m.to_string(),
            "spec.x: Invalid value: map[string]interface {}{\"a\":interface {}(nil), \"b\":[]interface {}{1, \"x\"}}: bad"
        );
        let n = FieldError::invalid("spec.x", BadValue::Json(Value::Null), "bad");
        assert_eq!(n.to_string(), "spec.x: Invalid value: \"null\": bad");
    }

    #[test]
    fn paths_build_like_field_path() {
        let p = FieldPath::new("spec")
            .child("versions")
            .index(0)
            .child("schema")
            .child("openAPIV3Schema")
            .child("properties")
            .key("spec")
            .child("type");
        assert_eq!(
            p.as_str(),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type"
        );
    }

    #[test]
    fn invalid_status_has_kube_apiserver_shape() {
        let errs = vec![
            FieldError::required("spec.a", ""),
            FieldError::required("spec.a", ""),
            FieldError::required("spec.b", ""),
        ];
        let s = invalid_status("stable.example.com", "CronTab", "x", &errs);
        assert_eq!(s["code"], 422);
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(
            s["message"],
            "CronTab.stable.example.com \"x\" is invalid: [spec.a: Required value, spec.b: Required value]"
        );
        assert_eq!(s["details"]["causes"].as_array().unwrap().len(), 3);
        assert_eq!(s["details"]["causes"][2]["field"], "spec.b");
        assert_eq!(s["details"]["kind"], "CronTab");
        let one = invalid_status("", "Pod", "p", &errs[..1]);
        assert_eq!(
            one["message"],
            "Pod \"p\" is invalid: spec.a: Required value"
        );
    }
}
