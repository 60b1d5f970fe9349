//! Decoding of Kubernetes protobuf request bodies
//! (`Content-Type: application/vnd.kubernetes.protobuf`) into the JSON the
//! rest of the server works with.
//!
//! A body is the 4-byte magic `k8s\0` followed by a `runtime.Unknown`
//! envelope: `typeMeta` (apiVersion, kind), `raw` (the object's message),
//! `contentEncoding` and `contentType`. kubectl sends such bodies for the
//! objects it builds from typed Go structs (`kubectl create namespace`,
//! `configmap`, `secret`, `deployment`, `role`, ..., and the
//! SelfSubjectAccessReview of `kubectl auth can-i`). It accepts JSON
//! answers: it sends `Accept: application/vnd.kubernetes.protobuf,
//! application/json` and decodes whatever content type comes back, so the
//! server only needs to decode, not encode, protobuf.
//!
//! The message layouts (`descriptors.rs`) are generated from the k8s-pb
//! crate's prost structs, with JSON field names from k8s-openapi, by
//! `generate_descriptors.py`. The decoder is generic over them: every
//! v1 (and autoscaling/v2) kind of the core, apps, batch, rbac,
//! coordination, events, scheduling, policy, networking, autoscaling,
//! discovery, authorization, authentication, storage, certificates,
//! admissionregistration and node groups, plus CustomResourceDefinitions.
//!
//! JSON mapping: bytes are base64 strings, `Quantity` a string,
//! `IntOrString` a number or string, `Time` RFC 3339 with seconds,
//! `MicroTime` with microseconds, `Duration` Go's duration text,
//! `RawExtension` and `FieldsV1` the embedded JSON, inline Go structs
//! (`VolumeSource` in `Volume`, ...) flattened into their parent. Go
//! writes non-pointer fields even when unset; empty strings, a zero
//! `metadata.generation` and zero times are left out, as Go's JSON
//! `omitempty` leaves them out (a zero number or `false` on the wire is
//! kept: for pointer fields such as `spec.replicas` it is meaningful).

mod decode;
#[rustfmt::skip]
mod descriptors;

use serde_json::Value;

use crate::decode::BodyDecoder;
use crate::resources::ResourceDef;
use crate::status::ApiError;

/// The 4 bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// The protobuf media type.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded (the server answers `400
/// BadRequest` with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("the protobuf body does not start with the Kubernetes magic number k8s\\0")]
    NoMagic,
    /// The body ends in the middle of a value.
    #[error("the protobuf body is truncated (expected {0})")]
    Truncated(String),
    /// The body is not valid protobuf for its type.
    #[error("the protobuf body is malformed: {0}")]
    Malformed(String),
    /// The envelope names a type the decoder does not know.
    #[error(
        "protobuf bodies of kind {kind:?} in {api_version:?} are not supported by the test cluster; send JSON"
    )]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The envelope's content is compressed or not protobuf.
    #[error("protobuf bodies with contentEncoding {0:?} are not supported")]
    Encoding(String),
}

/// The module path of a group's messages in the descriptors.
fn package(group: &str, version: &str) -> String {
    match group {
        "" => format!("api.core.{version}"),
        "apiextensions.k8s.io" => {
            format!("apiextensions_apiserver.pkg.apis.apiextensions.{version}")
        }
        g => {
            let first = g.split('.').next().unwrap_or(g);
            format!("api.{first}.{version}")
        }
    }
}

/// Decodes a protobuf request body into the object's JSON, with
/// `apiVersion` and `kind` from the envelope.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body
        .strip_prefix(MAGIC.as_slice())
        .ok_or(ProtobufError::NoMagic)?;
    let mut r = decode::Reader::new(rest);
    let (mut api_version, mut kind, mut raw, mut encoding) =
        (String::new(), String::new(), &[][..], String::new());
    while !r.done() {
        let (tag, wire) = r.key()?;
        match (tag, wire) {
            (1, 2) => {
                let mut tm = decode::Reader::new(r.bytes()?);
                while !tm.done() {
                    let (t, w) = tm.key()?;
                    match (t, w) {
                        (1, 2) => api_version = text(tm.bytes()?)?,
                        (2, 2) => kind = text(tm.bytes()?)?,
                        (_, w) => tm.skip(w)?,
                    }
                }
            }
            (2, 2) => raw = r.bytes()?,
            (3, 2) => encoding = text(r.bytes()?)?,
            (_, w) => r.skip(w)?,
        }
    }
    if !encoding.is_empty() {
        return Err(ProtobufError::Encoding(encoding));
    }
    let (group, version) = api_version
        .rsplit_once('/')
        .unwrap_or(("", api_version.as_str()));
    let name = format!("{}.{kind}", package(group, version));
    let idx = decode::find(&name).ok_or_else(|| ProtobufError::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let mut obj = decode::decode_message(raw, idx, 0)?.unwrap_or(Value::Object(Default::default()));
    if let Value::Object(map) = &mut obj {
        // apiVersion and kind first, as clients write them.
        let mut ordered = serde_json::Map::new();
        ordered.insert("apiVersion".into(), Value::String(api_version));
        ordered.insert("kind".into(), Value::String(kind));
        ordered.extend(std::mem::take(map));
        *map = ordered;
    }
    Ok(obj)
}

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ProtobufError::Malformed("a type name is not UTF-8".into()))
}

/// Whether a `Content-Type` header value is the protobuf media type.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(CONTENT_TYPE))
}

/// The server's decoder of protobuf request bodies: a body that does not
/// decode is a `400 BadRequest` saying what failed.
#[derive(Debug)]
pub(crate) struct ProtobufBodies;

impl BodyDecoder for ProtobufBodies {
    fn decode(
        &self,
        def: &ResourceDef,
        content_type: &str,
        body: &[u8],
    ) -> Option<Result<Value, ApiError>> {
        if !is_protobuf(content_type) {
            return None;
        }
        Some(match decode(body) {
            Ok(v) if v.is_object() => Ok(v),
            Ok(_) => Err(ApiError::bad_request(format!(
                "the protobuf body of this {} request is not an object",
                def.kind
            ))),
            Err(e) => Err(ApiError::bad_request(format!(
                "the protobuf body of this {} request could not be decoded: {e}",
                def.kind
            ))),
        })
    }
}
