//! client-go's JSONPath templates (`k8s.io/client-go/util/jsonpath`), the
//! language kube-apiserver evaluates a CRD's `additionalPrinterColumns`
//! with: `{.spec.replicas}`, `{.items[*].name}`, `{.list[-1]}`,
//! `{.status.conditions[?(@.type=="Ready")].status}`, `{..name}`,
//! `{['a','b']}`, unions, slices with steps, text between actions.
//!
//! [`JsonPath::parse`] follows client-go's parser token by token, so it
//! accepts and rejects the same templates; [`JsonPath::find_results`]
//! follows its evaluator with missing keys allowed (as the table
//! convertor sets them), returning one list of values per template node;
//! [`print_value`] prints a value as `PrintResults` does.
//!
//! Deviations, all on inputs no column uses: `range`/`end` blocks are
//! rejected at evaluation (client-go runs them as loops); maps are walked
//! by wildcards and `..` in key order (Go's order is random); `\x`/octal
//! escapes that do not form UTF-8 are replaced by U+FFFD; nesting of
//! filters and unions deeper than 64 levels is a parse error.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::Value;

use super::field::go_float;

/// How deeply filters, unions and quoted keys may nest. The grammar leaves
/// little room for nesting; client-go has no limit, this guard keeps
/// hostile input from exhausting the stack.
const MAX_NESTING: usize = 64;

/// Why a template does not parse or evaluate; the messages are
/// client-go's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JsonPathError {
    /// An action without its closing `}`.
    #[error("unclosed action")]
    UnclosedAction,
    /// A character that cannot start a token.
    #[error("unrecognized character in action: {}", go_char(*.0))]
    UnrecognizedCharacter(char),
    /// `[` without `]`.
    #[error("unterminated array")]
    UnterminatedArray,
    /// An index or slice that is not `[n]`, `[a:b:c]`, `['key']` or a union.
    #[error("invalid array index {0}")]
    InvalidArrayIndex(String),
    /// A slice bound that is not a number.
    #[error("array index {0} is not a number")]
    IndexNotANumber(String),
    /// `[?(` without `)`.
    #[error("unterminated filter")]
    UnterminatedFilter,
    /// A filter's `)` not followed by `]`.
    #[error("unclosed array expect ]")]
    UnclosedFilter,
    /// A quote without its closing quote.
    #[error("unterminated quoted string")]
    UnterminatedQuote,
    /// A quoted string with an invalid escape.
    #[error("unquote string {0} error invalid syntax")]
    InvalidQuote(String),
    /// A number literal that is neither an integer nor a float.
    #[error("cannot parse number {0}")]
    InvalidNumber(String),
    /// `....`.
    #[error("invalid multiple recursive descent")]
    MultipleRecursiveDescent,
    /// Filters or unions nested more than 64 deep.
    #[error("filters and unions nested more than {MAX_NESTING} deep")]
    TooDeep,
    /// Indexing or slicing a value that is not a list.
    #[error("{0} is not array or slice")]
    NotAList(String),
    /// Filtering a value that is not a list.
    #[error("{0} is not array or slice and cannot be filtered")]
    NotFilterable(String),
    /// An index outside the list.
    #[error("array index out of bounds: index {index}, length {length}")]
    OutOfBounds {
        /// The index asked for.
        index: i64,
        /// The list's length.
        length: usize,
    },
    /// A slice whose start is after its end.
    #[error("starting index {start} is greater than ending index {end}")]
    StartAfterEnd {
        /// Slice start.
        start: i64,
        /// Slice end.
        end: i64,
    },
    /// A slice step of zero or less.
    #[error("step must be > 0")]
    BadStep,
    /// A filter side that yields several values.
    #[error("can only compare one element at a time")]
    CompareOne,
    /// Comparing values of different types.
    #[error("incompatible types for comparison")]
    IncompatibleTypes,
    /// Comparing values that have no order (objects, lists, null; booleans
    /// with `<`).
    #[error("invalid type for comparison")]
    InvalidComparisonType,
    /// A filter operator other than `==`, `!=`, `<`, `<=`, `>`, `>=`.
    #[error("unrecognized filter operator {0}")]
    UnknownOperator(String),
    /// A bare word in an action (client-go knows only `range` and `end`,
    /// which this evaluator does not run).
    #[error("unrecognized identifier {0}")]
    UnknownIdentifier(String),
}

