//! Label and field selectors, parsed from their query-string form.

use serde_json::Value;

use crate::crd::field::{BadValue, FieldError, aggregate_message};
use crate::crd::names;
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
    /// `key>n`: the label's value is an integer greater than n.
    Gt(i64),
    /// `key<n`: the label's value is an integer less than n.
    Lt(i64),
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
            (Op::In(set), Some(v)) => contains(set, v),
            (Op::In(_), None) => false,
            (Op::NotIn(set), v) => v.is_none_or(|v| !contains(set, v)),
            (Op::Exists, v) => v.is_some(),
            (Op::DoesNotExist, v) => v.is_none(),
            (Op::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *n),
            (Op::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *n),
            (Op::Gt(_) | Op::Lt(_), None) => false,
        }
    }
}

/// A requirement's values, sorted without repeats (as upstream's
/// `sets.String`), so a long `in`/`notin` list is searched, not scanned: a
/// sharded controller's child watch sends up to 1,024 values.
fn value_set(mut values: Vec<String>) -> Vec<String> {
    values.sort_unstable();
    values.dedup();
    values
}

/// Whether the sorted `set` holds `value`.
fn contains(set: &[String], value: &str) -> bool {
    set.binary_search_by(|s| s.as_str().cmp(value)).is_ok()
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

/// The tokens of apimachinery's label selector lexer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn special_token(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The selector's tokens with their text, ending with [`Token::End`]. As
/// apimachinery's lexer: a run of special characters yields its longest
/// leading operator (`!!=` is `!` then `!=`), anything else up to a
/// special character or a blank is an identifier (or `in`, `notin`).
fn lex(s: &str) -> Vec<(Token, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            out.push((Token::End, ""));
            return out;
        }
        let start = i;
        if is_special(b[i]) {
            // Every single special character is an operator, so a token
            // is always found; a second character extends it if it can.
            let two = s.get(start..start + 2).and_then(special_token);
            let (tok, len) = match two {
                Some(t) => (t, 2),
                None => (special_token(&s[start..start + 1]).unwrap_or(Token::End), 1),
            };
            i += len;
            out.push((tok, &s[start..i]));
        } else {
            while i < b.len() && !is_special(b[i]) && !is_space(b[i]) {
                i += 1;
            }
            let text = &s[start..i];
            let tok = match text {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            };
            out.push((tok, text));
        }
    }
}

