//! The driver's own requests: changing the ReplicaSets and looking at the
//! cluster. They go through the same API server as the controller's, so
//! the driver counts them and the report subtracts them from the server's
//! request statistics.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// A view of the cluster at one poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Look {
    /// Every ReplicaSet has `target` active pods it controls, reports
    /// `status.replicas == target` and has observed its generation.
    pub converged: bool,
    /// Active pods above `threshold`, summed over the ReplicaSets.
    pub excess: u64,
    /// Active pods controlled by the ReplicaSets, summed.
    pub active: u64,
}

/// Talks to the cluster for the driver and counts what it sent.
pub struct Driver {
    client: Client,
    namespace: String,
    sent: BTreeMap<(&'static str, &'static str), u64>,
}

impl Driver {
    /// A driver working in `namespace` (created by [`Driver::create_namespace`]).
    pub fn new(client: Client, namespace: &str) -> Driver {
        Driver {
            client,
            namespace: namespace.to_owned(),
            sent: BTreeMap::new(),
        }
    }

    /// Requests sent so far per `(verb, resource)`.
    pub fn sent(&self) -> &BTreeMap<(&'static str, &'static str), u64> {
        &self.sent
    }

    fn count(&mut self, verb: &'static str, resource: &'static str) {
        *self.sent.entry((verb, resource)).or_default() += 1;
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Creates the namespace.
    pub async fn create_namespace(&mut self) -> Result<(), kube::Error> {
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": self.namespace}
        }))
        .map_err(kube::Error::SerdeError)?;
        self.count("create", "namespaces");
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        Ok(())
    }

    /// Creates ReplicaSet `name` with `replicas`, selecting `app=<name>`.
    pub async fn create_replica_set(
        &mut self,
        name: &str,
        replicas: i32,
    ) -> Result<(), kube::Error> {
        let rs: ReplicaSet =
            serde_json::from_value(replica_set(name, replicas)).map_err(kube::Error::SerdeError)?;
        self.count("create", "replicasets");
        self.api::<ReplicaSet>()
            .create(&PostParams::default(), &rs)
            .await?;
        Ok(())
    }

    /// Sets `spec.replicas` of ReplicaSet `name`.
    pub async fn scale(&mut self, name: &str, replicas: i32) -> Result<(), kube::Error> {
        self.count("patch", "replicasets");
        self.api::<ReplicaSet>()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await?;
        Ok(())
    }

    /// Lists the ReplicaSets and pods and compares them with `target`
    /// (converged?) and `threshold` (excess).
    pub async fn look(&mut self, target: i32, threshold: i32) -> Result<Look, kube::Error> {
        self.count("list", "replicasets");
        let owners = self
            .api::<ReplicaSet>()
            .list(&ListParams::default())
            .await?
            .items;
        self.count("list", "pods");
        let pods = self.api::<Pod>().list(&ListParams::default()).await?.items;
        let mut active: HashMap<String, i64> = HashMap::new();
        for pod in pods
            .iter()
            .filter(|p| ctrlkit_podcontrol::pod::is_pod_active(p))
        {
            if let Some(owner) = pod
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true))
            {
                *active.entry(owner.uid.clone()).or_default() += 1;
            }
        }
        let mut look = Look {
            converged: true,
            ..Look::default()
        };
        for rs in &owners {
            let n = rs
                .uid()
                .and_then(|uid| active.get(&uid).copied())
                .unwrap_or(0);
            let spec = rs.spec.replicas.unwrap_or(1);
            let status = rs.status.as_ref();
            let settled = spec == target
                && n == i64::from(target)
                && status.is_some_and(|s| {
                    s.replicas == target && s.observed_generation >= rs.metadata.generation
                });
            look.converged &= settled;
            look.excess += u64::try_from(n - i64::from(threshold)).unwrap_or(0);
            look.active += u64::try_from(n).unwrap_or(0);
        }
        Ok(look)
    }
}

fn replica_set(name: &str, replicas: i32) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}],
                    "terminationGracePeriodSeconds": 0
                }
            }
        }
    })
}