/// Go's `%#U` of a rune: `U+0028 '('`.
fn go_char(c: char) -> String {
    if c.is_control() {
        format!("U+{:04X}", c as u32)
    } else {
        format!("U+{:04X} '{c}'", c as u32)
    }
}

/// One slice bound (client-go's `ParamsEntry`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Param {
    value: i64,
    known: bool,
    /// The end bound derived from a bare index (`[i]` is `[i:i+1]`).
    derived: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Field(String),
    Array([Param; 3]),
    Filter(Box<Filter>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    Identifier(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Vec<Node>,
    right: Vec<Node>,
    operator: String,
}

/// A top-level piece of a template: text outside `{}` or an action.
#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Text(String),
    Action(Vec<Node>),
}

/// A parsed JSONPath template, e.g. `{.spec.replicas}`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    segments: Vec<Segment>,
}

impl JsonPath {
    /// Parses a template as client-go's `JSONPath.Parse` does. A CRD
    /// column's `jsonPath` is parsed as `{<jsonPath>}`.
    pub fn parse(template: &str) -> Result<Self, JsonPathError> {
        Ok(Self {
            segments: parse_template(template, 0)?,
        })
    }

    /// Evaluates the template against `data` as client-go's `FindResults`
    /// does with missing keys allowed: one list of values per top-level
    /// node (text outside `{}` yields itself).
    pub fn find_results<'a>(
        &self,
        data: &'a Value,
    ) -> Result<Vec<Vec<Cow<'a, Value>>>, JsonPathError> {
        self.segments
            .iter()
            .map(|segment| match segment {
                Segment::Text(text) => Ok(vec![Cow::Owned(Value::String(text.clone()))]),
                Segment::Action(nodes) => eval_list(vec![Cow::Borrowed(data)], nodes),
            })
            .collect()
    }
}

// ---------------------------------------------------------------- parsing

fn parse_template(text: &str, depth: usize) -> Result<Vec<Segment>, JsonPathError> {
    if depth > MAX_NESTING {
        return Err(JsonPathError::TooDeep);
    }
    let mut p = Parser {
        input: text,
        pos: 0,
        start: 0,
        width: 0,
        depth,
    };
    let mut segments = Vec::new();
    loop {
        // Text up to the next `{`.
        loop {
            if p.rest().starts_with('{') {
                if p.pos > p.start {
                    segments.push(Segment::Text(p.consume().to_string()));
                }
                p.pos += 1;
                p.consume();
                break;
            }
            if p.next().is_none() {
                if p.pos > p.start {
                    segments.push(Segment::Text(p.consume().to_string()));
                }
                return Ok(segments);
            }
        }
        let mut nodes = Vec::new();
        p.inside_action(&mut nodes)?;
        segments.push(Segment::Action(nodes));
    }
}

/// client-go's `parseAction`: the nodes of `{text}`.
fn parse_action(text: &str, depth: usize) -> Result<Vec<Node>, JsonPathError> {
    let segments = parse_template(&format!("{{{text}}}"), depth + 1)?;
    Ok(match segments.into_iter().next() {
        Some(Segment::Action(nodes)) => nodes,
        _ => Vec::new(),
    })
}

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    width: usize,
    depth: usize,
}

fn is_terminator(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => matches!(
            c,
            ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
        ),
    }
}

