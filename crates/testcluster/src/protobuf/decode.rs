//! A descriptor-driven decoder of Kubernetes protobuf messages into the
//! JSON kube-apiserver would accept for the same object.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::ProtobufError;
use super::descriptors::MESSAGES;

/// How a field is encoded and turned into JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Double,
    /// A nested message (index into [`MESSAGES`]).
    Message(u16),
    /// A nested message whose fields belong to the parent (a Go struct
    /// embedded with `json:",inline"`).
    Inline(u16),
    MapString,
    MapBytes,
    MapMessage(u16),
}

/// One field of a message.
#[derive(Debug)]
pub(super) struct Field {
    pub(super) tag: u32,
    pub(super) json: &'static str,
    pub(super) kind: Kind,
    pub(super) repeated: bool,
}

/// One message layout.
#[derive(Debug)]
pub(super) struct Message {
    pub(super) name: &'static str,
    pub(super) fields: &'static [Field],
}

/// A protobuf wire reader.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(super) fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(super) fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| ProtobufError::Truncated("a varint".into()))?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(ProtobufError::Malformed(
            "a varint longer than 10 bytes".into(),
        ))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        let end = end.ok_or_else(|| ProtobufError::Truncated(format!("{n} bytes")))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub(super) fn bytes(&mut self) -> Result<&'a [u8], ProtobufError> {
        let n = usize::try_from(self.varint()?)
            .map_err(|_| ProtobufError::Malformed("a length beyond memory".into()))?;
        self.take(n)
    }

    /// The next field's tag and wire type.
    pub(super) fn key(&mut self) -> Result<(u32, u8), ProtobufError> {
        let k = self.varint()?;
        let tag =
            u32::try_from(k >> 3).map_err(|_| ProtobufError::Malformed("a field tag".into()))?;
        Ok((tag, (k & 7) as u8))
    }

    pub(super) fn skip(&mut self, wire: u8) -> Result<(), ProtobufError> {
        match wire {
            0 => self.varint().map(drop),
            1 => self.take(8).map(drop),
            2 => self.bytes().map(drop),
            5 => self.take(4).map(drop),
            other => Err(ProtobufError::Malformed(format!("wire type {other}"))),
        }
    }
}

fn message(idx: u16) -> &'static Message {
    &MESSAGES[usize::from(idx)]
}

/// The index of the message named `name` (`api.core.v1.ConfigMap`).
pub(super) fn find(name: &str) -> Option<u16> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .and_then(|i| u16::try_from(i).ok())
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ProtobufError::Malformed(format!("{what} is not UTF-8")))
}

/// Decodes a scalar of `kind` at the reader (for packed lists, a value at
/// a time).
fn scalar(r: &mut Reader<'_>, kind: Kind, wire: u8, field: &str) -> Result<Value, ProtobufError> {
    Ok(match (kind, wire) {
        (Kind::Bool, 0) => Value::Bool(r.varint()? != 0),
        (Kind::Int32, 0) => json!(r.varint()? as i64 as i32),
        (Kind::Int64, 0) => json!(r.varint()? as i64),
        (Kind::Double, 1) => {
            let b = r.take(8)?;
            json!(f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        }
        (Kind::String, 2) => Value::String(utf8(r.bytes()?, field)?),
        (Kind::Bytes, 2) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(r.bytes()?))
        }
        _ => {
            return Err(ProtobufError::Malformed(format!(
                "field {field:?} has wire type {wire}, not the one its type uses"
            )));
        }
    })
}

/// Go's `time.Duration.String()` of `nanos`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let neg = nanos < 0;
    let mut u = nanos.unsigned_abs();
    let sign = if neg { "-" } else { "" };
    if u < 1_000_000_000 {
        let (unit, div) = if u < 1_000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{sign}{}{unit}", frac(u, div));
    }
    let mut out = String::new();
    let hours = u / 3_600_000_000_000;
    u %= 3_600_000_000_000;
    let minutes = u / 60_000_000_000;
    u %= 60_000_000_000;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{}s", frac(u, 1_000_000_000)));
    format!("{sign}{out}")
}

