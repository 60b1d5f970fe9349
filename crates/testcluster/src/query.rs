//! Query parameters of API requests, read as kube-apiserver's parameter
//! codec reads them (`runtime.Convert_Slice_string_To_*`) and checked as
//! `ValidateListOptions` checks them: a value that does not parse is a `400
//! BadRequest` with Go's `strconv` message, a forbidden combination a `422
//! Invalid` of `ListOptions.meta.k8s.io`. No value, however large, makes
//! the server panic: numbers are parsed into their type and durations
//! saturate.

use std::collections::HashMap;
use std::time::Duration;

use crate::status::ApiError;

/// The query parameters of a request (the last value of a repeated name).
pub(crate) type Params = HashMap<String, String>;

/// A boolean parameter: absent, `false` or `0` (in any case) is false,
/// anything else, the empty string included, is true.
pub(crate) fn flag(params: &Params, name: &str) -> bool {
    optional_flag(params, name).unwrap_or(false)
}

/// A boolean parameter that may be absent (a `*bool` option).
pub(crate) fn optional_flag(params: &Params, name: &str) -> Option<bool> {
    params
        .get(name)
        .map(|v| !(v.eq_ignore_ascii_case("false") || v == "0"))
}

/// Go's `strconv.ParseInt(value, 10, 64)` error text.
fn parse_int_error(value: &str, e: &std::num::ParseIntError) -> ApiError {
    use std::num::IntErrorKind;
    let why = match e.kind() {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => "value out of range",
        _ => "invalid syntax",
    };
    ApiError::bad_request(format!("strconv.ParseInt: parsing {value:?}: {why}"))
}

/// An `int64` parameter; a value that is not one is a 400, as the
/// parameter codec's conversion fails.
pub(crate) fn int64(params: &Params, name: &str) -> Result<Option<i64>, ApiError> {
    params
        .get(name)
        .map(|v| v.parse::<i64>().map_err(|e| parse_int_error(v, &e)))
        .transpose()
}

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VersionMatch {
    /// Not given.
    Unset,
    /// `NotOlderThan`: at least this fresh.
    NotOlderThan,
    /// `Exact`: the state at exactly this version.
    Exact,
}

/// A `422 Invalid` of `ListOptions.meta.k8s.io`, as `NewInvalid` words
/// one error or several.
fn invalid_options(errors: Vec<String>) -> ApiError {
    let joined = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    ApiError::new(
        422,
        "Invalid",
        format!("ListOptions.meta.k8s.io \"\" is invalid: {joined}"),
    )
}

/// The resourceVersion a list or watch names, parsed as
/// `APIObjectVersioner.ParseResourceVersion` does: empty and `0` mean
/// "any", anything else must be an unsigned integer.
fn parse_version(resource: &str, rv: &str) -> Result<u64, ApiError> {
    if rv.is_empty() {
        return Ok(0);
    }
    rv.parse::<u64>().map_err(|e| {
        use std::num::IntErrorKind;
        let why = match e.kind() {
            IntErrorKind::PosOverflow => "value out of range",
            _ => "invalid syntax",
        };
        ApiError::invalid(
            resource,
            "",
            format!(
                "resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: {why}"
            ),
        )
    })
}

/// The options of a list or watch (`metav1.ListOptions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListOptions {
    /// `watch`.
    pub(crate) watch: bool,
    /// `resourceVersion` as sent (empty when absent).
    pub(crate) resource_version: String,
    /// `resourceVersion` parsed; 0 for empty and `0`.
    pub(crate) version: u64,
    /// `resourceVersionMatch`.
    pub(crate) version_match: VersionMatch,
    /// `limit`, when positive (zero and negative mean no limit).
    pub(crate) limit: Option<usize>,
    /// `continue`, when not empty.
    pub(crate) continue_token: Option<String>,
    /// `timeoutSeconds`.
    pub(crate) timeout_seconds: Option<i64>,
    /// `allowWatchBookmarks`.
    pub(crate) allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub(crate) send_initial_events: Option<bool>,
}