/// Go's `unicode.IsDigit` (approximated by Rust's numeric class for
/// characters beyond ASCII).
fn is_digit(c: char) -> bool {
    c.is_ascii_digit() || (!c.is_ascii() && c.is_numeric())
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || is_digit(c)
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn consume(&mut self) -> &'a str {
        let value = &self.input[self.start..self.pos];
        self.start = self.pos;
        value
    }

    fn next(&mut self) -> Option<char> {
        match self.rest().chars().next() {
            Some(c) => {
                self.width = c.len_utf8();
                self.pos += self.width;
                Some(c)
            }
            None => {
                self.width = 0;
                None
            }
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.rest().chars().next()
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    /// The byte two before the current position (client-go's escape test
    /// `input[pos-2] != '\\'`).
    fn escaped(&self) -> bool {
        self.pos >= 2 && self.input.as_bytes().get(self.pos - 2) == Some(&b'\\')
    }

    /// client-go's `parseInsideAction`, as a loop: returns after the
    /// closing `}`.
    fn inside_action(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        loop {
            let rest = self.rest();
            if rest.starts_with('}') {
                self.pos += 1;
                self.consume();
                return Ok(());
            }
            if rest.starts_with("[?(") {
                self.filter(cur)?;
                continue;
            }
            if rest.starts_with("..") {
                self.recursive(cur)?;
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return Err(JsonPathError::UnclosedAction),
                Some(' ' | '@' | '$') => {
                    self.consume();
                }
                Some('[') => self.array(cur)?,
                Some(quote @ ('"' | '\'')) => self.quote(cur, quote)?,
                Some('.') => self.field(cur),
                Some(c) if c == '+' || c == '-' || is_digit(c) => {
                    self.backup();
                    self.number(cur)?;
                }
                Some(c) if is_alphanumeric(c) => {
                    self.backup();
                    self.identifier(cur);
                }
                Some(c) => return Err(JsonPathError::UnrecognizedCharacter(c)),
            }
        }
    }

    fn identifier(&mut self, cur: &mut Vec<Node>) {
        loop {
            let c = self.next();
            if is_terminator(c) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        cur.push(match value {
            "true" => Node::Bool(true),
            "false" => Node::Bool(false),
            other => Node::Identifier(other.to_string()),
        });
    }

    fn recursive(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        if cur.last() == Some(&Node::Recursive) {
            return Err(JsonPathError::MultipleRecursiveDescent);
        }
        self.pos += 2;
        self.consume();
        cur.push(Node::Recursive);
        if self.peek().is_some_and(is_alphanumeric) {
            self.field(cur);
        }
        Ok(())
    }

    fn number(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        loop {
            match self.next() {
                Some(c) if c == '.' || is_digit(c) => {}
                _ => {
                    self.backup();
                    break;
                }
            }
        }
        let value = self.consume();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
        } else if let Ok(f) = value.parse::<f64>() {
            cur.push(Node::Float(f));
        } else {
            return Err(JsonPathError::InvalidNumber(value.to_string()));
        }
        Ok(())
    }

    fn array(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        loop {
            match self.next() {
                None | Some('\n') => return Err(JsonPathError::UnterminatedArray),
                Some(']') => break,
                _ => {}
            }
        }
        let raw = self.consume();
        let mut text = raw
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .ok_or_else(|| JsonPathError::InvalidArrayIndex(raw.to_string()))?;
        if text == "*" {
            text = ":";
        }
        // Union: `[a,b]`.
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            let lists = parts
                .iter()
                .map(|part| parse_action(&format!("[{}]", part.trim_matches(' ')), self.depth))
                .collect::<Result<Vec<_>, _>>()?;
            cur.push(Node::Union(lists));
            return Ok(());
        }
        // Quoted key: `['a.b']` is `.a.b` (client-go parses the key as a path).
        if text.len() >= 2
            && text.starts_with('\'')
            && text.ends_with('\'')
            && !text[1..text.len() - 1].contains('\'')
        {
            cur.extend(parse_action(
                &format!(".{}", &text[1..text.len() - 1]),
                self.depth,
            )?);
            return Ok(());
        }
        cur.push(Node::Array(slice_params(text)?));
        Ok(())
    }

    fn filter(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        self.pos += 3;
        self.consume();
        let (mut begin, mut end, mut pair) = (false, false, '\0');
        loop {
            match self.next() {
                None | Some('\n') => return Err(JsonPathError::UnterminatedFilter),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if !self.escaped() && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                _ => {}
            }
        }
        if self.next() != Some(']') {
            return Err(JsonPathError::UnclosedFilter);
        }
        let raw = self.consume();
        let text = &raw[..raw.len() - 2];
        let filter = match split_comparison(text) {
            None => Filter {
                left: parse_action(text, self.depth)?,
                right: Vec::new(),
                operator: "exists".to_string(),
            },
            Some((left, operator, right)) => Filter {
                left: parse_action(left, self.depth)?,
                right: parse_action(right, self.depth)?,
                operator: operator.to_string(),
            },
        };
        cur.push(Node::Filter(Box::new(filter)));
        Ok(())
    }

    fn quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), JsonPathError> {
        loop {
            match self.next() {
                None | Some('\n') => return Err(JsonPathError::UnterminatedQuote),
                Some(c) if c == end && !self.escaped() => break,
                _ => {}
            }
        }
        let value = self.consume();
        let text = unquote(value).ok_or_else(|| JsonPathError::InvalidQuote(value.to_string()))?;
        cur.push(Node::Text(text));
        Ok(())
    }

    fn field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            match self.next() {
                Some('\\') => {
                    self.next();
                }
                c if is_terminator(c) => {
                    self.backup();
                    break;
                }
                _ => {}
            }
        }
        let value = self.consume();
        cur.push(if value == "*" {
            Node::Wildcard
        } else {
            Node::Field(value.replace('\\', ""))
        });
    }
}

