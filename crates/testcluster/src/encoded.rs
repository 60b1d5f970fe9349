//! Objects serialized with gaps in their metadata, filled in later without
//! serializing again.
//!
//! Only the commit, under the store's lock, knows an object's
//! resourceVersion. Serializing the whole object there made every other
//! writer wait for it; now the object is serialized before the lock is
//! taken and the commit only copies the bytes on either side of the
//! resourceVersion's gap. Creates from a template (see `templates`) fill
//! the name, uid and creationTimestamp gaps the same way.

use std::io::Write as _;

use bytes::Bytes;
use serde_json::Value;

use crate::semantics;
use crate::store::{EventType, build_frame};

/// An object serialized without its `metadata.resourceVersion` value.
#[derive(Debug)]
pub(crate) struct Encoded {
    /// The JSON with `"resourceVersion":""` in the metadata.
    bytes: Vec<u8>,
    /// The offset between that value's quotes.
    slot: usize,
}

/// An object serialized with the string values of some metadata fields
/// left out, to be filled in later without serializing again.
#[derive(Debug)]
pub(crate) struct Gapped {
    /// The JSON with `""` as the value of every gap field.
    bytes: Vec<u8>,
    /// (offset of the `""`, index of the field in the list given to
    /// [`Gapped::new`]), in byte order.
    gaps: Vec<(usize, usize)>,
}

fn write_json(buf: &mut Vec<u8>, v: &(impl serde::Serialize + ?Sized)) {
    // Serializing a string or a `Value` into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *buf, v);
}

impl Gapped {
    /// Serialize `object` with the metadata `fields` as gaps. A missing
    /// field is added first so that it has its place in the key order;
    /// whatever value a field has is not written. When
    /// `creationTimestamp` is a gap, so is the `time` of every
    /// `managedFields` entry (a create's entries carry its creation time).
    pub(crate) fn new(object: &mut Value, fields: &[&str]) -> Gapped {
        let meta = semantics::meta_mut(object);
        for field in fields {
            if !meta.contains_key(*field) {
                meta.insert((*field).into(), Value::String(String::new()));
            }
        }
        let time_field = fields.iter().position(|f| *f == "creationTimestamp");
        let mut bytes = Vec::with_capacity(1024);
        let mut gaps = Vec::with_capacity(fields.len() + 1);
        bytes.push(b'{');
        if let Value::Object(top) = object {
            for (i, (key, value)) in top.iter().enumerate() {
                if i > 0 {
                    bytes.push(b',');
                }
                write_json(&mut bytes, key);
                bytes.push(b':');
                let Value::Object(meta) = value else {
                    write_json(&mut bytes, value);
                    continue;
                };
                if key != "metadata" {
                    write_json(&mut bytes, value);
                    continue;
                }
                // The same order and form as serde_json's own output.
                bytes.push(b'{');
                for (j, (mkey, mvalue)) in meta.iter().enumerate() {
                    if j > 0 {
                        bytes.push(b',');
                    }
                    write_json(&mut bytes, mkey);
                    bytes.push(b':');
                    match (fields.iter().position(|f| f == mkey), time_field, mvalue) {
                        (Some(field), _, _) => {
                            gaps.push((bytes.len(), field));
                            bytes.extend_from_slice(b"\"\"");
                        }
                        // managedFields times are the creation time: gaps too.
                        (None, Some(ts), Value::Array(entries)) if mkey == "managedFields" => {
                            bytes.push(b'[');
                            for (e, entry) in entries.iter().enumerate() {
                                if e > 0 {
                                    bytes.push(b',');
                                }
                                let Value::Object(entry) = entry else {
                                    write_json(&mut bytes, entry);
                                    continue;
                                };
                                bytes.push(b'{');
                                for (k, (ekey, evalue)) in entry.iter().enumerate() {
                                    if k > 0 {
                                        bytes.push(b',');
                                    }
                                    write_json(&mut bytes, ekey);
                                    bytes.push(b':');
                                    if ekey == "time" {
                                        gaps.push((bytes.len(), ts));
                                        bytes.extend_from_slice(b"\"\"");
                                    } else {
                                        write_json(&mut bytes, evalue);
                                    }
                                }
                                bytes.push(b'}');
                            }
                            bytes.push(b']');
                        }
                        (None, _, _) => write_json(&mut bytes, mvalue),
                    }
                }
                bytes.push(b'}');
            }
        }
        bytes.push(b'}');
        Gapped { bytes, gaps }
    }

