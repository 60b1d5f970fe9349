//! Request body decoding: JSON and YAML here; other media types (the
//! protobuf bodies kubectl sends for typed creates) through decoders
//! plugged in with [`Decoders::add`].
//!
//! As on kube-apiserver, a body is read as its `Content-Type` says: JSON
//! for `application/json` (and for no content type), YAML only for
//! `application/yaml`; anything else is `415 UnsupportedMediaType`. Every
//! parse is bounded: bodies are at most [`MAX_REQUEST_BODY_BYTES`], JSON
//! nesting stops at serde_json's 128 levels, and YAML is checked for
//! nesting before it is parsed (deeply nested flow collections cost the
//! YAML parser time quadratic in their depth).

use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// kube-apiserver's `MaxRequestBodyBytes` (3 MiB): the largest body of a
/// create, update, patch or delete it reads; larger ones are `413`.
pub(crate) const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The deepest nesting of arrays and objects a body may have:
/// serde_json's recursion limit, which the YAML check matches. Clients
/// built on serde_json (kube-rs) cannot decode deeper objects either.
pub(crate) const MAX_NESTING: usize = 128;

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

/// The media type of a `Content-Type` value, without parameters.
fn media_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

/// Whether a body of this content type is JSON (no content type reads as
/// JSON, as kube-apiserver reads it).
pub(crate) fn is_json(content_type: &str) -> bool {
    // No allocation: this runs on every create.
    let media = media_type(content_type);
    media.is_empty() || media.eq_ignore_ascii_case("application/json")
}

/// Whether a body of this content type is YAML: an object
/// (`application/yaml`) or a server-side apply configuration.
pub(crate) fn is_yaml(content_type: &str) -> bool {
    let media = media_type(content_type);
    media.eq_ignore_ascii_case("application/yaml")
        || media.eq_ignore_ascii_case("application/apply-patch+yaml")
}

/// kube-apiserver's `summarizeData`: the start of a body for a message.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let head = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// The 400 for a body that does not decode, worded as kube-apiserver's
/// `transformDecodeError` words it when the kind is unknown.
fn unrecognized(body: &[u8], why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "the object provided is unrecognized ({}): {why}",
        summarize(body)
    ))
}

/// A JSON value; what is wrong if it is not one, naming the nesting limit
/// when that is what was hit.
pub(crate) fn parse_json_value(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| {
        let text = e.to_string();
        if text.starts_with("recursion limit exceeded") {
            format!("the JSON is nested more than {MAX_NESTING} levels deep ({text})")
        } else {
            text
        }
    })
}

/// The nesting depth of a JSON value (a scalar is 0, `[]` is 1).
pub(crate) fn nesting(v: &Value) -> usize {
    // Values here were parsed with serde_json's depth limit, or built
    // from such values, so the recursion is shallow.
    match v {
        Value::Array(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(nesting).max().unwrap_or(0),
        _ => 0,
    }
}

/// A JSON body that must be an object.
pub(crate) fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    let v = parse_json_value(body).map_err(|why| unrecognized(body, why))?;
    object(v)
}

fn object(v: Value) -> Result<Value, ApiError> {
    if !v.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(v)
}

