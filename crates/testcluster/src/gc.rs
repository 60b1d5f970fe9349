//! Background garbage collection: dependents whose owners are all gone,
//! foreground and orphan deletion, and namespace teardown.

use std::sync::Arc;

use serde_json::Value;

use crate::ops::{self, Api, DeleteOpts};
use crate::resources::{NAMESPACES, RESOURCES};
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
    for resource in 0..RESOURCES.len() {
        let (items, _) = api.store.list(resource, None, None);
        for item in items {
            examine(api, resource, &item);
        }
    }
}

fn handle(api: &Api, event: &Event) {
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
    if RESOURCES[event.resource].namespaced
        && !meta.namespace.is_empty()
        && let Some(n) = api
            .store
            .get(NAMESPACES, &(String::new(), meta.namespace.to_string()))
    {
        examine(api, NAMESPACES, &n);
    }
}

/// Bring one object in line with its owners and its own deletion state.
fn examine(api: &Api, resource: usize, obj: &Stored) {
    let meta = &obj.summary;
    let key = Api::key(resource, &meta.namespace, &meta.name);
    let terminating = meta.terminating;
    if resource == NAMESPACES {
        if terminating {
            finish_namespace(api, &key.1);
        }
        return;
    }
    if !meta.owners.is_empty() && !terminating {
        let all_gone = meta
            .owners
            .iter()
            .all(|r| r.known_kind && api.store.locate_uid(&r.uid).is_none());
        if all_gone {
            let _ = api.delete(resource, &key.0, &key.1, &DeleteOpts::default());
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
            let _ = api.delete(dep_resource, &dep_key.0, &dep_key.1, &opts);
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
        {
            let _ = api.delete(resource, &key.0, &key.1, &DeleteOpts::default());
        }
    }
}