/// client-go's filter regex `^([^!<>=]+)([!<>=]+)(.+?)$`.
fn split_comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let op_start = text.find(is_op)?;
    if op_start == 0 {
        return None;
    }
    let after = &text[op_start..];
    let op_len = after.find(|c: char| !is_op(c)).unwrap_or(after.len());
    // The right side needs at least one character; it takes the last
    // operator character when nothing else is left.
    let op_len = if op_len == after.len() {
        if op_len < 2 {
            return None;
        }
        op_len - 1
    } else {
        op_len
    };
    let right = &after[op_len..];
    if right.is_empty() || right.contains('\n') {
        return None;
    }
    Some((&text[..op_start], &after[..op_len], right))
}

/// client-go's slice regex `^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$` and the
/// bounds derived from it.
fn slice_params(text: &str) -> Result<[Param; 3], JsonPathError> {
    let pieces: Vec<&str> = text.split(':').collect();
    let well_formed = |p: &str| {
        let digits = p.strip_prefix('-').unwrap_or(p);
        digits.bytes().all(|b| b.is_ascii_digit())
    };
    if pieces.len() > 3 || !pieces.iter().all(|p| well_formed(p)) {
        return Err(JsonPathError::InvalidArrayIndex(text.to_string()));
    }
    let mut params = [Param::default(); 3];
    for i in 0..3 {
        // The regex group, with its `:` for the second and third.
        match pieces.get(i) {
            Some(piece) if i == 0 && piece.is_empty() => {}
            Some(piece) if i > 0 && piece.is_empty() => params[i].known = false,
            Some(piece) => {
                params[i].known = true;
                params[i].value = piece
                    .parse::<i64>()
                    .map_err(|_| JsonPathError::IndexNotANumber((*piece).to_string()))?;
            }
            None if i == 1 => {
                params[1] = Param {
                    value: params[0].value.wrapping_add(1),
                    known: true,
                    derived: true,
                };
            }
            None => {}
        }
    }
    Ok(params)
}

/// client-go's `UnquoteExtend`: Go's `strconv.Unquote` for `"…"` and `'…'`.
fn unquote(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    if bytes.len() < 2 {
        return None;
    }
    let quote = bytes[0];
    if (quote != b'"' && quote != b'\'') || bytes[bytes.len() - 1] != quote {
        return None;
    }
    let inner = &s[1..s.len() - 1];
    if !inner.contains('\\') && !inner.contains(quote as char) {
        return Some(inner.to_string());
    }
    let mut out = Vec::with_capacity(inner.len());
    let mut rest = inner;
    while !rest.is_empty() {
        rest = unquote_char(rest, quote, &mut out)?;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `strconv.UnquoteChar`: decodes one (possibly escaped) character of
/// `s` into `out`, returning the rest.
fn unquote_char<'a>(s: &'a str, quote: u8, out: &mut Vec<u8>) -> Option<&'a str> {
    let first = s.as_bytes()[0];
    if first == quote {
        return None;
    }
    if first != b'\\' {
        let c = s.chars().next()?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        return Some(&s[c.len_utf8()..]);
    }
    let escape = *s.as_bytes().get(1)?;
    if !escape.is_ascii() {
        return None;
    }
    let rest = &s[2..];
    let simple = match escape {
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(0x0b),
        b'\\' => Some(b'\\'),
        b'\'' | b'"' if escape == quote => Some(escape),
        _ => None,
    };
    if let Some(b) = simple {
        out.push(b);
        return Some(rest);
    }
    match escape {
        b'x' | b'u' | b'U' => {
            let n = match escape {
                b'x' => 2,
                b'u' => 4,
                _ => 8,
            };
            let hex = rest.get(..n)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let v = u32::from_str_radix(hex, 16).ok()?;
            if escape == b'x' {
                out.push(u8::try_from(v).ok()?);
            } else {
                let c = char::from_u32(v)?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            Some(&rest[n..])
        }
        b'0'..=b'7' => {
            let digits = rest.get(..2)?;
            let mut v = u32::from(escape - b'0');
            for d in digits.bytes() {
                if !(b'0'..=b'7').contains(&d) {
                    return None;
                }
                v = (v << 3) | u32::from(d - b'0');
            }
            out.push(u8::try_from(v).ok()?);
            Some(&rest[2..])
        }
        _ => None,
    }
}

// ------------------------------------------------------------- evaluation

type Values<'a> = Vec<Cow<'a, Value>>;

/// A child of `v` chosen by `pick`, borrowed when `v` is.
fn child<'a>(
    v: &Cow<'a, Value>,
    pick: impl Fn(&Value) -> Option<&Value>,
) -> Option<Cow<'a, Value>> {
    match v {
        Cow::Borrowed(b) => pick(b).map(Cow::Borrowed),
        Cow::Owned(o) => pick(o).cloned().map(Cow::Owned),
    }
}

