//! The string formats kube-apiserver checks in CRD schemas (kube-openapi's
//! `strfmt` default registry, restricted to apiextensions'
//! `supportedVersionedFormats`).
//!
//! Most checks are the registry's regular expressions or parsers; `email`
//! and `uri` approximate Go's `net/mail.ParseAddress` and
//! `url.ParseRequestURI` (the common shapes, not every RFC corner).

use std::net::IpAddr;
use std::sync::LazyLock;

use base64::Engine as _;
use regex::Regex;

/// Compiles one of the constant patterns below (a failure is a bug the
/// tests catch, never input).
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("constant format regex compiles")
}

static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static CREDIT_CARD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$",
    )
});
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static HEX_COLOR: LazyLock<Regex> = LazyLock::new(|| re(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
static EMAIL: LazyLock<Regex> =
    LazyLock::new(|| re(r#"^(?:[^<>@]*<[^<>@\s"]+@[^<>@\s]+>|[^<>@\s"]+@[^<>@\s]+)$"#));
static URI: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:[a-zA-Z][a-zA-Z0-9+.\-]*:\S+|/\S*)$"));
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$")
});
static DURATION_GO: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$"));
static DURATION_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(\d+)\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|wks?)\s*$",
    )
});

/// Whether `value` is valid for `format` (given as written in the schema,
/// e.g. `date-time`); unknown formats accept anything.
pub(crate) fn validates(format: &str, value: &str) -> bool {
    match format.replace('-', "").as_str() {
        "bsonobjectid" => value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => URI.is_match(value),
        "email" => EMAIL.is_match(value.trim()),
        "hostname" => value.len() <= 255 && HOSTNAME.is_match(value),
        "ipv4" => value.parse::<IpAddr>().is_ok() && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => is_cidr(value),
        "mac" => is_mac(value),
        "uuid" => UUID.is_match(value),
        "uuid3" => UUID3.is_match(value),
        "uuid4" => UUID4.is_match(value),
        "uuid5" => UUID5.is_match(value),
        "isbn" => is_isbn10(value) || is_isbn13(value),
        "isbn10" => is_isbn10(value),
        "isbn13" => is_isbn13(value),
        "creditcard" => {
            let digits: String = value.chars().filter(char::is_ascii_digit).collect();
            CREDIT_CARD.is_match(&digits)
        }
        "ssn" => SSN.is_match(value),
        "hexcolor" => HEX_COLOR.is_match(value),
        "rgbcolor" => RGB_COLOR.is_match(value),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(value)
            .is_ok(),
        "date" => is_date(value),
        "datetime" => is_date_time(value),
        "duration" => DURATION_GO.is_match(value) || value == "0" || DURATION_WORDS.is_match(value),
        _ => true,
    }
}

fn valid_calendar_date(y: &str, m: &str, d: &str) -> bool {
    let (Ok(y), Ok(m), Ok(d)) = (y.parse::<i16>(), m.parse::<i8>(), d.parse::<i8>()) else {
        return false;
    };
    jiff::civil::Date::new(y, m, d).is_ok()
}

/// `2006-01-02`.
fn is_date(value: &str) -> bool {
    let b = value.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && value[..4]
            .bytes()
            .chain(value[5..7].bytes())
            .chain(value[8..].bytes())
            .all(|c| c.is_ascii_digit())
        && valid_calendar_date(&value[..4], &value[5..7], &value[8..])
}

/// strfmt's `ParseDateTime` layouts: RFC 3339 (any fraction), and the
/// ISO 8601 local and reduced-precision forms.
fn is_date_time(value: &str) -> bool {
    let Some(c) = DATE_TIME.captures(value) else {
        return false;
    };
    let field = |i: usize| c.get(i).map_or("0", |m| m.as_str());
    let in_range = |i: usize, max: u8| field(i).parse::<u8>().is_ok_and(|v| v <= max);
    valid_calendar_date(field(1), field(2), field(3))
        && in_range(4, 23)
        && in_range(5, 59)
        && in_range(6, 59)
}