/// `value / div` with the fraction's trailing zeros removed.
fn frac(value: u64, div: u64) -> String {
    let whole = value / div;
    let rest = value % div;
    if rest == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

fn timestamp(fields: &Map<String, Value>, micro: bool) -> Option<Value> {
    let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
    if seconds == 0 && nanos == 0 {
        // Go's zero time: serialized as null; left out here.
        return None;
    }
    let ts = jiff::Timestamp::new(seconds, i32::try_from(nanos).unwrap_or(0)).ok()?;
    let text = if micro {
        ts.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
    } else {
        ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    };
    Some(Value::String(text))
}

fn raw_json(fields: &Map<String, Value>, key: &str) -> Result<Option<Value>, ProtobufError> {
    let Some(b64) = fields.get(key).and_then(Value::as_str) else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| ProtobufError::Malformed("raw bytes".into()))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| ProtobufError::Malformed(format!("embedded JSON does not parse: {e}")))
}

/// The JSON of message types whose JSON form is not an object of their
/// fields (`None`: leave the field out, as Go leaves out a zero time).
fn special(name: &str, fields: Map<String, Value>) -> Result<Option<Value>, ProtobufError> {
    Ok(match name {
        "apimachinery.pkg.apis.meta.v1.Time" => timestamp(&fields, false),
        "apimachinery.pkg.apis.meta.v1.MicroTime" => timestamp(&fields, true),
        "apimachinery.pkg.apis.meta.v1.Duration" => Some(Value::String(go_duration(
            fields.get("duration").and_then(Value::as_i64).unwrap_or(0),
        ))),
        "apimachinery.pkg.api.resource.Quantity" => {
            Some(fields.get("string").cloned().unwrap_or(json!("")))
        }
        "apimachinery.pkg.util.intstr.IntOrString" => {
            if fields.get("type").and_then(Value::as_i64) == Some(1) {
                Some(fields.get("strVal").cloned().unwrap_or(json!("")))
            } else {
                Some(fields.get("intVal").cloned().unwrap_or(json!(0)))
            }
        }
        "apimachinery.pkg.runtime.RawExtension" | "apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            raw_json(&fields, "raw")?
        }
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json" => raw_json(&fields, "raw")?,
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray" => fields
            .get("schema")
            .cloned()
            .or_else(|| fields.get("jSONSchemas").cloned()),
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool" => fields
            .get("schema")
            .cloned()
            .or_else(|| Some(fields.get("allows").cloned().unwrap_or(json!(false)))),
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray" => fields
            .get("schema")
            .cloned()
            .or_else(|| fields.get("property").cloned()),
        _ => Some(Value::Object(fields)),
    })
}

/// Whether a decoded field value is the zero value Go writes for an unset
/// non-pointer string; such fields are left out, as Go's JSON
/// `omitempty` leaves them out.
fn is_empty_string(v: &Value) -> bool {
    v.as_str() == Some("")
}

/// Decodes the message `idx` from `bytes` into its JSON form.
pub(super) fn decode_message(
    bytes: &[u8],
    idx: u16,
    depth: usize,
) -> Result<Option<Value>, ProtobufError> {
    let fields = decode_fields(bytes, idx, depth)?;
    special(message(idx).name, fields)
}

