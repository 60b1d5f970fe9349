//! Syntax rules for label keys and values, as the API server enforces them.
//!
//! Checked when a selector is compiled so that a typo in a selector is
//! reported rather than silently matching nothing.

const NAME_MAX: usize = 63;
const PREFIX_MAX: usize = 253;

/// A key is `[prefix/]name`: the optional prefix a DNS subdomain, the name
/// at most 63 alphanumerics, `-`, `_` or `.`, starting and ending
/// alphanumeric.
pub(crate) fn validate_key(key: &str) -> Result<(), String> {
    let name = match key.split_once('/') {
        None => key,
        Some((prefix, name)) => {
            if name.contains('/') {
                return Err("a key has at most one '/'".into());
            }
            validate_prefix(prefix)?;
            name
        }
    };
    if name.is_empty() {
        return Err("the name part must not be empty".into());
    }
    validate_name_chars(name)
}

/// A value is empty, or at most 63 alphanumerics, `-`, `_` or `.`, starting
/// and ending alphanumeric.
pub(crate) fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    validate_name_chars(value)
}

fn validate_name_chars(s: &str) -> Result<(), String> {
    if s.len() > NAME_MAX {
        return Err(format!("must be at most {NAME_MAX} characters"));
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if !s.starts_with(alnum) || !s.ends_with(alnum) {
        return Err("must start and end with an alphanumeric character".into());
    }
    if !s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.')) {
        return Err("may contain only alphanumerics, '-', '_' and '.'".into());
    }
    Ok(())
}

fn validate_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("the prefix before '/' must not be empty".into());
    }
    if prefix.len() > PREFIX_MAX {
        return Err(format!(
            "the prefix must be at most {PREFIX_MAX} characters"
        ));
    }
    let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    for part in prefix.split('.') {
        let ok = part.starts_with(lower_alnum)
            && part.ends_with(lower_alnum)
            && part.chars().all(|c| lower_alnum(c) || c == '-');
        if !ok {
            return Err("the prefix must be a lowercase DNS subdomain".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for ok in ["app", "a", "app.kubernetes.io/name", "x/y_z-1.2", "A_b"] {
            assert_eq!(validate_key(ok), Ok(()), "{ok}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "/x",
            "x/",
            "a/b/c",
            "-app",
            "app-",
            "Upper.Case/x",
            "a..b/x",
            "sp ace",
            long.as_str(),
        ] {
            assert!(validate_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values() {
        for ok in ["", "production", "a.b-c_d", "0"] {
            assert_eq!(validate_value(ok), Ok(()), "{ok}");
        }
        let long = "v".repeat(64);
        for bad in ["-x", "x_", "a b", "é", long.as_str()] {
            assert!(validate_value(bad).is_err(), "{bad}");
        }
    }
}