/// The elements a wildcard or `..` walks: an object's values (in key
/// order), a list's items, a string's bytes (as Go indexes strings).
fn children<'a>(v: &Cow<'a, Value>) -> Values<'a> {
    match v {
        Cow::Borrowed(Value::Object(m)) => m.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(a)) => a.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(m)) => m.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(a)) => a.iter().cloned().map(Cow::Owned).collect(),
        Cow::Borrowed(Value::String(s)) => string_bytes(s),
        Cow::Owned(Value::String(s)) => string_bytes(s),
        _ => Vec::new(),
    }
}

fn string_bytes<'a>(s: &str) -> Values<'a> {
    s.bytes().map(|b| Cow::Owned(Value::from(b))).collect()
}

/// Go's type name of a decoded JSON value, for error messages.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn eval_list<'a>(input: Values<'a>, nodes: &[Node]) -> Result<Values<'a>, JsonPathError> {
    let mut cur = input;
    for node in nodes {
        cur = walk(cur, node)?;
    }
    Ok(cur)
}

fn walk<'a>(input: Values<'a>, node: &Node) -> Result<Values<'a>, JsonPathError> {
    match node {
        Node::Text(text) => Ok(vec![Cow::Owned(Value::String(text.clone()))]),
        Node::Int(i) => Ok(vec![Cow::Owned(Value::from(*i)); input.len()]),
        Node::Float(f) => Ok(vec![Cow::Owned(Value::from(*f)); input.len()]),
        Node::Bool(b) => Ok(vec![Cow::Owned(Value::Bool(*b)); input.len()]),
        Node::Field(name) => Ok(input
            .iter()
            .filter_map(|v| child(v, |v| v.as_object()?.get(name)))
            .collect()),
        Node::Wildcard => Ok(input.iter().flat_map(children).collect()),
        Node::Recursive => Ok(recursive(input)),
        Node::Array(params) => eval_array(input, params),
        Node::Filter(filter) => eval_filter(input, filter),
        Node::Union(lists) => {
            let mut out = Vec::new();
            for list in lists {
                out.extend(eval_list(input.clone(), list)?);
            }
            Ok(out)
        }
        Node::Identifier(name) => Err(JsonPathError::UnknownIdentifier(name.clone())),
    }
}

/// Every container under (and including) each input, depth first.
fn recursive(input: Values<'_>) -> Values<'_> {
    let mut out = Vec::new();
    for v in input {
        let kids = children(&v);
        if !kids.is_empty() {
            out.push(v);
            out.extend(recursive(kids));
        }
    }
    out
}

fn eval_array<'a>(input: Values<'a>, params: &[Param; 3]) -> Result<Values<'a>, JsonPathError> {
    let mut result = Vec::new();
    for v in &input {
        let list = match v.as_ref() {
            Value::Null => continue,
            Value::Array(list) => list,
            other => return Err(JsonPathError::NotAList(go_type(other).to_string())),
        };
        let len = i64::try_from(list.len()).unwrap_or(i64::MAX);
        let mut p = *params;
        if !p[0].known {
            p[0].value = 0;
        }
        if p[0].value < 0 {
            p[0].value = p[0].value.wrapping_add(len);
        }
        if !p[1].known {
            p[1].value = len;
        }
        if p[1].value < 0 || (p[1].value == 0 && p[1].derived) {
            p[1].value = p[1].value.wrapping_add(len);
        }
        if p[1].value == p[0].value {
            // Zero elements asked for: client-go stops here.
            return Ok(result);
        }
        if p[0].value >= len || p[0].value < 0 {
            return Err(JsonPathError::OutOfBounds {
                index: p[0].value,
                length: list.len(),
            });
        }
        if p[1].value > len || p[1].value < 0 {
            return Err(JsonPathError::OutOfBounds {
                index: p[1].value.wrapping_sub(1),
                length: list.len(),
            });
        }
        if p[0].value > p[1].value {
            return Err(JsonPathError::StartAfterEnd {
                start: p[0].value,
                end: p[1].value,
            });
        }
        let step = if p[2].known {
            if p[2].value <= 0 {
                return Err(JsonPathError::BadStep);
            }
            usize::try_from(p[2].value).unwrap_or(usize::MAX)
        } else {
            1
        };
        // Bounds are checked above, so these conversions are exact.
        let (start, end) = (p[0].value as usize, p[1].value as usize);
        for i in (start..end).step_by(step) {
            if let Some(item) = child(v, |v| v.as_array()?.get(i)) {
                result.push(item);
            }
        }
    }
    Ok(result)
}

