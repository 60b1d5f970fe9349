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
}
