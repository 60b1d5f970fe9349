//! Name checks from apimachinery's `util/validation`, with its messages.

/// Limit of a DNS-1035 or DNS-1123 label.
const LABEL_MAX: usize = 63;
/// Limit of a DNS-1123 subdomain.
const SUBDOMAIN_MAX: usize = 253;

/// apimachinery's `RegexError`: the message, the examples and the regex.
fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{regex}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(e);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(regex);
    out.push_str("')");
    out
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn label_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum_lower(b[0])
        && is_alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
}

/// The problems with `s` as a DNS-1123 label (empty when valid).
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
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

/// The problems with `s` as a DNS-1123 subdomain (empty when valid).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !s.split('.').all(label_shaped) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["example.com"],
        ));
    }
    errs
}

/// The problems with `s` as a DNS-1035 label (empty when valid).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    if !(label_shaped(s) && s.as_bytes()[0].is_ascii_lowercase()) {
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
pub fn qualified_name(s: &str) -> Vec<String> {
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
    } else if name.len() > LABEL_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_MAX)));
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
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
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

/// The problems with `s` as a path segment name (`path.IsValidPathSegmentName`).
pub fn path_segment_name(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    let mut errs = Vec::new();
    for illegal in ["/", "%"] {
        if s.contains(illegal) {
            errs.push(format!("may not contain '{illegal}'"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1035_messages_match_apimachinery() {
        assert!(dns1035_label("crontabs").is_empty());
        assert_eq!(
            dns1035_label("1abc"),
            vec![
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(
            dns1035_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(dns1035_label("Abc").len(), 1);
    }

    #[test]
    fn subdomains_and_labels() {
        assert!(dns1123_subdomain("stable.example.com").is_empty());
        assert_eq!(dns1123_subdomain("Example.com").len(), 1);
        assert!(dns1123_subdomain("a..b")[0].contains("(e.g. 'example.com', regex used"));
        assert!(dns1123_label("123-abc").is_empty());
        assert_eq!(dns1123_label("-a").len(), 1);
        assert_eq!(path_segment_name("a/b"), vec!["may not contain '/'"]);
        assert_eq!(path_segment_name(".."), vec!["may not be '..'"]);
    }

    #[test]
    fn names_report_the_length_limit_first() {
        let long = "a".repeat(260);
        assert_eq!(
            dns1123_subdomain(&long),
            vec!["must be no more than 253 characters"]
        );
        let both = dns1123_subdomain(&"A".repeat(254));
        assert_eq!(both.len(), 2);
        assert!(both[1].starts_with("a lowercase RFC 1123 subdomain"));
        assert!(dns1123_subdomain(&format!("{}.b", "a".repeat(100))).is_empty());
        for bad in ["", "a..b", "-a", "a-", "a_b", "a.-b"] {
            assert!(!dns1123_subdomain(bad).is_empty(), "{bad:?}");
        }
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