fn eval_filter<'a>(input: Values<'a>, filter: &Filter) -> Result<Values<'a>, JsonPathError> {
    let mut result = Vec::new();
    for v in &input {
        let Value::Array(list) = v.as_ref() else {
            return Err(JsonPathError::NotFilterable(print_value(v)));
        };
        for i in 0..list.len() {
            let Some(item) = child(v, |v| v.as_array()?.get(i)) else {
                continue;
            };
            if filter.operator == "exists" {
                if !eval_lenient(item.clone(), &filter.left).is_empty() {
                    result.push(item);
                }
                continue;
            }
            let lefts = eval_list(vec![item.clone()], &filter.left)?;
            let left = match lefts.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return Err(JsonPathError::CompareOne),
            };
            let rights = eval_list(vec![item.clone()], &filter.right)?;
            let right = match rights.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return Err(JsonPathError::CompareOne),
            };
            let pass = match filter.operator.as_str() {
                "<" => less(&left, &right)?,
                ">" => !(less(&left, &right)? || equal(&left, &right)?),
                "==" => equal(&left, &right)?,
                "!=" => !equal(&left, &right)?,
                "<=" => less(&left, &right)? || equal(&left, &right)?,
                ">=" => !less(&left, &right)?,
                other => return Err(JsonPathError::UnknownOperator(other.to_string())),
            };
            if pass {
                result.push(item);
            }
        }
    }
    Ok(result)
}

/// What client-go's `evalList` hands an exists filter: the values so far,
/// or on an error the values the failing node was given (so
/// `[?(@.list[5])]` keeps items whose list is too short, as in client-go).
fn eval_lenient<'a>(item: Cow<'a, Value>, nodes: &[Node]) -> Values<'a> {
    let mut cur = vec![item];
    for node in nodes {
        match walk(cur.clone(), node) {
            Ok(next) => cur = next,
            Err(_) => break,
        }
    }
    cur
}

/// A value as Go's template comparison functions see it.
enum Basic<'a> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
}

fn basic(v: &Value) -> Result<Basic<'_>, JsonPathError> {
    match v {
        Value::Bool(b) => Ok(Basic::Bool(*b)),
        Value::Number(n) => Ok(match n.as_i64() {
            Some(i) => Basic::Int(i),
            None => Basic::Float(n.as_f64().unwrap_or(f64::NAN)),
        }),
        Value::String(s) => Ok(Basic::Str(s)),
        _ => Err(JsonPathError::InvalidComparisonType),
    }
}

fn equal(a: &Value, b: &Value) -> Result<bool, JsonPathError> {
    match (basic(a)?, basic(b)?) {
        (Basic::Bool(x), Basic::Bool(y)) => Ok(x == y),
        (Basic::Int(x), Basic::Int(y)) => Ok(x == y),
        (Basic::Float(x), Basic::Float(y)) => Ok(x == y),
        (Basic::Str(x), Basic::Str(y)) => Ok(x == y),
        _ => Err(JsonPathError::IncompatibleTypes),
    }
}

fn less(a: &Value, b: &Value) -> Result<bool, JsonPathError> {
    match (basic(a)?, basic(b)?) {
        (Basic::Bool(_), Basic::Bool(_)) => Err(JsonPathError::InvalidComparisonType),
        (Basic::Int(x), Basic::Int(y)) => Ok(x < y),
        (Basic::Float(x), Basic::Float(y)) => Ok(x.partial_cmp(&y) == Some(Ordering::Less)),
        (Basic::Str(x), Basic::Str(y)) => Ok(x < y),
        _ => Err(JsonPathError::IncompatibleTypes),
    }
}

// ---------------------------------------------------------------- printing

