//! Shutdown on SIGTERM (what Kubernetes sends a pod it stops) or SIGINT
//! (Ctrl-C).

use tokio_util::sync::CancellationToken;

use crate::ops::OpsError;

/// Returns a token that is cancelled on the first SIGTERM or SIGINT.
///
/// Everything that should stop gracefully watches the token (or a child
/// of it): the workers finish their in-flight syncs, the lease is
/// released, the HTTP endpoints close. A second signal means the user is
/// not willing to wait: the process exits at once with status 130.
///
/// Must be called inside a tokio runtime. Fails only if the signal
/// handlers cannot be installed.
pub fn shutdown_on_signals() -> Result<CancellationToken, OpsError> {
    let token = CancellationToken::new();
    let mut signals = Signals::install()?;
    let cancel = token.clone();
    tokio::spawn(async move {
        let name = signals.next().await;
        tracing::info!(signal = name, "shutting down: draining in-flight work");
        cancel.cancel();
        let name = signals.next().await;
        tracing::warn!(signal = name, "second signal: exiting immediately");
        std::process::exit(130);
    });
    Ok(token)
}

#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn install() -> Result<Self, OpsError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(OpsError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(OpsError::Signals)?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn install() -> Result<Self, OpsError> {
        Ok(Self)
    }

    async fn next(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
