//! Log output: `tracing` events to stderr, as text or JSON, filtered by
//! `--log-level` or `RUST_LOG`.

use std::fmt;
use std::io::IsTerminal;
use std::str::FromStr;

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines: time, level, target, message, `key=value`
    /// fields. Colours only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object per line with the event's fields at the top level
    /// (`timestamp`, `level`, `target`, `message`, ...), for log
    /// collectors.
    Json,
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Text => "text",
            Self::Json => "json",
        })
    }
}

/// A validated `tracing` filter (`--log-level`): a level (`info`,
/// `debug`, ...) or [`EnvFilter`] directives such as
/// `info,ctrlkit_runtime=debug,kube_client=warn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFilter(String);

impl LogFilter {
    /// The directives as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `RUST_LOG` when set and valid, `default` otherwise; for binaries
    /// without [`ManagerArgs`](super::ManagerArgs).
    pub fn from_env_or(default: &str) -> Result<Self, String> {
        std::env::var("RUST_LOG")
            .ok()
            .and_then(|env| env.parse().ok())
            .map_or_else(|| default.parse(), Ok)
    }

    fn env_filter(&self) -> EnvFilter {
        // Validated in `from_str`; fall back to `info` rather than panic.
        EnvFilter::builder()
            .parse(&self.0)
            .unwrap_or_else(|_| EnvFilter::new("info"))
    }
}

impl FromStr for LogFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match EnvFilter::builder().parse(s) {
            Ok(_) => Ok(Self(s.to_owned())),
            Err(error) => Err(format!(
                "invalid log filter '{s}' (from --log-level or RUST_LOG): {error}; \
                 expected a level (error, warn, info, debug, trace) or directives such as \
                 info,kube=debug"
            )),
        }
    }
}

impl fmt::Display for LogFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Installs the global `tracing` subscriber: `format` lines on stderr,
/// filtered by `filter`.
///
/// Returns `false` (and changes nothing) when a global subscriber is
/// already installed, so calling it twice, or from a test harness that
/// installed its own, is harmless.
pub fn init_logging(format: LogFormat, filter: &LogFilter) -> bool {
    let ansi = std::io::stderr().is_terminal();
    subscriber(format, filter, std::io::stderr, ansi)
        .try_init()
        .is_ok()
}

/// The subscriber [`init_logging`] installs, writing to `writer`.
pub(crate) fn subscriber<W>(
    format: LogFormat,
    filter: &LogFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter.env_filter())
        .with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(builder.json().flatten_event(true).finish()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(format: LogFormat, filter: &str) -> String {
        let capture = Capture::default();
        let sink = capture.clone();
        let filter: LogFilter = filter.parse().unwrap();
        let subscriber = subscriber(format, &filter, move || sink.clone(), false);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(lease = "kube-system/rs", "became the leader");
            tracing::debug!("hidden at info");
        });
        String::from_utf8(capture.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn text_lines_carry_key_value_fields() {
        let out = logged(LogFormat::Text, "info");
        assert!(out.contains(" INFO "), "{out}");
        assert!(
            out.contains("became the leader lease=\"kube-system/rs\""),
            "{out}"
        );
        assert!(!out.contains("hidden"), "{out}");
        assert!(
            !out.contains('\u{1b}'),
            "no colour codes when ansi is off: {out}"
        );
    }

    #[test]
    fn json_lines_are_objects_with_top_level_fields() {
        let out = logged(LogFormat::Json, "info");
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let event: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(event["level"], "INFO");
        assert_eq!(event["message"], "became the leader");
        assert_eq!(event["lease"], "kube-system/rs");
        assert!(event["timestamp"].is_string());
    }

    #[test]
    fn the_filter_selects_levels_and_targets() {
        assert!(logged(LogFormat::Text, "debug").contains("hidden at info"));
        assert!(logged(LogFormat::Text, "warn").is_empty());
        let target = module_path!();
        assert!(logged(LogFormat::Text, &format!("warn,{target}=debug")).contains("hidden"));
    }

    #[test]
    fn invalid_filters_are_rejected_with_a_hint() {
        for bad in ["info,a=loud", "[{"] {
            let err = bad.parse::<LogFilter>().unwrap_err();
            assert!(err.contains("invalid log filter"), "{bad}: {err}");
            assert!(err.contains("--log-level"), "{bad}: {err}");
        }
    }

    #[test]
    fn init_twice_is_harmless() {
        let filter: LogFilter = "off".parse().unwrap();
        let first = init_logging(LogFormat::Text, &filter);
        let second = init_logging(LogFormat::Json, &filter);
        assert!(!second, "a second init must not replace the subscriber");
        // The first may lose to another test's subscriber; both are fine.
        let _ = first;
    }
}