/// One value as client-go's `PrintResults` prints it: objects and lists as
/// compact JSON (Go's `encoding/json`), strings bare, numbers and booleans
/// as Go's `fmt` prints them, `null` as `<no value>`.
pub fn print_value(v: &Value) -> String {
    match v {
        Value::Null => "<no value>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => s.clone(),
        Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            go_json(v, &mut out);
            out
        }
    }
}

/// `v` as Go's `json.Marshal` writes a decoded JSON value: map keys
/// sorted, HTML-significant characters escaped, floats without a
/// fraction when integral.
fn go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&go_json_float(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(k, out);
                out.push(':');
                go_json(&map[k.as_str()], out);
            }
            out.push('}');
        }
    }
}

/// A float as `encoding/json` writes it: shortest digits, plain notation
/// from 1e-6 to 1e21, exponent notation (`1e+21`, `1e-7`) outside.
pub(crate) fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let sci = format!("{f:e}");
        match sci.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => sci,
        }
    } else {
        format!("{f}")
    }
}

fn go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn column(path: &str) -> JsonPath {
        JsonPath::parse(&format!("{{{path}}}")).unwrap()
    }

    /// The first value, as the table convertor takes it.
    fn first(path: &str, data: &Value) -> Option<Value> {
        let results = column(path).find_results(data).ok()?;
        results.first()?.first().map(|v| v.clone().into_owned())
    }

    fn all(path: &str, data: &Value) -> Vec<Value> {
        column(path).find_results(data).unwrap()[0]
            .iter()
            .map(|v| v.clone().into_owned())
            .collect()
    }

    fn object() -> Value {
        json!({
            "metadata": {"name": "a", "labels": {"app": "web", "tier": "fe"}},
            "spec": {
                "replicas": 3,
                "ratio": 0.5,
                "items": [{"name": "x", "n": 1}, {"name": "y", "n": 2}, {"name": "z", "n": 3}],
                "empty": [],
                "nothing": null,
                "a.b": "dotted",
            },
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"},
            ]},
        })
    }

    #[test]
    fn fields_indexes_and_slices() {
        let o = object();
        assert_eq!(first(".spec.replicas", &o), Some(json!(3)));
        assert_eq!(first(".spec.items[0].name", &o), Some(json!("x")));
        assert_eq!(first(".spec.items[-1].name", &o), Some(json!("z")));
        assert_eq!(
            all(".spec.items[*].name", &o),
            vec![json!("x"), json!("y"), json!("z")]
        );
        assert_eq!(
            all(".spec.items[0:2].name", &o),
            vec![json!("x"), json!("y")]
        );
        assert_eq!(all(".spec.items[::2].n", &o), vec![json!(1), json!(3)]);
        assert_eq!(
            all(".spec.items[0,2].name", &o),
            vec![json!("x"), json!("z")]
        );
        assert_eq!(
            all(".metadata.labels.*", &o),
            vec![json!("web"), json!("fe")]
        );
        assert_eq!(first(".metadata['name']", &o), Some(json!("a")));
        // Missing keys yield nothing (the table convertor allows them).
        assert_eq!(first(".spec.missing.deeper", &o), None);
        // An index past the end is an error; so the cell is empty.
        assert!(column(".spec.empty[0]").find_results(&o).is_err());
        assert_eq!(
            column(".spec.items[5]")
                .find_results(&o)
                .unwrap_err()
                .to_string(),
            "array index out of bounds: index 5, length 3"
        );
        assert_eq!(
            column(".spec.replicas[0]")
                .find_results(&o)
                .unwrap_err()
                .to_string(),
            "int64 is not array or slice"
        );
        // Escaped dots stay in the key.
        assert_eq!(first(r".spec.a\.b", &o), Some(json!("dotted")));
        // A null on the way is skipped, not an error.
        assert_eq!(first(".spec.nothing[0]", &o), None);
    }

    #[test]
    fn filters() {
        let o = object();
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Ready")].status"#, &o),
            Some(json!("True"))
        );
        assert_eq!(
            first(".status.conditions[?(@.type=='Synced')].status", &o),
            Some(json!("False"))
        );
        assert_eq!(
            all(".spec.items[?(@.n>1)].name", &o),
            vec![json!("y"), json!("z")]
        );
        assert_eq!(
            all(".spec.items[?(@.n<=2)].name", &o),
            vec![json!("x"), json!("y")]
        );
        assert_eq!(
            all(".spec.items[?(@.n!=2)].name", &o),
            vec![json!("x"), json!("z")]
        );
        assert_eq!(
            all(".spec.items[?(@.n)].name", &o).len(),
            3,
            "exists filter"
        );
        assert_eq!(all(".status.conditions[?(@.reason)].type", &o).len(), 0);
        // client-go keeps an item whose exists-path fails on an index.
        assert_eq!(all(".spec.items[?(@.name[3])].n", &o).len(), 3);
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Gone")].status"#, &o),
            None
        );
        // Comparing an integer with a float is an error in client-go.
        assert_eq!(
            column(".spec.items[?(@.n==1.0)].name")
                .find_results(&o)
                .unwrap_err(),
            JsonPathError::IncompatibleTypes
        );
    }

    #[test]
    fn recursive_descent_and_text() {
        let o = object();
        let names = all("..name", &o);
        assert_eq!(names, vec![json!("a"), json!("x"), json!("y"), json!("z")]);
        let results = JsonPath::parse("replicas: {.spec.replicas}!")
            .unwrap()
            .find_results(&o)
            .unwrap();
        let flat: Vec<Value> = results.into_iter().flatten().map(Cow::into_owned).collect();
        assert_eq!(flat, vec![json!("replicas: "), json!(3), json!("!")]);
    }

    #[test]
    fn parse_errors_are_client_gos() {
        let err = |t: &str| JsonPath::parse(t).unwrap_err().to_string();
        assert_eq!(err("{.spec"), "unclosed action");
        assert_eq!(err("{.spec.items[0}"), "unterminated array");
        assert_eq!(err("{.spec.items[x]}"), "invalid array index x");
        assert_eq!(err("{.spec.items[-]}"), "array index - is not a number");
        assert_eq!(err("{.spec.items[?(@.a==1}"), "unterminated filter");
        assert_eq!(
            err("{.a (}"),
            "unrecognized character in action: U+0028 '('"
        );
        assert_eq!(err("{....a}"), "invalid multiple recursive descent");
        assert_eq!(err("{.a[\"x]}"), "invalid array index \"x");
        assert_eq!(err("{.a \"x}"), "unterminated quoted string");
        assert_eq!(
            err(r#"{.a[?(@.b=="\q")]}"#),
            r#"unquote string "\q" error invalid syntax"#
        );
        assert_eq!(err("{.a[1:2:3:4]}"), "invalid array index 1:2:3:4");
        assert_eq!(
            parse_template("{.a}", MAX_NESTING + 1).unwrap_err(),
            JsonPathError::TooDeep
        );
        // What client-go accepts, this parser accepts.
        for ok in [
            "{.spec.replicas}",
            "{.metadata.creationTimestamp}",
            r#"{.status.conditions[?(@.type=="Ready")].status}"#,
            "{.spec.items[*].name}",
            "{.spec.list[0]}",
            "{.spec.list[-1:]}",
            "{..name}",
            "{$.spec}",
            "{@.spec}",
            "{.spec.x} and {.spec.y}",
            "{.a['b','c']}",
            "{.a[?(@.n>=-1.5)]}",
        ] {
            assert!(JsonPath::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn quoted_strings_unescape_like_go() {
        assert_eq!(unquote(r#""a\"b""#).as_deref(), Some("a\"b"));
        assert_eq!(unquote(r"'it\'s'").as_deref(), Some("it's"));
        assert_eq!(unquote(r#""\u00e9\x41\101\n""#).as_deref(), Some("éAA\n"));
        assert_eq!(unquote(r#""a"b""#), None);
        assert_eq!(
            unquote(r#"'\"'"#),
            None,
            "\\\" is not an escape in single quotes"
        );
    }

    #[test]
    fn printing_follows_print_results() {
        assert_eq!(print_value(&json!("web")), "web");
        assert_eq!(print_value(&json!(3)), "3");
        assert_eq!(print_value(&json!(0.5)), "0.5");
        assert_eq!(print_value(&json!(1e6)), "1e+06");
        assert_eq!(print_value(&json!(true)), "true");
        assert_eq!(print_value(&Value::Null), "<no value>");
        assert_eq!(
            print_value(&json!({"b": [1, 2.5, "<x>"], "a": {"c": 1e21, "d": 3.0}})),
            r#"{"a":{"c":1e+21,"d":3},"b":[1,2.5,"\u003cx\u003e"]}"#
        );
        assert_eq!(go_json_float(0.000_000_1), "1e-7");
        assert_eq!(go_json_float(123_456_789.0), "123456789");
    }
}