/// How long a watch runs when `timeoutSeconds` is not given (or 0):
/// kube-apiserver's `--min-request-timeout` default.
pub(crate) const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

impl ListOptions {
    /// Read and validate the options of a list or watch of `resource`
    /// (the plural, for messages); `watch` forces a watch (the `watch`
    /// parameter is read too).
    pub(crate) fn parse(params: &Params, resource: &str) -> Result<Self, ApiError> {
        let watch = flag(params, "watch");
        let resource_version = params.get("resourceVersion").cloned().unwrap_or_default();
        let version = parse_version(resource, &resource_version)?;
        let limit = int64(params, "limit")?
            .filter(|l| *l > 0)
            .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        let timeout_seconds = int64(params, "timeoutSeconds")?;
        let continue_token = params.get("continue").filter(|c| !c.is_empty()).cloned();
        let send_initial_events = optional_flag(params, "sendInitialEvents");
        let match_text = params
            .get("resourceVersionMatch")
            .map(String::as_str)
            .unwrap_or("");
        let version_match = match match_text {
            "" => VersionMatch::Unset,
            "NotOlderThan" => VersionMatch::NotOlderThan,
            "Exact" => VersionMatch::Exact,
            _ => VersionMatch::Unset,
        };
        let mut errors = Vec::new();
        let rvm = "resourceVersionMatch";
        if watch {
            if send_initial_events.is_some() && match_text != "NotOlderThan" {
                errors.push(format!(
                    "{rvm}: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                ));
            }
            if !match_text.is_empty() {
                if send_initial_events.is_none() {
                    errors.push(format!("{rvm}: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
                }
                if match_text != "NotOlderThan" {
                    errors.push(format!(
                        "{rvm}: Unsupported value: {match_text:?}: supported values: \"NotOlderThan\""
                    ));
                }
                if continue_token.is_some() {
                    errors.push(format!(
                        "{rvm}: Forbidden: resourceVersionMatch is forbidden when continue is provided"
                    ));
                }
            }
        } else {
            if !match_text.is_empty() {
                if resource_version.is_empty() {
                    errors.push(format!("{rvm}: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"));
                }
                if continue_token.is_some() {
                    errors.push(format!(
                        "{rvm}: Forbidden: resourceVersionMatch is forbidden when continue is provided"
                    ));
                }
                if !matches!(match_text, "Exact" | "NotOlderThan") {
                    errors.push(format!("{rvm}: Unsupported value: {match_text:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""));
                }
                if match_text == "Exact" && resource_version == "0" {
                    errors.push(format!("{rvm}: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
                }
            }
            if send_initial_events.is_some() {
                errors.push(
                    "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".into(),
                );
            }
        }
        if !errors.is_empty() {
            return Err(invalid_options(errors));
        }
        Ok(ListOptions {
            watch,
            resource_version,
            version,
            version_match,
            limit,
            continue_token,
            timeout_seconds,
            allow_bookmarks: flag(params, "allowWatchBookmarks"),
            send_initial_events,
        })
    }

    /// How long a watch runs: `timeoutSeconds`, or the default when it is
    /// absent or 0. A negative value ends the watch at once (its deadline
    /// has passed, as on kube-apiserver); a huge one is capped rather than
    /// overflowing.
    pub(crate) fn watch_timeout(&self) -> Duration {
        match self.timeout_seconds {
            None | Some(0) => DEFAULT_WATCH_TIMEOUT,
            Some(s) if s < 0 => Duration::ZERO,
            Some(s) => Duration::from_secs(s.unsigned_abs().min(MAX_WATCH_TIMEOUT_SECS)),
        }
    }

    /// Whether a list must be served at exactly its resourceVersion:
    /// `resourceVersionMatch=Exact`, or (kube-apiserver's legacy rule) a
    /// paged list from a non-zero version without a match.
    pub(crate) fn exact(&self) -> bool {
        match self.version_match {
            VersionMatch::Exact => true,
            VersionMatch::Unset => self.limit.is_some() && self.version > 0,
            VersionMatch::NotOlderThan => false,
        }
    }
}

/// The longest watch timeout honoured (about 136 years): far beyond any
/// test, small enough that a deadline never overflows the clock.
const MAX_WATCH_TIMEOUT_SECS: u64 = u32::MAX as u64;

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn booleans_follow_the_parameter_codec() {
        for (v, want) in [
            ("true", true),
            ("1", true),
            ("", true),
            ("yes", true),
            ("false", false),
            ("FALSE", false),
            ("0", false),
        ] {
            assert_eq!(flag(&params(&[("watch", v)]), "watch"), want, "{v:?}");
        }
        assert!(!flag(&params(&[]), "watch"));
        assert_eq!(optional_flag(&params(&[]), "sendInitialEvents"), None);
    }

    #[test]
    fn integers_out_of_range_are_bad_requests_with_go_messages() {
        let err = int64(
            &params(&[("timeoutSeconds", "18446744073709551615")]),
            "timeoutSeconds",
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "strconv.ParseInt: parsing \"18446744073709551615\": value out of range"
        );
        let err = int64(&params(&[("limit", "ten")]), "limit").unwrap_err();
        assert_eq!(
            err.message,
            "strconv.ParseInt: parsing \"ten\": invalid syntax"
        );
        assert_eq!(
            int64(&params(&[("limit", "-3")]), "limit").unwrap(),
            Some(-3)
        );
    }

    #[test]
    fn watch_timeouts_saturate() {
        let opts = |t: &str| {
            ListOptions::parse(&params(&[("watch", "1"), ("timeoutSeconds", t)]), "pods").unwrap()
        };
        assert_eq!(opts("0").watch_timeout(), DEFAULT_WATCH_TIMEOUT);
        assert_eq!(opts("-5").watch_timeout(), Duration::ZERO);
        assert_eq!(opts("30").watch_timeout(), Duration::from_secs(30));
        assert_eq!(
            opts("9223372036854775807").watch_timeout(),
            Duration::from_secs(MAX_WATCH_TIMEOUT_SECS)
        );
        // The deadline a watch computes from it does not overflow.
        assert!(
            tokio::time::Instant::now()
                .checked_add(opts("9223372036854775807").watch_timeout())
                .is_some()
        );
    }

    #[test]
    fn list_option_combinations_are_validated_as_kube_apiserver_does() {
        let err = |pairs: &[(&str, &str)]| ListOptions::parse(&params(pairs), "pods").unwrap_err();
        let e = err(&[("resourceVersionMatch", "Exact")]);
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        let e = err(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]);
        assert!(
            e.message
                .contains("forbidden for resourceVersion \\\"0\\\"")
                || e.message.contains("forbidden for resourceVersion \"0\""),
            "{}",
            e.message
        );
        let e = err(&[("watch", "true"), ("sendInitialEvents", "true")]);
        assert!(
            e.message.contains(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            )
        );
        let e = err(&[
            ("watch", "true"),
            ("resourceVersionMatch", "Exact"),
            ("sendInitialEvents", "true"),
        ]);
        assert!(
            e.message
                .starts_with("ListOptions.meta.k8s.io \"\" is invalid: ["),
            "{}",
            e.message
        );
        let e = err(&[("resourceVersion", "x1")]);
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .contains("strconv.ParseUint: parsing \"x1\": invalid syntax")
        );
        let ok = ListOptions::parse(
            &params(&[
                ("watch", "true"),
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("allowWatchBookmarks", "true"),
            ]),
            "pods",
        )
        .unwrap();
        assert_eq!(ok.send_initial_events, Some(true));
        assert!(ok.allow_bookmarks);
        let paged =
            ListOptions::parse(&params(&[("limit", "5"), ("resourceVersion", "9")]), "pods")
                .unwrap();
        assert!(paged.exact(), "a paged list from a version is exact");
    }
}