/// Where the parser is: `in` and `notin` are values where a value is
/// expected (`x in (in)`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// apimachinery's recursive-descent label selector parser
/// (`labels.Parse`), with its error messages.
struct Parser<'a> {
    tokens: Vec<(Token, &'a str)>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn lookahead(&self, ctx: Context) -> (Token, &'a str) {
        let (tok, lit) = self
            .tokens
            .get(self.pos)
            .copied()
            .unwrap_or((Token::End, ""));
        match tok {
            Token::In | Token::NotIn if ctx == Context::Values => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Context) -> (Token, &'a str) {
        let next = self.lookahead(ctx);
        self.pos += 1;
        next
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::End => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::End => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, unary) = self.key_and_inferred_operator()?;
        if let Some(op) = unary {
            return Ok(Requirement { key, op });
        }
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        let values = match tok {
            Token::In | Token::NotIn => self.values()?,
            Token::Equals
            | Token::DoubleEquals
            | Token::NotEquals
            | Token::GreaterThan
            | Token::LessThan => vec![self.exact_value()?],
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        // NewRequirement's checks of the values.
        let mut errs = Vec::new();
        let mut number = None;
        if matches!(tok, Token::GreaterThan | Token::LessThan) {
            for (i, v) in values.iter().enumerate() {
                match v.parse::<i64>() {
                    Ok(n) => number = Some(n),
                    Err(_) => errs.push(FieldError::invalid(
                        format!("values[{i}]"),
                        BadValue::str(v.as_str()),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )),
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let problems = names::label_value(v);
            if !problems.is_empty() {
                errs.push(FieldError::invalid(
                    format!("values[{i}][{key}]"),
                    BadValue::str(v.as_str()),
                    problems.join("; "),
                ));
            }
        }
        if let Some(message) = aggregate_message(&errs) {
            return Err(message);
        }
        let op = match (tok, number) {
            (Token::In, _) => Op::In(value_set(values)),
            (Token::NotIn, _) => Op::NotIn(value_set(values)),
            (Token::NotEquals, _) => Op::NotEq(values.into_iter().next().unwrap_or_default()),
            (Token::GreaterThan, Some(n)) => Op::Gt(n),
            (Token::LessThan, Some(n)) => Op::Lt(n),
            _ => Op::Eq(values.into_iter().next().unwrap_or_default()),
        };
        Ok(Requirement { key, op })
    }

    /// The key, and `Exists`/`DoesNotExist` when no binary operator follows.
    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let (mut tok, mut lit) = self.consume(Context::Values);
        let negated = tok == Token::DoesNotExist;
        if negated {
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let problems = names::qualified_name(lit);
        if !problems.is_empty() {
            return Err(
                FieldError::invalid("<nil>", BadValue::str(lit), problems.join("; ")).to_string(),
            );
        }
        let (next, _) = self.lookahead(Context::Values);
        let op = if negated {
            Some(Op::DoesNotExist)
        } else if matches!(next, Token::End | Token::Comma) {
            Some(Op::Exists)
        } else {
            None
        };
        Ok((lit.to_string(), op))
    }

    /// `(a,b,c)`; empty entries are the empty value.
    fn values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.identifiers()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut set: Vec<String> = Vec::new();
        // Repeats are dropped by `value_set`.
        let insert = |set: &mut Vec<String>, v: &str| set.push(v.to_string());
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    insert(&mut set, lit);
                    let (t2, l2) = self.lookahead(Context::Values);
                    match t2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        insert(&mut set, "");
                    }
                    let (t2, _) = self.lookahead(Context::Values);
                    if t2 == Token::ClosedPar {
                        insert(&mut set, "");
                        return Ok(set);
                    }
                    if t2 == Token::Comma {
                        insert(&mut set, "");
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<String, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if matches!(tok, Token::End | Token::Comma) {
            return Ok(String::new());
        }
        match self.consume(Context::Values) {
            (Token::Identifier, lit) => Ok(lit.to_string()),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

impl LabelSelector {
    /// Parse a selector as `labels.Parse` does: `a=b`, `a==b`, `a!=b`,
    /// `a in (b,c)`, `a notin (b)`, `a`, `!a`, `a>1`, `a<1`, separated by
    /// commas, keys and values checked like label keys and values. A
    /// malformed selector is a 400 with apimachinery's message.
    pub(crate) fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut parser = Parser {
            tokens: lex(selector),
            pos: 0,
        };
        parser
            .parse()
            .map(LabelSelector)
            .map_err(ApiError::bad_request)
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
                    Some("In") if !values.is_empty() => Op::In(value_set(values)),
                    Some("NotIn") if !values.is_empty() => Op::NotIn(value_set(values)),
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
    fn long_unsorted_value_lists_with_repeats() {
        // As a sharded member's child watch: every slot but its own.
        let others: Vec<String> = (0..1024)
            .rev()
            .filter(|s| s % 3 != 0)
            .map(|s: i32| s.to_string())
            .chain(["5".to_owned(), "1".to_owned()])
            .collect();
        let selector = LabelSelector::parse(&format!("slot notin ({})", others.join(","))).unwrap();
        let with = |v: &str| json!({"slot": v});
        assert!(selector.matches(Some(&with("3"))));
        assert!(selector.matches(Some(&with("1023"))));
        assert!(!selector.matches(Some(&with("5"))));
        assert!(!selector.matches(Some(&with("1"))));
        assert!(selector.matches(Some(&json!({"app": "web"}))), "no label");
        let within = LabelSelector::parse("slot in (9,3,6,3)").unwrap();
        assert!(within.matches(Some(&with("6"))));
        assert!(!within.matches(Some(&with("4"))));
    }

    #[test]
    fn malformed_selectors_get_apimachinerys_messages() {
        let err = |s: &str| LabelSelector::parse(s).unwrap_err();
        for (selector, message) in [
            ("a=b=c", "found '=', expected: ',' or 'end of string'"),
            (
                "app=(",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "a!!=b",
                "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt",
            ),
            ("a,", "found '', expected: identifier after ','"),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "=a",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            (
                "a>x",
                "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
        ] {
            let e = err(selector);
            assert_eq!(e.code, 400, "{selector}");
            assert_eq!(e.message, message, "{selector}");
        }
        assert_eq!(
            err("bad key=x").message,
            "unable to parse requirement: found 'key', expected: in, notin, =, ==, !=, gt, lt"
        );
        let e = err("k=v@1");
        assert!(e.message.starts_with("unable to parse requirement: values[0][k]: Invalid value: \"v@1\": a valid label must be"), "{}", e.message);
        let e = err(&format!("{}=v", "k".repeat(64)));
        assert!(
            e.message
                .starts_with("unable to parse requirement: <nil>: Invalid value:"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .ends_with("name part must be no more than 63 characters"),
            "{}",
            e.message
        );
    }

    #[test]
    fn well_formed_selectors_keep_working() {
        let labels = json!({"app": "web", "tier": "front", "n": "5", "in": "in"});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&labels));
        assert!(m("app in (web)  , n>4,n<6"));
        assert!(!m("n>5"));
        assert!(m("x notin ()"));
        assert!(m("in in (in)"), "in is a value where a value is expected");
        assert!(m("app in (web,,db)"));
        assert!(m("app=web,!missing,tier"));
        assert!(!m("missing="), "= needs the label, with the empty value");
        assert!(!m("app="));
        assert!(m("missing!="));
        assert!(m("app == web"));
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