/// The nesting depth of a YAML document, estimated in one pass without
/// parsing it: each flow collection (`[`, `{` where a node starts)
/// counts a level, as does each block indentation step and each `- `
/// entry marker. Quoted scalars, comments and block scalars (`|`, `>`)
/// are skipped as YAML skips them; where this scan cannot tell (a line
/// that may continue a plain scalar), it counts brackets as structure,
/// erring towards too deep. Stops once `limit` is passed.
fn yaml_nesting(body: &[u8], limit: usize) -> usize {
    let mut deepest = 0;
    let mut flow = 0usize;
    // Indentation of the open block levels, innermost last.
    let mut indents: Vec<usize> = Vec::new();
    // Lines indented more than this belong to a block scalar.
    let mut block_scalar: Option<usize> = None;
    // The quote of the quoted scalar the scan is in.
    let mut quote: Option<u8> = None;
    // Whether a node may start here (a quote or bracket is structure).
    let mut token_start = true;
    // The indentation of the line a pending block plain scalar began on:
    // more indented lines continue it.
    let mut plain_indent: Option<usize> = None;
    for line in body.split(|&b| b == b'\n') {
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let rest = &line[indent..];
        let blank = rest.iter().all(u8::is_ascii_whitespace);
        if quote.is_none() && flow == 0 {
            if let Some(parent) = block_scalar {
                if blank || indent > parent {
                    continue;
                }
                block_scalar = None;
            }
            if blank || rest[0] == b'#' {
                continue;
            }
            token_start = plain_indent.is_none_or(|k| indent <= k);
            if token_start {
                plain_indent = None;
                while indents.last().is_some_and(|&i| i >= indent) {
                    indents.pop();
                }
                indents.push(indent);
            }
        }
        let mut markers = 0;
        let mut last_token = None;
        let mut prev = b' ';
        let mut i = 0;
        while i < rest.len() {
            let b = rest[i];
            let next_blank = rest
                .get(i + 1)
                .is_none_or(|n| matches!(n, b' ' | b'\t' | b'\r'));
            if let Some(q) = quote {
                if q == b'"' && b == b'\\' {
                    i += 1;
                } else if b == q {
                    // `''` inside a single-quoted scalar is an escaped quote.
                    if q == b'\'' && rest.get(i + 1) == Some(&b'\'') {
                        i += 1;
                    } else {
                        quote = None;
                        token_start = false;
                    }
                }
                prev = b;
                i += 1;
                continue;
            }
            match b {
                b' ' | b'\t' | b'\r' => {}
                b'#' if matches!(prev, b' ' | b'\t') => break,
                b'"' | b'\'' if token_start => quote = Some(b),
                b'[' | b'{' if token_start || flow > 0 => {
                    flow += 1;
                    token_start = true;
                    deepest = deepest.max(flow + indents.len() + markers);
                    if deepest > limit {
                        return deepest;
                    }
                }
                b']' | b'}' if flow > 0 => {
                    flow -= 1;
                    token_start = false;
                }
                b',' if flow > 0 => token_start = true,
                b':' if flow > 0 || next_blank => token_start = true,
                b'-' | b'?' if token_start && next_blank => {
                    if flow == 0 {
                        markers += 1;
                    }
                }
                _ => {
                    if token_start {
                        last_token = Some(i);
                        if flow == 0 && plain_indent.is_none() {
                            plain_indent = Some(indent);
                        }
                    }
                    token_start = false;
                }
            }
            prev = b;
            i += 1;
        }
        deepest = deepest.max(flow + indents.len() + markers);
        if deepest > limit {
            return deepest;
        }
        if quote.is_some() || flow > 0 {
            continue;
        }
        // A line ending in a block scalar indicator (`|`, `>-`, `|2`, ...)
        // starts a block scalar: its content is text, not structure.
        if let Some(start) = last_token {
            let token = rest[start..].split(|&b| b == b'#').next().unwrap_or(&[]);
            let token = token.trim_ascii_end();
            if matches!(token.first(), Some(b'|' | b'>'))
                && token[1..]
                    .iter()
                    .all(|b| matches!(b, b'-' | b'+') || b.is_ascii_digit())
            {
                block_scalar = Some(indent);
                plain_indent = None;
            }
        }
        // A `key:` or `-` at the end of a line leaves no plain scalar open.
        if token_start {
            plain_indent = None;
        }
    }
    deepest
}

/// A YAML body that must be an object, checked for nesting before it is
/// parsed.
pub(crate) fn parse_yaml(body: &[u8]) -> Result<Value, ApiError> {
    parse_yaml_value(body)
        .map_err(|why| unrecognized(body, why))
        .and_then(object)
}

