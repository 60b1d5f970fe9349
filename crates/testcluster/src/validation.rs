//! apimachinery's checks of names, label keys and label values
//! (`k8s.io/apimachinery/pkg/util/validation`), with its messages: each
//! check returns what is wrong, the length limit first, so that an error
//! says which limit was hit (a 260-character name "must be no more than
//! 253 characters"). Written by hand rather than with regexes: they run
//! on every write.

/// `DNS1123LabelMaxLength`.
pub(crate) const DNS1123_LABEL_MAX: usize = 63;
/// `DNS1123SubdomainMaxLength`.
pub(crate) const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// The longest label value and name part of a qualified name.
pub(crate) const LABEL_VALUE_MAX: usize = 63;
/// `TotalAnnotationSizeLimitB`: the most bytes all of an object's
/// annotations (keys and values) may take.
pub(crate) const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// `MaxLenError`.
fn max_len(limit: usize) -> String {
    format!("must be no more than {limit} characters")
}

/// `RegexError`: the message, examples and the pattern.
fn regex_error(msg: &str, pattern: &str, examples: &[&str]) -> String {
    let mut out = String::from(msg);
    out.push_str(" (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(e);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(pattern);
    out.push_str("')");
    out
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn label_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            lower_alnum(f) && lower_alnum(l) && b.iter().all(|&c| lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// `IsDNS1123Label`.
pub(crate) fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(max_len(DNS1123_LABEL_MAX));
    }
    if !label_shaped(s) {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`. As in kube-apiserver, one dot-separated part may
/// be longer than 63 characters.
pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len(DNS1123_SUBDOMAIN_MAX));
    }
    if !s.split('.').all(label_shaped) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label` (Service names): a label that starts with a letter.
pub(crate) fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(max_len(DNS1123_LABEL_MAX));
    }
    if !(label_shaped(s) && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase)) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn qualified_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];

/// `IsQualifiedName` (label and annotation keys): an optional DNS
/// subdomain prefix and `/`, and a name of at most 63 characters.
pub(crate) fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let mut parts = s.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, QUALIFIED_NAME_EXAMPLES)
            ));
            return errs;
        }
    };
    match prefix {
        Some("") => errs.push("prefix part must be non-empty".into()),
        Some(p) => errs.extend(
            dns1123_subdomain(p)
                .into_iter()
                .map(|m| format!("prefix part {m}")),
        ),
        None => {}
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > LABEL_VALUE_MAX {
        errs.push(format!("name part {}", max_len(LABEL_VALUE_MAX)));
    }
    if !qualified_shaped(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                QUALIFIED_NAME_EXAMPLES
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`: empty, or a qualified name part of at most 63
/// characters.
pub(crate) fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX {
        errs.push(max_len(LABEL_VALUE_MAX));
    }
    if !s.is_empty() && !qualified_shaped(s) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// A `field.Invalid` error's text: `path: Invalid value: "value": detail`.
pub(crate) fn invalid_value(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// A string as Go's `%q` writes it (close enough for messages: the
/// escapes JSON and Go share).
pub(crate) fn go_quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Several errors as `ErrorList.ToAggregate()` prints them: one alone,
/// more in brackets.
pub(crate) fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_report_the_length_limit_first() {
        let long = "a".repeat(260);
        assert_eq!(
            dns1123_subdomain(&long),
            vec!["must be no more than 253 characters"]
        );
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        let both = dns1123_subdomain(&"A".repeat(254));
        assert_eq!(both.len(), 2);
        assert!(both[1].starts_with("a lowercase RFC 1123 subdomain"));
        assert_eq!(
            dns1123_label("My-Name")[0],
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        );
        assert!(dns1123_subdomain(&format!("{}.b", "a".repeat(100))).is_empty());
        for bad in ["", "a..b", "-a", "a-", "a_b", "a.-b"] {
            assert!(!dns1123_subdomain(bad).is_empty(), "{bad:?}");
        }
        assert!(dns1035_label("web").is_empty());
        assert!(!dns1035_label("1web").is_empty());
    }

    #[test]
    fn label_keys_and_values() {
        for ok in ["app", "example.com/app", "a.b_c-d", "A1"] {
            assert!(qualified_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(qualified_name("/a"), vec!["prefix part must be non-empty"]);
        assert_eq!(
            qualified_name("a/"),
            vec![
                "name part must be non-empty".to_string(),
                format!(
                    "name part {}",
                    regex_error(
                        QUALIFIED_NAME_MSG,
                        QUALIFIED_NAME_FMT,
                        QUALIFIED_NAME_EXAMPLES
                    )
                )
            ]
        );
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        assert_eq!(
            qualified_name(&"k".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(label_value("").is_empty());
        assert!(label_value("v1.2_x-y").is_empty());
        assert_eq!(
            label_value(&"v".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(label_value("(")[0].starts_with("a valid label must be an empty string"));
    }
}
