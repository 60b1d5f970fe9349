//! Stock `kubectl` driven from tests: against the `testcluster` binary or
//! an in-process cluster's kubeconfig.
//!
//! Needs kubectl at /usr/bin/kubectl (or on PATH); CI installs it. Every
//! kubectl call gets `--request-timeout`.

use std::{
    path::PathBuf,
    process::{Child, Command},
    time::Duration,
};

use serde_json::Value;

pub(crate) const GUARD: Duration = Duration::from_secs(60);

/// Kills (and reaps) a child process when dropped, so a failing assertion
/// never leaves a server or a `kubectl -w` running.
pub(crate) struct ChildGuard(pub(crate) Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn kubectl_binary() -> PathBuf {
    let default = PathBuf::from("/usr/bin/kubectl");
    if default.exists() {
        return default;
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("kubectl"))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| {
            panic!(
                "kubectl is not installed (looked at /usr/bin/kubectl and on PATH); \
                 this test drives the testcluster binary with stock kubectl, install it to run it"
            )
        })
}

pub(crate) struct Kubectl {
    pub(crate) bin: PathBuf,
    pub(crate) kubeconfig: PathBuf,
}

impl Kubectl {
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        // kubectl's discovery and OpenAPI caches next to the kubeconfig,
        // so that tests never share (or read a stale) cache.
        let cache = self
            .kubeconfig
            .parent()
            .map(|d| d.join("kubectl-cache"))
            .unwrap_or_else(|| PathBuf::from("kubectl-cache"));
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(cache)
            .arg("--request-timeout=30s")
            .args(args);
        c
    }

    /// Run kubectl: stdout, or stderr when it fails.
    pub(crate) fn output(&self, args: &[&str]) -> Result<String, String> {
        let out = self.command(args).output().unwrap();
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).unwrap())
        } else {
            Err(String::from_utf8(out.stderr).unwrap())
        }
    }

    /// Run kubectl, returning stdout; panics with stderr on failure.
    pub(crate) fn run(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run kubectl expecting failure; returns stderr.
    pub(crate) fn fail(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(!out.status.success(), "kubectl {args:?} should fail");
        String::from_utf8(out.stderr).unwrap()
    }

    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.run(&all)).unwrap()
    }
}

impl Kubectl {
    /// kubectl for an in-process cluster: its kubeconfig written to `dir`.
    pub(crate) fn for_cluster(
        cluster: &ctrlkit_testcluster::TestCluster,
        dir: &std::path::Path,
    ) -> Kubectl {
        let kubeconfig = dir.join("kubeconfig");
        cluster.write_kubeconfig(&kubeconfig).unwrap();
        Kubectl {
            bin: kubectl_binary(),
            kubeconfig,
        }
    }

    /// Run kubectl on a blocking thread (the cluster serves on the
    /// test's runtime meanwhile), returning stdout; panics on failure.
    pub(crate) async fn run_async(&self, args: &[&str]) -> String {
        let (bin, kubeconfig) = (self.bin.clone(), self.kubeconfig.clone());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            Kubectl { bin, kubeconfig }.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .unwrap()
    }

    /// [`Kubectl::output`] on a blocking thread.
    pub(crate) async fn output_async(&self, args: &[&str]) -> Result<String, String> {
        let (bin, kubeconfig) = (self.bin.clone(), self.kubeconfig.clone());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            Kubectl { bin, kubeconfig }.output(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .unwrap()
    }

    /// [`Kubectl::fail`] on a blocking thread; returns stderr.
    pub(crate) async fn fail_async(&self, args: &[&str]) -> String {
        let (bin, kubeconfig) = (self.bin.clone(), self.kubeconfig.clone());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            Kubectl { bin, kubeconfig }.fail(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .unwrap()
    }

    /// `kubectl ARGS -o json` on a blocking thread.
    pub(crate) async fn json_async(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.run_async(&all).await).unwrap()
    }

    /// `kubectl apply -f` of `yaml`, written to a file in `dir`.
    pub(crate) async fn apply(&self, dir: &std::path::Path, yaml: &str) -> String {
        let path = dir.join(format!("manifest-{}.yaml", std::process::id()));
        std::fs::write(&path, yaml).unwrap();
        self.run_async(&["apply", "-f", path.to_str().unwrap()])
            .await
    }
}

/// kubectl's table output as rows of cells, cut at the header's column
/// starts (empty cells print as blanks).
pub(crate) fn table(out: &str) -> Vec<Vec<String>> {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    std::iter::once(header)
        .chain(lines)
        .map(|line| {
            starts
                .iter()
                .enumerate()
                .map(|(n, &start)| {
                    let end = starts
                        .get(n + 1)
                        .copied()
                        .unwrap_or(line.len())
                        .min(line.len());
                    line.get(start.min(line.len())..end)
                        .unwrap_or("")
                        .trim()
                        .to_string()
                })
                .collect()
        })
        .collect()
}
