//! Where the controller finds its cluster: a [`kube::Client`] from the
//! command line, the environment or the pod it runs in.

use std::path::PathBuf;

use kube::config::{Config, KubeConfigOptions, Kubeconfig};

use crate::ops::OpsError;

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
    pub async fn load_config(&self) -> Result<Config, OpsError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        if let Some(path) = &self.kubeconfig {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| OpsError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?;
            return Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|source| OpsError::Kubeconfig {
                    path: path.clone(),
                    source,
                });
        }
        if self.context.is_some() {
            // A context only exists in a kubeconfig: no in-cluster fallback.
            return Config::from_kubeconfig(&options)
                .await
                .map_err(OpsError::DefaultKubeconfig);
        }
        Config::infer().await.map_err(OpsError::Infer)
    }

    /// Loads the configuration and builds a client from it.
    pub async fn client(&self) -> Result<kube::Client, OpsError> {
        let config = self.load_config().await?;
        kube::Client::try_from(config).map_err(OpsError::Client)
    }
}