fn decode_fields(
    bytes: &[u8],
    idx: u16,
    depth: usize,
) -> Result<Map<String, Value>, ProtobufError> {
    if depth > 64 {
        return Err(ProtobufError::Malformed(
            "messages nested more than 64 deep".into(),
        ));
    }
    let msg = message(idx);
    let mut out = Map::new();
    let mut r = Reader::new(bytes);
    while !r.done() {
        let (tag, wire) = r.key()?;
        let Some(field) = msg.fields.iter().find(|f| f.tag == tag) else {
            r.skip(wire)?;
            continue;
        };
        match field.kind {
            Kind::Message(sub) | Kind::Inline(sub) => {
                if wire != 2 {
                    return Err(ProtobufError::Malformed(format!(
                        "field {:?} of {} is not length-delimited",
                        field.json, msg.name
                    )));
                }
                let body = r.bytes()?;
                if let Kind::Inline(_) = field.kind {
                    out.extend(decode_fields(body, sub, depth + 1)?);
                    continue;
                }
                let Some(value) = decode_message(body, sub, depth + 1)? else {
                    continue;
                };
                if field.repeated {
                    push(&mut out, field.json, value);
                } else {
                    out.insert(field.json.to_string(), value);
                }
            }
            Kind::MapString | Kind::MapBytes | Kind::MapMessage(_) => {
                let entry = r.bytes()?;
                let (key, value) = map_entry(entry, field.kind, depth)?;
                let map = out
                    .entry(field.json.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let (Value::Object(m), Some(v)) = (map, value) {
                    m.insert(key, v);
                }
            }
            kind => {
                if field.repeated && wire == 2 && kind != Kind::String && kind != Kind::Bytes {
                    // A packed list of numbers or booleans.
                    let packed = r.bytes()?;
                    let mut pr = Reader::new(packed);
                    let element_wire = if kind == Kind::Double { 1 } else { 0 };
                    while !pr.done() {
                        let v = scalar(&mut pr, kind, element_wire, field.json)?;
                        push(&mut out, field.json, v);
                    }
                    continue;
                }
                let v = scalar(&mut r, kind, wire, field.json)?;
                if field.repeated {
                    push(&mut out, field.json, v);
                } else if !is_empty_string(&v) {
                    out.insert(field.json.to_string(), v);
                }
            }
        }
    }
    if msg.name == "apimachinery.pkg.apis.meta.v1.ObjectMeta" {
        // Non-pointer fields Go writes even when unset.
        if out.get("generation").and_then(Value::as_i64) == Some(0) {
            out.remove("generation");
        }
    }
    Ok(out)
}

fn push(out: &mut Map<String, Value>, key: &str, v: Value) {
    match out
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(a) => a.push(v),
        other => *other = Value::Array(vec![v]),
    }
}

fn map_entry(
    entry: &[u8],
    kind: Kind,
    depth: usize,
) -> Result<(String, Option<Value>), ProtobufError> {
    let mut r = Reader::new(entry);
    let mut key = String::new();
    let mut value = match kind {
        Kind::MapString | Kind::MapBytes => Some(json!("")),
        _ => None,
    };
    while !r.done() {
        let (tag, wire) = r.key()?;
        match (tag, wire) {
            (1, 2) => key = utf8(r.bytes()?, "a map key")?,
            (2, 2) => {
                let b = r.bytes()?;
                value = match kind {
                    Kind::MapString => Some(Value::String(utf8(b, "a map value")?)),
                    Kind::MapBytes => Some(Value::String(
                        base64::engine::general_purpose::STANDARD.encode(b),
                    )),
                    Kind::MapMessage(sub) => decode_message(b, sub, depth + 1)?,
                    _ => None,
                };
            }
            (_, w) => r.skip(w)?,
        }
    }
    if value.is_none()
        && let Kind::MapMessage(sub) = kind
    {
        value = decode_message(&[], sub, depth + 1)?;
    }
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(2_000_000), "2ms");
    }

    #[test]
    fn descriptors_are_sorted_and_known() {
        assert!(MESSAGES.windows(2).all(|w| w[0].name < w[1].name));
        assert!(find("api.core.v1.ConfigMap").is_some());
        assert!(find("api.apps.v1.Deployment").is_some());
        assert!(find("api.authorization.v1.SelfSubjectAccessReview").is_some());
        assert!(find("api.core.v1.Nope").is_none());
    }
}
