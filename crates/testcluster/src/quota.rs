//! ResourceQuota: object-count admission and quota status, as
//! kube-apiserver's quota admission plugin and kube-controller-manager's
//! quota controller do for counts.
//!
//! A create in a namespace with quotas is refused with 403 Forbidden when
//! it would take a counted resource past `spec.hard`, with kube-apiserver's
//! message (`pods "x" is forbidden: exceeded quota: q, requested: pods=1,
//! used: pods=2, limited: pods=2`). Counted resources: `count/<resource>`
//! (`count/<plural>.<group>` outside the core group) for every served
//! type, and the legacy names `pods`, `services`, `configmaps`, `secrets`,
//! `persistentvolumeclaims`, `replicationcontrollers` and
//! `resourcequotas`. Compute resources (`requests.cpu`, ...) are not
//! enforced. `status.hard` and `status.used` follow every change.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, MutexGuard};
use serde_json::{Value, json};

use crate::json::At;
use crate::kinds::PODS;
use crate::ops::Api;
use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::Stored;

/// Quota state shared by admission and the status updates.
#[derive(Debug, Default)]
pub(crate) struct Quotas {
    /// Set once any ResourceQuota exists: creates before that take no lock.
    any: AtomicBool,
    /// Held from a counted create's check to its commit, so concurrent
    /// creates cannot both take the last unit.
    admission: Mutex<()>,
}

/// The quota resource names that count objects of `def`.
fn counted_names(def: &ResourceDef) -> Vec<String> {
    let mut names = vec![if def.group.is_empty() {
        format!("count/{}", def.plural)
    } else {
        format!("count/{}.{}", def.plural, def.group)
    }];
    if def.group.is_empty()
        && matches!(
            def.plural,
            "pods"
                | "services"
                | "configmaps"
                | "secrets"
                | "persistentvolumeclaims"
                | "replicationcontrollers"
                | "resourcequotas"
        )
    {
        names.push(def.plural.to_string());
    }
    names
}

/// Whether a stored object counts against quota: pods in a terminal phase
/// or being deleted do not, as kube-apiserver's pod evaluator.
fn counts(def: &ResourceDef, obj: &Stored) -> bool {
    if def.id != PODS {
        return true;
    }
    if obj.summary.terminating {
        return false;
    }
    !matches!(
        obj.summary.field(&["status", "phase"]),
        Some("Succeeded" | "Failed")
    )
}

/// `a=1,b=2` with keys sorted, as kube-apiserver prints resource lists.
fn pretty(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn hard_of(quota: &Value) -> BTreeMap<String, String> {
    quota
        .at(&["spec", "hard"])
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect()
}

/// A count quantity: plain integers and the `k`/`Ki`-style suffixes
/// object counts are sometimes written with.
fn parse_count(q: &str) -> Option<i64> {
    let q = q.trim();
    let (num, mult) = match q {
        _ if q.ends_with("Ki") => (&q[..q.len() - 2], 1024),
        _ if q.ends_with('k') => (&q[..q.len() - 1], 1000),
        _ => (q, 1),
    };
    num.parse::<i64>().ok().map(|n| n * mult)
}

impl Quotas {
    /// Note that a ResourceQuota was created.
    pub(crate) fn enable(&self) {
        self.any.store(true, Ordering::Relaxed);
    }

    /// Check a create of `def` named `name` in `namespace` against the
    /// namespace's quotas. The returned guard, held until the create has
    /// committed, keeps other counted creates out meanwhile.
    pub(crate) fn admit<'a>(
        &'a self,
        api: &Api,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<MutexGuard<'a, ()>>, ApiError> {
        if !self.any.load(Ordering::Relaxed) || !def.namespaced {
            return Ok(None);
        }
        let Some(quota_def) = api
            .registry
            .snapshot()
            .lookup("", "v1", "resourcequotas")
            .cloned()
        else {
            return Ok(None);
        };
        let (quotas, _) = api.store.list(quota_def.storage, Some(namespace), None);
        if quotas.is_empty() {
            return Ok(None);
        }
        let guard = self.admission.lock();
        let names = counted_names(def);
        let used = count(api, def, namespace);
        for q in &quotas {
            let value = q.value();
            let hard = hard_of(&value);
            let mut requested = BTreeMap::new();
            let mut used_map = BTreeMap::new();
            let mut limited = BTreeMap::new();
            for n in names.iter().filter(|n| hard.contains_key(*n)) {
                let limit = hard.get(n).and_then(|h| parse_count(h)).unwrap_or(i64::MAX);
                if used + 1 > limit {
                    requested.insert(n.clone(), "1".to_string());
                    used_map.insert(n.clone(), used.to_string());
                    limited.insert(n.clone(), hard.get(n).cloned().unwrap_or_default());
                }
            }
            if !requested.is_empty() {
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "{} \"{name}\" is forbidden: exceeded quota: {}, requested: {}, used: {}, limited: {}",
                        def.label(),
                        q.summary.name,
                        pretty(&requested),
                        pretty(&used_map),
                        pretty(&limited)
                    ),
                ));
            }
        }
        Ok(Some(guard))
    }

    /// Bring `status.hard` and `status.used` of the quotas in `namespace`
    /// up to date.
    pub(crate) fn refresh(&self, api: &Api, namespace: &str) {
        if !self.any.load(Ordering::Relaxed) || namespace.is_empty() {
            return;
        }
        let snap = api.registry.snapshot();
        let Some(quota_def) = snap.lookup("", "v1", "resourcequotas").cloned() else {
            return;
        };
        let (quotas, _) = api.store.list(quota_def.storage, Some(namespace), None);
        for q in quotas {
            let value = q.value();
            let hard = hard_of(&value);
            let mut used = serde_json::Map::new();
            for key in hard.keys() {
                let n = snap
                    .served()
                    .filter(|d| d.conversion.is_none())
                    .find(|d| counted_names(d).contains(key))
                    .map_or(0, |d| count(api, d, namespace));
                used.insert(key.clone(), json!(n.to_string()));
            }
            let status = json!({"hard": hard, "used": used});
            if value.get("status") == Some(&status) {
                continue;
            }
            let key = (namespace.to_string(), q.summary.name.to_string());
            let _ = api.internal_update(quota_def.id, &key, |v| v["status"] = status.clone());
        }
    }
}

/// The objects of `def` in `namespace` that count against quota.
fn count(api: &Api, def: &ResourceDef, namespace: &str) -> i64 {
    let (items, _) = api.store.list(def.storage, Some(namespace), None);
    let n = items.iter().filter(|o| counts(def, o)).count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_names() {
        assert_eq!(parse_count("2"), Some(2));
        assert_eq!(parse_count("1k"), Some(1000));
        assert_eq!(parse_count("x"), None);
        let pods = ResourceDef::new("", "v1", "pods", "pod", "Pod", true);
        assert_eq!(counted_names(&pods), ["count/pods", "pods"]);
        let deploy = ResourceDef::new(
            "apps",
            "v1",
            "deployments",
            "deployment",
            "Deployment",
            true,
        );
        assert_eq!(counted_names(&deploy), ["count/deployments.apps"]);
        let mut m = BTreeMap::new();
        m.insert("pods".to_string(), "2".to_string());
        m.insert("count/pods".to_string(), "2".to_string());
        assert_eq!(pretty(&m), "count/pods=2,pods=2");
    }
}
