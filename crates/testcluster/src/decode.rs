//! Request body decoding: JSON and YAML here; other media types (the
//! protobuf bodies kubectl sends for typed creates) through decoders
//! plugged in with [`Decoders::add`].

use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// Decodes request bodies of some media types into JSON objects.
pub(crate) trait BodyDecoder: Send + Sync {
    /// The body as a JSON object, or `None` when this decoder does not
    /// handle `content_type` (the next one is asked).
    fn decode(
        &self,
        def: &ResourceDef,
        content_type: &str,
        body: &[u8],
    ) -> Option<Result<Value, ApiError>>;
}

/// Whether a body of this content type is JSON (or unlabelled, which the
/// server reads as JSON or YAML).
pub(crate) fn is_json(content_type: &str) -> bool {
    // No allocation: this runs on every create.
    let media = content_type.split(';').next().unwrap_or("").trim();
    media.is_empty() || media.eq_ignore_ascii_case("application/json")
}

/// A JSON or YAML body that must be an object.
pub(crate) fn parse_json_or_yaml(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .or_else(|_| serde_yaml::from_slice(body))
        .map_err(|e| {
            ApiError::bad_request(format!("the request body is not valid JSON or YAML: {e}"))
        })?;
    if !v.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(v)
}

/// The plugged-in decoders, asked in order before JSON/YAML.
#[derive(Default)]
pub(crate) struct Decoders {
    extra: RwLock<Vec<Arc<dyn BodyDecoder>>>,
}

impl std::fmt::Debug for Decoders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoders")
            .field("extra", &self.extra.read().len())
            .finish()
    }
}

impl Decoders {
    /// Ask `decoder` first from now on.
    pub(crate) fn add(&self, decoder: Arc<dyn BodyDecoder>) {
        self.extra.write().insert(0, decoder);
    }

    /// Decode `body` of `content_type` for `def`.
    pub(crate) fn decode(
        &self,
        def: &ResourceDef,
        content_type: &str,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        if !self.extra.read().is_empty() {
            let extra = self.extra.read().clone();
            for d in extra {
                if let Some(result) = d.decode(def, content_type, body) {
                    return result;
                }
            }
        }
        parse_json_or_yaml(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Upper;
    impl BodyDecoder for Upper {
        fn decode(
            &self,
            _: &ResourceDef,
            ct: &str,
            body: &[u8],
        ) -> Option<Result<Value, ApiError>> {
            ct.starts_with("application/x-test").then(|| {
                Ok(json!({"metadata": {"name": String::from_utf8_lossy(body).to_uppercase()}}))
            })
        }
    }

    #[test]
    fn plugged_decoders_take_their_media_types_first() {
        let def = ResourceDef::new("", "v1", "configmaps", "configmap", "ConfigMap", true);
        let d = Decoders::default();
        assert_eq!(
            d.decode(&def, "application/json", br#"{"a":1}"#).unwrap()["a"],
            1
        );
        assert_eq!(d.decode(&def, "", b"a: 2").unwrap()["a"], 2);
        assert_eq!(
            d.decode(&def, "application/json", b"[1]").unwrap_err().code,
            400
        );
        assert_eq!(
            d.decode(&def, "application/x-test", b"abc")
                .unwrap_err()
                .code,
            400
        );
        d.add(Arc::new(Upper));
        let v = d
            .decode(&def, "application/x-test; charset=utf-8", b"abc")
            .unwrap();
        assert_eq!(v["metadata"]["name"], "ABC");
        assert!(
            is_json("application/json;charset=utf-8")
                && !is_json("application/vnd.kubernetes.protobuf")
        );
    }
}