/// A YAML value; what is wrong if it is not one.
pub(crate) fn parse_yaml_value(body: &[u8]) -> Result<Value, String> {
    if yaml_nesting(body, MAX_NESTING) > MAX_NESTING {
        return Err(format!(
            "error converting YAML to JSON: the YAML is nested more than {MAX_NESTING} levels deep"
        ));
    }
    serde_yaml::from_slice(body).map_err(|e| format!("error converting YAML to JSON: {e}"))
}

/// kube-apiserver's answer to a body of a media type it does not decode.
pub(crate) fn unsupported_media_type(content_type: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"
        ),
    )
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
        if is_json(content_type) {
            parse_json(body)
        } else if is_yaml(content_type) {
            parse_yaml(body)
        } else {
            Err(unsupported_media_type(content_type))
        }
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
        assert_eq!(d.decode(&def, "", br#"{"a":2}"#).unwrap()["a"], 2);
        assert_eq!(d.decode(&def, "application/yaml", b"a: 2").unwrap()["a"], 2);
        assert_eq!(
            d.decode(&def, "application/json", b"[1]").unwrap_err().code,
            400
        );
        assert_eq!(
            d.decode(&def, "application/x-test", b"abc")
                .unwrap_err()
                .code,
            415
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

    #[test]
    fn yaml_is_read_only_for_yaml_content_types() {
        let def = ResourceDef::new("", "v1", "configmaps", "configmap", "ConfigMap", true);
        let d = Decoders::default();
        for ct in ["", "application/json"] {
            let e = d.decode(&def, ct, b"metadata:\n  name: a\n").unwrap_err();
            assert_eq!(e.code, 400, "{ct:?}");
            assert!(
                e.message
                    .starts_with("the object provided is unrecognized (6d657461"),
                "{}",
                e.message
            );
        }
        let v = d
            .decode(
                &def,
                "application/yaml; charset=utf-8",
                b"metadata:\n  name: a\n",
            )
            .unwrap();
        assert_eq!(v["metadata"]["name"], "a");
    }

    #[test]
    fn nesting_is_refused_before_the_parsers_spend_time_on_it() {
        let deep_json = format!("{}{}", "[".repeat(50_000), "]".repeat(50_000));
        let e = parse_json(deep_json.as_bytes()).unwrap_err();
        assert!(
            e.message.contains("nested more than 128 levels deep"),
            "{}",
            e.message
        );
        let deep_flow = "{a: ".repeat(200_000);
        let e = parse_yaml(deep_flow.as_bytes()).unwrap_err();
        assert!(
            e.message.contains("nested more than 128 levels deep"),
            "{}",
            e.message
        );
        let deep_seq = "- ".repeat(200_000);
        assert!(parse_yaml(deep_seq.as_bytes()).is_err());
        let mut deep_block = String::new();
        for i in 0..200 {
            deep_block.push_str(&" ".repeat(i));
            deep_block.push_str("a:\n");
        }
        assert!(yaml_nesting(deep_block.as_bytes(), MAX_NESTING) > MAX_NESTING);
    }

    #[test]
    fn ordinary_yaml_is_not_mistaken_for_deep_nesting() {
        let brackets = "[".repeat(300);
        let yaml = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a # [[[[ a comment\n  labels: {{app: web, tier: [x]}}\ndata:\n  script: |\n    {brackets}\n    echo '[[['\n  quoted: \"{brackets}\"\n  single: '{brackets} '' {brackets}'\n  plain: a[b\n  list:\n  - - [1, [2, {{k: v}}]]\n"
        );
        assert!(
            yaml_nesting(yaml.as_bytes(), MAX_NESTING) < 10,
            "{}",
            yaml_nesting(yaml.as_bytes(), MAX_NESTING)
        );
        let v = parse_yaml(yaml.as_bytes()).unwrap();
        assert_eq!(v["data"]["quoted"], brackets.as_str());
        assert_eq!(v["metadata"]["labels"]["tier"][0], "x");
    }
}
