//! Objects serialized before the store's lock is taken, with a gap where
//! the resourceVersion goes.
//!
//! Only the commit, under the lock, knows an object's resourceVersion.
//! Serializing the whole object there made every other writer wait for
//! it; now the commit only copies the bytes on either side of the gap.

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

fn write_json(buf: &mut Vec<u8>, v: &impl serde::Serialize) {
    // Serializing a string or a `Value` into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *buf, v);
}

impl Encoded {
    /// Serialize `object`, giving it an (empty) `metadata.resourceVersion`
    /// first so that the version has its place in the key order.
    pub(crate) fn new(object: &mut Value) -> Encoded {
        semantics::meta_mut(object).insert("resourceVersion".into(), Value::String(String::new()));
        let mut bytes = Vec::with_capacity(1024);
        let mut slot = 0;
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
                    if mkey == "resourceVersion" {
                        bytes.push(b'"');
                        slot = bytes.len();
                        bytes.push(b'"');
                    } else {
                        write_json(&mut bytes, mvalue);
                    }
                }
                bytes.push(b'}');
            }
        }
        bytes.push(b'}');
        Encoded { bytes, slot }
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