    /// The object with gap field `i` set to `values[i]` (empty past the
    /// end of `values`), except field `rv_field`, whose gap stays open for
    /// the commit to write the resourceVersion into.
    pub(crate) fn fill(&self, values: &[&str], rv_field: usize) -> Encoded {
        let extra: usize = values.iter().map(|v| v.len() + 2).sum();
        let mut bytes = Vec::with_capacity(self.bytes.len() + extra);
        let mut slot = 0;
        let mut from = 0;
        for &(at, field) in &self.gaps {
            bytes.extend_from_slice(&self.bytes[from..at]);
            from = at + 2;
            if field == rv_field {
                bytes.push(b'"');
                slot = bytes.len();
                bytes.push(b'"');
            } else {
                write_json(&mut bytes, values.get(field).copied().unwrap_or(""));
            }
        }
        bytes.extend_from_slice(&self.bytes[from..]);
        Encoded { bytes, slot }
    }
}

impl Encoded {
    /// Serialize `object`, giving it an (empty) `metadata.resourceVersion`
    /// first so that the version has its place in the key order.
    pub(crate) fn new(object: &mut Value) -> Encoded {
        Gapped::new(object, &["resourceVersion"]).fill(&[], 0)
    }

    /// The serialized size in bytes, without the resourceVersion's digits.
    pub(crate) fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The watch frame `{"type":..,"object":..}\n` for this object at
    /// resourceVersion `rv`, and the slice of it holding the object.
    pub(crate) fn frame(&self, kind: EventType, rv: u64) -> (Bytes, Bytes) {
        build_frame(kind, self.bytes.len() + 20, |buf| {
            buf.extend_from_slice(&self.bytes[..self.slot]);
            let _ = write!(buf, "{rv}");
            buf.extend_from_slice(&self.bytes[self.slot..]);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_frame_holds_the_object_as_serde_json_writes_it() {
        let mut obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p\"q", "labels": {"a": "b"}, "resourceVersion": "9",
                         "annotations": {"resourceVersion": "x"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"}
        });
        let encoded = Encoded::new(&mut obj);
        let (frame, object) = encoded.frame(EventType::Added, 1234);
        obj["metadata"]["resourceVersion"] = json!("1234");
        assert_eq!(&object[..], &serde_json::to_vec(&obj).unwrap()[..]);
        let parsed: Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(parsed, json!({"type": "ADDED", "object": obj}));
        assert!(frame.ends_with(b"}\n"));
    }

    #[test]
    fn filled_gaps_read_as_serde_json_writes_the_object() {
        let mut obj = json!({
            "kind": "Pod",
            "metadata": {"name": "old", "labels": {"name": "kept", "uid": "kept"},
                         "managedFields": [{"manager": "m", "time": "old", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"nodeName": "n"}
        });
        let fields = ["creationTimestamp", "name", "resourceVersion", "uid"];
        let gapped = Gapped::new(&mut obj, &fields);
        for (name, uid) in [("new\"one", "u-1"), ("b", "u-2")] {
            let (_, object) = gapped
                .fill(&["2026-01-02T03:04:05Z", name, "", uid], 2)
                .frame(EventType::Added, 77);
            let mut expected = obj.clone();
            expected["metadata"]["creationTimestamp"] = json!("2026-01-02T03:04:05Z");
            expected["metadata"]["managedFields"][0]["time"] = json!("2026-01-02T03:04:05Z");
            expected["metadata"]["name"] = json!(name);
            expected["metadata"]["resourceVersion"] = json!("77");
            expected["metadata"]["uid"] = json!(uid);
            assert_eq!(&object[..], &serde_json::to_vec(&expected).unwrap()[..]);
        }
    }

    #[test]
    fn an_object_without_metadata_gets_one() {
        let mut obj = json!({"kind": "Namespace"});
        let (_, object) = Encoded::new(&mut obj).frame(EventType::Deleted, 7);
        let parsed: Value = serde_json::from_slice(&object).unwrap();
        assert_eq!(
            parsed,
            json!({"kind": "Namespace", "metadata": {"resourceVersion": "7"}})
        );
    }
}
