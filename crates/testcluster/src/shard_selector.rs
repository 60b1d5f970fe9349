//! KEP-5866 (Kubernetes 1.36, alpha): sharded list and watch. The
//! `shardSelector` parameter of a list or watch keeps only the objects
//! whose field hashes into one of its ranges:
//!
//! ```text
//! shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
//!   || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
//! ```
//!
//! The hash is the 64-bit FNV-1a of the field's value; a range keeps
//! `start <= hash < end`; bounds are `0x`-prefixed hex strings (the upper
//! bound may be `0x10000000000000000`, 2^64); the fields are
//! `object.metadata.uid` and `object.metadata.namespace`; terms are joined
//! by `||`. Anything else is refused with 400 Bad Request naming the
//! problem.

use std::collections::HashMap;

use crate::status::ApiError;
use crate::store::Stored;

/// The field a range hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Uid,
    Namespace,
}

/// One `shardRange(field, start, end)`: `start <= hash < end`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    field: Field,
    start: u128,
    end: u128,
}

/// A parsed `shardSelector`; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShardSelector(Vec<Range>);

/// The 64-bit FNV-1a hash of `value`'s bytes (Go's `hash/fnv.New64a`).
pub(crate) fn fnv1a_64(value: &str) -> u64 {
    value.bytes().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl ShardSelector {
    /// The request's `shardSelector` parameter, if any; ignored (select
    /// everything) when the feature gate is off (`enabled` false), as by a
    /// server that does not know the parameter.
    pub(crate) fn from_params(
        params: &HashMap<String, String>,
        enabled: bool,
    ) -> Result<Self, ApiError> {
        match params.get("shardSelector") {
            Some(expr) if enabled => Self::parse(expr),
            _ => Ok(Self::default()),
        }
    }

    /// Parses a selector; blank selects everything.
    pub(crate) fn parse(expr: &str) -> Result<Self, ApiError> {
        let invalid =
            |why: String| ApiError::bad_request(format!("invalid shardSelector {expr:?}: {why}"));
        if expr.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut ranges = Vec::new();
        for term in expr.split("||") {
            let term = term.trim();
            let args = term
                .strip_prefix("shardRange(")
                .and_then(|t| t.strip_suffix(')'))
                .ok_or_else(|| {
                    invalid(format!(
                        "{term:?} is not shardRange(<field>, '<hexStart>', '<hexEnd>'); \
                         terms are joined by ||"
                    ))
                })?;
            let args: Vec<&str> = args.split(',').map(str::trim).collect();
            let [field, start, end] = args[..] else {
                return Err(invalid(format!(
                    "shardRange takes 3 arguments, got {}",
                    args.len()
                )));
            };
            let field = match field {
                "object.metadata.uid" => Field::Uid,
                "object.metadata.namespace" => Field::Namespace,
                other => {
                    return Err(invalid(format!(
                        "unsupported field path {other:?}: use object.metadata.uid or \
                         object.metadata.namespace"
                    )));
                }
            };
            let start = bound(start).map_err(&invalid)?;
            let end = bound(end).map_err(&invalid)?;
            if start >= end {
                return Err(invalid(format!(
                    "the range start {start:#x} is not below its end {end:#x}"
                )));
            }
            if start > u128::from(u64::MAX) {
                return Err(invalid(format!(
                    "the range start {start:#x} is above 2^64-1"
                )));
            }
            ranges.push(Range { field, start, end });
        }
        Ok(Self(ranges))
    }

    /// Whether the selector filters at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a stored object falls in one of the ranges.
    pub(crate) fn matches_stored(&self, object: &Stored) -> bool {
        self.is_empty()
            || self.0.iter().any(|r| {
                let value = match r.field {
                    Field::Uid => &object.summary.uid,
                    Field::Namespace => &object.summary.namespace,
                };
                let h = u128::from(fnv1a_64(value));
                r.start <= h && h < r.end
            })
    }
}

/// A quoted `0x` hex bound, at most 2^64.
fn bound(arg: &str) -> Result<u128, String> {
    let quoted = (arg.len() >= 2)
        .then(|| {
            let (first, last) = (arg.as_bytes()[0], arg.as_bytes()[arg.len() - 1]);
            (first == last && (first == b'\'' || first == b'"')).then(|| &arg[1..arg.len() - 1])
        })
        .flatten()
        .ok_or_else(|| {
            format!("the bound {arg} must be a quoted string such as '0x8000000000000000'")
        })?;
    let digits = quoted
        .strip_prefix("0x")
        .filter(|d| !d.is_empty() && d.len() <= 17 && d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| format!("the bound {arg} is not 0x followed by at most 17 hex digits"))?;
    let value = u128::from_str_radix(digits, 16).map_err(|e| format!("the bound {arg}: {e}"))?;
    if value > 1u128 << 64 {
        return Err(format!(
            "the bound {arg} is above 2^64 (0x10000000000000000)"
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn stored(namespace: &str, uid: &str) -> Stored {
        let value = json!({"metadata": {"name": "x", "namespace": namespace, "uid": uid}});
        Stored::new(&value, 1, Arc::default())
    }

    #[test]
    fn the_hash_is_fnv1a_64() {
        assert_eq!(fnv1a_64(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn two_halves_split_every_object_exactly_once() {
        let low = ShardSelector::parse(
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        )
        .unwrap();
        let high = ShardSelector::parse(
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        )
        .unwrap();
        let mut counts = [0, 0];
        // UUID-like UIDs: FNV-1a mixes a key's early bytes into the top
        // bits, so keys differing only at the end would all land together.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for i in 0..200 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let uid = format!(
                "{:08x}-{:04x}-4{:03x}-{i}",
                x >> 32,
                (x >> 16) & 0xffff,
                x & 0xfff
            );
            let s = stored("ns", &uid);
            assert_ne!(low.matches_stored(&s), high.matches_stored(&s), "{uid}");
            counts[usize::from(high.matches_stored(&s))] += 1;
            let top = fnv1a_64(&uid) >> 63;
            assert_eq!(high.matches_stored(&s), top == 1);
        }
        assert!(counts[0] > 50 && counts[1] > 50, "{counts:?}");
    }

    #[test]
    fn ranges_are_ored_and_namespaces_can_be_hashed() {
        let h = fnv1a_64("team-a");
        let expr = format!(
            "shardRange(object.metadata.namespace, '0x{h:016x}', '0x{:016x}') || \
             shardRange(object.metadata.uid, \"0x0\", \"0x1\")",
            u128::from(h) + 1
        );
        let sel = ShardSelector::parse(&expr).unwrap();
        assert!(sel.matches_stored(&stored("team-a", "u")));
        assert!(!sel.matches_stored(&stored("team-b", "u")));
        assert!(ShardSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn bad_selectors_are_400s_that_say_why() {
        for (expr, says) in [
            (
                "range(object.metadata.uid, '0x0', '0x1')",
                "is not shardRange",
            ),
            ("shardRange(object.metadata.uid, '0x0')", "3 arguments"),
            (
                "shardRange(object.metadata.name, '0x0', '0x1')",
                "unsupported field path",
            ),
            (
                "shardRange(object.metadata.uid, 0x0, '0x1')",
                "quoted string",
            ),
            (
                "shardRange(object.metadata.uid, '12', '0x1')",
                "0x followed by",
            ),
            (
                "shardRange(object.metadata.uid, '0xzz', '0x1')",
                "0x followed by",
            ),
            (
                "shardRange(object.metadata.uid, '0x5', '0x5')",
                "not below its end",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",
                "above 2^64",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x1') ||",
                "is not shardRange",
            ),
        ] {
            let err = ShardSelector::parse(expr).unwrap_err();
            let status = err.to_status();
            assert_eq!(status["code"], 400, "{expr}");
            let message = status["message"].as_str().unwrap();
            assert!(message.contains(says), "{expr}: {message}");
        }
    }
}
