//! Shutdown on SIGTERM (what Kubernetes sends a pod it stops) or SIGINT
//! (Ctrl-C).

use tokio_util::sync::CancellationToken;

use super::error::ManagerError;

/// Returns a token that is cancelled on the first SIGTERM or SIGINT.
///
/// The manager drains when it is cancelled: runnables finish their
/// in-flight work, the lease is released, the endpoints close. A second
/// signal means the user will not wait: the process exits at once with
/// status 130.
///
/// Must be called inside a tokio runtime. Fails only if the signal
/// handlers cannot be installed.
pub fn shutdown_on_signals() -> Result<CancellationToken, ManagerError> {
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
    fn install() -> Result<Self, ManagerError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(ManagerError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(ManagerError::Signals)?,
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
    fn install() -> Result<Self, ManagerError> {
        Ok(Self)
    }

    async fn next(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
