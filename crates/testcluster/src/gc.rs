//! Background garbage collection: dependents whose owners are all gone,
//! foreground and orphan deletion, and namespace teardown.

use std::sync::Arc;

use serde_json::Value;

use crate::kinds::NAMESPACES;
use crate::ops::{self, Api, DeleteOpts};
use crate::resources::ResourceId;
use crate::store::{Event, EventType, Stored};

/// Follow the store's change history forever, reacting to each change.
pub(crate) async fn run(api: Arc<Api>) {
    let mut changes = api.store.subscribe();
    let mut cursor = api.store.current_rv();
    full_scan(&api);
    loop {
        changes.borrow_and_update();
        match api.store.events_after(cursor, 1024) {
            Ok(events) if events.is_empty() => {
                if changes.changed().await.is_err() {
                    return;
                }
            }
            Ok(events) => {
                for event in events {
                    cursor = event.rv;
                    handle(&api, &event);
                }
                tokio::task::yield_now().await;
            }
            Err(_) => {
                // We fell behind the kept history: look at everything.
                cursor = api.store.current_rv();
                full_scan(&api);
            }
        }
    }
}

fn full_scan(api: &Api) {
    let ids: Vec<ResourceId> = api
        .registry
        .snapshot()
        .all()
        .iter()
        .filter(|d| d.storage == d.id)
        .map(|d| d.id)
        .collect();
    for resource in ids {
        let (items, _) = api.store.list(resource, None, None);
        for item in items {
            examine(api, resource, &item);
        }
    }
}

fn handle(api: &Api, event: &Event) {
    api.quotas.refresh(api, &event.key.0);
    let obj = &event.object;
    if event.kind != EventType::Deleted {
        examine(api, event.resource, obj);
        return;
    }
    let meta = &obj.summary;
    if !meta.uid.is_empty() {
        for (resource, key) in api.store.dependents_of(&meta.uid) {
            if let Some(dep) = api.store.get(resource, &key) {
                examine(api, resource, &dep);
            }
        }
    }
    // A dependent went away: an owner in foreground deletion may be done.
    for owner in meta.owners.iter() {
        if let Some((resource, key)) = api.store.locate_uid(&owner.uid)
            && let Some(o) = api.store.get(resource, &key)
        {
            examine(api, resource, &o);
        }
    }
    if !meta.namespace.is_empty()
        && let Some(n) = api
            .store
            .get(NAMESPACES, &(String::new(), meta.namespace.to_string()))
    {
        examine(api, NAMESPACES, &n);
    }
}

/// What the collector and the namespace teardown delete with, as
/// kube-controller-manager does: background propagation whatever the
/// type's default.
fn background() -> DeleteOpts {
    DeleteOpts {
        propagation: Some("Background".into()),
        ..DeleteOpts::default()
    }
}

/// Bring one object in line with its owners and its own deletion state.
fn examine(api: &Api, resource: ResourceId, obj: &Stored) {
    let meta = &obj.summary;
    // Cluster-scoped objects have an empty namespace: this is their key.
    let key = (meta.namespace.to_string(), meta.name.to_string());
    let terminating = meta.terminating;
    if resource == NAMESPACES {
        if terminating {
            finish_namespace(api, &key.1);
        }
        return;
    }
    if !meta.owners.is_empty() && !terminating {
        let snapshot = api.registry.snapshot();
        let all_gone = meta.owners.iter().all(|r| {
            snapshot.by_kind(&r.api_version, &r.kind).is_some()
                && api.store.locate_uid(&r.uid).is_none()
        });
        if all_gone && let Ok(def) = api.def(resource) {
            let _ = api.delete(&def, &key.0, &key.1, &background());
            return;
        }
    }
    if !terminating {
        return;
    }
    if meta.uid.is_empty() {
        return;
    }
    let uid = meta.uid.to_string();
    if meta.has_finalizer("orphan") {
        for (dep_resource, dep_key) in api.store.dependents_of(&uid) {
            let _ = api.internal_update(dep_resource, &dep_key, |v| {
                if let Some(list) = v
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    list.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
                    if list.is_empty()
                        && let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut)
                    {
                        meta.remove("ownerReferences");
                    }
                }
            });
        }
        let _ = api.internal_update(resource, &key, |v| ops::without_finalizer(v, "orphan"));
    } else if meta.has_finalizer("foregroundDeletion") {
        let dependents = api.store.dependents_of(&uid);
        if dependents.is_empty() {
            let _ = api.internal_update(resource, &key, |v| {
                ops::without_finalizer(v, "foregroundDeletion")
            });
            return;
        }
        for (dep_resource, dep_key) in dependents {
            let opts = DeleteOpts {
                propagation: Some("Foreground".into()),
                ..DeleteOpts::default()
            };
            if let Ok(def) = api.def(dep_resource) {
                let _ = api.delete(&def, &dep_key.0, &dep_key.1, &opts);
            }
        }
    }
}

fn finish_namespace(api: &Api, name: &str) {
    let contents = api.store.namespace_contents(name);
    if contents.is_empty() {
        api.remove(NAMESPACES, &(String::new(), name.to_string()));
        return;
    }
    for (resource, key) in contents {
        if let Some(obj) = api.store.get(resource, &key)
            && !obj.summary.terminating
            && let Ok(def) = api.def(resource)
        {
            let _ = api.delete(&def, &key.0, &key.1, &background());
        }
    }
}