fn is_cidr(value: &str) -> bool {
    let Some((ip, prefix)) = value.split_once('/') else {
        return false;
    };
    let Ok(addr) = ip.parse::<IpAddr>() else {
        return false;
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_digit())
        && prefix.parse::<u32>().is_ok_and(|p| p <= max)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets, `:`/`-` separated pairs or
/// `.` separated groups of four hex digits.
fn is_mac(value: &str) -> bool {
    let valid_len = |n: usize| n == 6 || n == 8 || n == 20;
    if value.contains('.') {
        let groups: Vec<&str> = value.split('.').collect();
        return valid_len(groups.len() * 2)
            && groups
                .iter()
                .all(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    for sep in [':', '-'] {
        if value.contains(sep) {
            let parts: Vec<&str> = value.split(sep).collect();
            return valid_len(parts.len())
                && parts
                    .iter()
                    .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }
    false
}

fn isbn_chars(value: &str) -> Vec<char> {
    value.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn is_isbn10(value: &str) -> bool {
    let c = isbn_chars(value);
    if c.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, ch) in c.iter().enumerate() {
        let v = match ch {
            'X' | 'x' if i == 9 => 10,
            d if d.is_ascii_digit() => d.to_digit(10).unwrap_or(0),
            _ => return false,
        };
        sum += (10 - i as u32) * v;
    }
    sum % 11 == 0
}

fn is_isbn13(value: &str) -> bool {
    let c = isbn_chars(value);
    if c.len() != 13 || !c.iter().all(char::is_ascii_digit) {
        return false;
    }
    let sum: u32 = c
        .iter()
        .enumerate()
        .map(|(i, d)| d.to_digit(10).unwrap_or(0) * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::validates;

    #[test]
    fn formats_accept_and_reject() {
        let cases: &[(&str, &str, bool)] = &[
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "123E4567E89B12D3A456426614174000", true),
            ("uuid", "xyz", false),
            ("uuid4", "123e4567-e89b-42d3-a456-426614174000", true),
            ("uuid4", "123e4567-e89b-12d3-a456-426614174000", false),
            ("date-time", "2024-02-29T10:00:00Z", true),
            ("date-time", "2024-02-29T10:00:00.123456+02:00", true),
            ("date-time", "2024-02-29T10:00", true),
            ("date-time", "2023-02-29T10:00:00Z", false),
            ("date-time", "2024-02-28 10:00:00Z", false),
            ("date", "2024-12-31", true),
            ("date", "2024-13-01", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "10.0.0.256", false),
            ("ipv4", "::1", false),
            ("ipv6", "fe80::1", true),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("mac", "00:00:5e:00:53:01", true),
            ("mac", "0000.5e00.5301", true),
            ("mac", "00:00:5e", false),
            ("hostname", "example.com", true),
            ("hostname", "-bad", false),
            ("email", "a@example.com", true),
            ("email", "Jane <jane@example.com>", true),
            ("email", "not-an-email", false),
            ("uri", "https://example.com/x", true),
            ("uri", "/absolute/path", true),
            ("uri", "relative", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "not base64!", false),
            ("duration", "1h30m", true),
            ("duration", "3 days", true),
            ("duration", "soon", false),
            ("isbn10", "0321751043", true),
            ("isbn13", "978-0321751041", true),
            ("isbn13", "978-0321751042", false),
            ("hexcolor", "#FFF", true),
            ("rgbcolor", "rgb(255, 0, 10)", true),
            ("ssn", "123-45-6789", true),
            ("bsonobjectid", "507f1f77bcf86cd799439011", true),
            ("password", "anything", true),
            ("int32", "ignored", true),
        ];
        for (format, value, ok) in cases {
            assert_eq!(validates(format, value), *ok, "{format} {value}");
        }
    }
}
