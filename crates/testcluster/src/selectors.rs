//! Label and field selectors, parsed from their query-string form.

use serde_json::Value;

use crate::status::ApiError;
use crate::store::Stored;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (Op::Eq(want), Some(v)) => want == v,
            (Op::Eq(_), None) => false,
            (Op::NotEq(want), v) => v != Some(want.as_str()),
            (Op::In(set), Some(v)) => set.iter().any(|s| s == v),
            (Op::In(_), None) => false,
            (Op::NotIn(set), v) => v.is_none_or(|v| !set.iter().any(|s| s == v)),
            (Op::Exists, v) => v.is_some(),
            (Op::DoesNotExist, v) => v.is_none(),
        }
    }
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

/// Split at commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn parse_set(rest: &str, selector: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| invalid_selector(selector, "expected a parenthesised set of values"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn invalid_selector(selector: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement in selector \"{selector}\": {why}"
    ))
}

fn check_key(key: &str, selector: &str) -> Result<String, ApiError> {
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(invalid_selector(selector, "invalid key"));
    }
    Ok(key.to_string())
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub(crate) fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(selector) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement {
                    key: check_key(key, selector)?,
                    op: Op::DoesNotExist,
                }
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement {
                    key: check_key(k, selector)?,
                    op: Op::NotEq(v.trim().to_string()),
                }
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement {
                    key: check_key(k, selector)?,
                    op: Op::Eq(v.trim().to_string()),
                }
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement {
                    key: check_key(k, selector)?,
                    op: Op::Eq(v.trim().to_string()),
                }
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Requirement {
                    key: check_key(k, selector)?,
                    op: Op::NotIn(parse_set(rest, selector)?),
                }
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Requirement {
                    key: check_key(k, selector)?,
                    op: Op::In(parse_set(rest, selector)?),
                }
            } else {
                Requirement {
                    key: check_key(part, selector)?,
                    op: Op::Exists,
                }
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Build from a structured `LabelSelector` object
    /// (`matchLabels` / `matchExpressions`).
    pub(crate) fn from_object(obj: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if let Some(labels) = obj.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                let v = v.as_str().ok_or("matchLabels values must be strings")?;
                reqs.push(Requirement {
                    key: k.clone(),
                    op: Op::Eq(v.to_string()),
                });
            }
        }
        if let Some(exprs) = obj.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or("matchExpressions key is required")?
                    .to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                let op = match e.get("operator").and_then(Value::as_str) {
                    Some("In") if !values.is_empty() => Op::In(values),
                    Some("NotIn") if !values.is_empty() => Op::NotIn(values),
                    Some("Exists") if values.is_empty() => Op::Exists,
                    Some("DoesNotExist") if values.is_empty() => Op::DoesNotExist,
                    _ => return Err("invalid matchExpressions operator or values".into()),
                };
                reqs.push(Requirement { key, op });
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the selector has no requirements (matches everything).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `labels` (a JSON object or null) satisfies every requirement.
    pub(crate) fn matches(&self, labels: Option<&Value>) -> bool {
        self.0.iter().all(|r| {
            let v = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            r.matches(v)
        })
    }

    /// Whether the selector matches the labels of a stored object.
    pub(crate) fn matches_stored(&self, object: &Stored) -> bool {
        self.0
            .iter()
            .all(|r| r.matches(object.summary.label(&r.key)))
    }
}

/// A parsed field selector over dotted field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    /// Parse `metadata.name=x,status.phase!=Running`.
    pub(crate) fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in selector.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector \"{selector}\": expected key=value or key!=value"
                )));
            };
            let path = field.trim().split('.').map(str::to_string).collect();
            reqs.push((path, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether a stored object satisfies every requirement; a missing
    /// field reads as the empty string (so `spec.nodeName=` selects
    /// unscheduled pods). The object is parsed only for a field its
    /// summary does not keep.
    pub(crate) fn matches_stored(&self, object: &Stored) -> bool {
        let mut parsed = None;
        self.0.iter().all(|(path, equal, want)| {
            let hit = match object.summary.field(path) {
                Some(got) => got == want,
                None => read_field(parsed.get_or_insert_with(|| object.value()), path) == *want,
            };
            hit == *equal
        })
    }

    /// Rewrite every field path with `f` (a view's paths to the stored
    /// form's).
    pub(crate) fn map_paths(&mut self, f: impl Fn(&[String]) -> Vec<String>) {
        for (path, _, _) in &mut self.0 {
            *path = f(path);
        }
    }

    /// Whether `object` satisfies every requirement.
    #[cfg(test)]
    pub(crate) fn matches_object(&self, object: &Value) -> bool {
        self.0
            .iter()
            .all(|(path, equal, want)| (read_field(object, path) == *want) == *equal)
    }
}

/// A field's value as a field selector compares it.
fn read_field(object: &Value, path: &[String]) -> String {
    let mut cur = Some(object);
    for seg in path {
        cur = cur.and_then(|c| c.get(seg));
    }
    match cur {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let labels = json!({"app": "web", "tier": "front"});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&labels));
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("app in (web, db),tier notin (back)"));
        assert!(!m("app notin (web)"));
        assert!(m("!missing"));
        assert!(!m("!app"));
        assert!(m("missing!=x"));
        assert!(!m("missing in (x)"));
        assert!(m(""));
    }

    #[test]
    fn field_selector_missing_is_empty() {
        let pod = json!({"metadata": {"name": "a"}, "spec": {}});
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .matches_object(&pod)
        );
        assert!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .matches_object(&pod)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .unwrap()
                .matches_object(&pod)
        );
    }

    #[test]
    fn stored_objects_match_as_their_json_does() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web"}},
                         "spec": {"nodeName": "n1", "restartPolicy": "Never", "priority": 5},
                         "status": {"phase": "Running"}});
        let stored = Stored::new(&pod, 7, Default::default());
        for sel in [
            "spec.nodeName=n1",
            "spec.nodeName!=n1",
            "spec.nodeName=",
            "status.phase=Running",
            "metadata.namespace=ns,metadata.name=a",
            "metadata.name=b",
            "spec.restartPolicy=Never",
            "spec.restartPolicy!=Never,status.phase=Running",
            "spec.priority=5",
            "spec.missing=",
        ] {
            let f = FieldSelector::parse(sel).unwrap();
            assert_eq!(f.matches_stored(&stored), f.matches_object(&pod), "{sel}");
        }
        let labels = pod.pointer("/metadata/labels");
        for sel in [
            "app=web",
            "app!=web",
            "app in (x,web)",
            "!app",
            "tier",
            "tier!=x",
            "",
        ] {
            let l = LabelSelector::parse(sel).unwrap();
            assert_eq!(l.matches_stored(&stored), l.matches(labels), "{sel}");
        }
    }
}
