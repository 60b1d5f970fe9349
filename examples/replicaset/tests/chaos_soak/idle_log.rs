//! What changed in the cluster during the idle window: every change to a
//! ReplicaSet, ReplicationController or pod, with the fields it changed,
//! so a hot-loop violation says which owners were written and why.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as WallInstant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;
use tokio::task::JoinHandle;

/// One change seen in the window.
struct Change {
    /// Paused (virtual) time since the window opened.
    virtual_at: Duration,
    /// Wall-clock time since the window opened.
    wall_at: Duration,
    what: String,
    fields: Vec<String>,
}

/// Watches the namespace from the moment it is started.
pub(crate) struct IdleLog {
    changes: Arc<Mutex<Vec<Change>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl IdleLog {
    /// Lists the owners and pods of `namespace` and watches them from
    /// there on through `client` (which should be one the fault injector
    /// leaves alone and the request counters ignore).
    pub(crate) async fn start(
        client: &kube::Client,
        namespace: &str,
    ) -> Result<IdleLog, kube::Error> {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let (virtual_start, wall_start) = (tokio::time::Instant::now(), WallInstant::now());
        let mut tasks = Vec::new();
        for (short, resource) in [
            ("rs", ApiResource::erase::<ReplicaSet>(&())),
            ("rc", ApiResource::erase::<ReplicationController>(&())),
            ("pod", ApiResource::erase::<Pod>(&())),
        ] {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &resource);
            let list = api.list(&ListParams::default()).await?;
            let mut last: BTreeMap<String, Value> = list
                .items
                .into_iter()
                .map(|o| (o.metadata.name.clone().unwrap_or_default(), to_value(&o)))
                .collect();
            let rv = list.metadata.resource_version.unwrap_or_default();
            let mut stream = api.watch(&WatchParams::default(), &rv).await?.boxed();
            let changes = Arc::clone(&changes);
            tasks.push(tokio::spawn(async move {
                while let Some(Ok(event)) = stream.next().await {
                    let (verb, obj) = match event {
                        WatchEvent::Added(o) => ("added", o),
                        WatchEvent::Modified(o) => ("modified", o),
                        WatchEvent::Deleted(o) => ("deleted", o),
                        WatchEvent::Bookmark(_) => continue,
                        WatchEvent::Error(e) => {
                            changes.lock().unwrap().push(Change {
                                virtual_at: virtual_start.elapsed(),
                                wall_at: wall_start.elapsed(),
                                what: format!("{short} watch"),
                                fields: vec![format!("error: {e}")],
                            });
                            break;
                        }
                    };
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    let new = to_value(&obj);
                    let fields = match (verb, last.get(&name)) {
                        ("modified", Some(old)) => diff(old, &new),
                        _ => Vec::new(),
                    };
                    if verb == "deleted" {
                        last.remove(&name);
                    } else {
                        last.insert(name.clone(), new);
                    }
                    changes.lock().unwrap().push(Change {
                        virtual_at: virtual_start.elapsed(),
                        wall_at: wall_start.elapsed(),
                        what: format!("{short}/{name} {verb}"),
                        fields,
                    });
                }
            }));
        }
        Ok(IdleLog { changes, tasks })
    }

    /// Stops watching; one line per change seen.
    pub(crate) fn finish(self) -> Vec<String> {
        for task in &self.tasks {
            task.abort();
        }
        let changes = std::mem::take(&mut *self.changes.lock().unwrap());
        changes
            .into_iter()
            .map(|c| {
                format!(
                    "+{:.3}s virtual (+{:.3}s wall) {}: {}",
                    c.virtual_at.as_secs_f64(),
                    c.wall_at.as_secs_f64(),
                    c.what,
                    c.fields.join("; ")
                )
            })
            .collect()
    }
}

fn to_value(obj: &DynamicObject) -> Value {
    let mut v = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        meta.remove("resourceVersion");
    }
    v
}

/// `path: old -> new` for every leaf that differs; lists of objects with a
/// `type` (conditions) are compared by type.
fn diff(old: &Value, new: &Value) -> Vec<String> {
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten("", old, &mut a);
    flatten("", new, &mut b);
    let mut out = Vec::new();
    for (path, value) in &b {
        match a.get(path) {
            Some(before) if before == value => {}
            Some(before) => out.push(format!("{path}: {before} -> {value}")),
            None => out.push(format!("{path}: (none) -> {value}")),
        }
    }
    for (path, before) in &a {
        if !b.contains_key(path) {
            out.push(format!("{path}: {before} -> (none)"));
        }
    }
    out
}

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&join(k), v, out);
            }
        }
        Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| i.get("type").is_some()) =>
        {
            for item in items {
                let ty = item["type"].as_str().unwrap_or_default();
                flatten(&join(&format!("[{ty}]")), item, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}
