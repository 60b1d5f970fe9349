//! Where the process finds its cluster: a [`kube::Client`] from the command
//! line, the environment or the pod it runs in.

use std::path::PathBuf;

use kube::config::{Config, KubeConfigOptions, Kubeconfig};

use super::error::ManagerError;

/// How to find the cluster, in the order kubectl users expect.
///
/// 1. `kubeconfig`: this file, and nothing else;
/// 2. otherwise the files in `$KUBECONFIG`, or `~/.kube/config`;
/// 3. otherwise, when neither exists and no `context` was asked for, the
///    in-cluster configuration (the pod's service account token and the
///    `KUBERNETES_SERVICE_HOST`/`_PORT` variables).
///
/// `context` picks a kubeconfig context other than the current one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeConfigSource {
    /// An explicit kubeconfig file (`--kubeconfig`).
    pub kubeconfig: Option<PathBuf>,
    /// A context in the kubeconfig (`--context`).
    pub context: Option<String>,
}

impl KubeConfigSource {
    /// Loads the configuration described above.
    ///
    /// Errors name the file or the sources that were tried; nothing panics
    /// on a missing or malformed kubeconfig.
    pub async fn load_config(&self) -> Result<Config, ManagerError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        if let Some(path) = &self.kubeconfig {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| ManagerError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?;
            return Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|source| ManagerError::Kubeconfig {
                    path: path.clone(),
                    source,
                });
        }
        if self.context.is_some() {
            // A context only exists in a kubeconfig: no in-cluster fallback.
            return Config::from_kubeconfig(&options)
                .await
                .map_err(ManagerError::DefaultKubeconfig);
        }
        Config::infer().await.map_err(ManagerError::Infer)
    }

    /// Loads the configuration and builds a client from it.
    pub async fn client(&self) -> Result<kube::Client, ManagerError> {
        let config = self.load_config().await?;
        kube::Client::try_from(config).map_err(ManagerError::Client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::error::error_chain;

    #[tokio::test]
    async fn a_missing_file_is_named_in_the_error() {
        let source = KubeConfigSource {
            kubeconfig: Some("/nonexistent/kubeconfig".into()),
            context: None,
        };
        let Err(err) = source.client().await else {
            panic!("a missing kubeconfig must fail");
        };
        assert!(matches!(err, ManagerError::Kubeconfig { .. }));
        let text = error_chain(&err);
        assert!(
            text.starts_with("cannot load kubeconfig /nonexistent/kubeconfig: "),
            "{text}"
        );
    }

    #[tokio::test]
    async fn an_unknown_context_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\n\
             contexts:\n- name: here\n  context: {cluster: c, user: u}\ncurrent-context: here\n\
             users:\n- name: u\n  user: {}\n",
        )
        .unwrap();
        let good = KubeConfigSource {
            kubeconfig: Some(path.clone()),
            context: Some("here".into()),
        };
        assert_eq!(
            good.load_config().await.unwrap().cluster_url.to_string(),
            "http://127.0.0.1:1/"
        );
        let bad = KubeConfigSource {
            kubeconfig: Some(path),
            context: Some("elsewhere".into()),
        };
        let err = error_chain(&bad.load_config().await.unwrap_err());
        assert!(err.contains("elsewhere"), "{err}");
    }
}
