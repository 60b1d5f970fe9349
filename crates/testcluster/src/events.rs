//! One event store behind two APIs: events are stored as core/v1 `Event`s
//! and served as `events.k8s.io/v1` `Event`s through this conversion, the
//! one kube-apiserver does (pkg/apis/events/v1/conversion.go): `regarding`
//! is `involvedObject`, `note` is `message`, `deprecatedSource` is
//! `source`, `deprecatedFirstTimestamp`/`deprecatedLastTimestamp`/
//! `deprecatedCount` are `firstTimestamp`/`lastTimestamp`/`count`, and
//! `reportingController` is core's `reportingComponent`; every other field
//! (`eventTime`, `series`, `reportingInstance`, `action`, `reason`,
//! `related`, `type`, metadata) has the same name in both.

use serde_json::{Map, Value};

use crate::resources::Conversion;

/// (events.k8s.io/v1 field, core/v1 field) for the fields whose names differ.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// The `events.k8s.io/v1` view of core/v1 events.
#[derive(Debug)]
pub(crate) struct EventsV1;

fn rename(obj: Value, to_stored: bool, api_version: &str) -> Value {
    let Value::Object(map) = obj else { return obj };
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        let key = RENAMED
            .iter()
            .find(|(view, core)| if to_stored { *view == k } else { *core == k })
            .map_or(k.clone(), |(view, core)| {
                if to_stored { core } else { view }.to_string()
            });
        out.insert(key, v);
    }
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    out.insert("kind".into(), Value::String("Event".into()));
    Value::Object(out)
}

impl Conversion for EventsV1 {
    fn to_view(&self, stored: Value) -> Value {
        rename(stored, false, "events.k8s.io/v1")
    }

    fn to_stored(&self, view: Value) -> Value {
        rename(view, true, "v1")
    }

    fn stored_field(&self, path: &[String]) -> Vec<String> {
        let mut out = path.to_vec();
        if let Some(first) = out.first_mut()
            && let Some((_, core)) = RENAMED.iter().find(|(view, _)| view == first)
        {
            *first = (*core).to_string();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_map_both_ways() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Pod", "name": "p"},
            "note": "pulled", "reason": "Pulled", "type": "Normal",
            "reportingController": "kubelet", "reportingInstance": "node-1",
            "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Pull",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
            "deprecatedCount": 3, "deprecatedSource": {"component": "kubelet"},
        });
        let core = EventsV1.to_stored(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "pulled");
        assert_eq!(core["reportingComponent"], "kubelet");
        assert_eq!(core["source"]["component"], "kubelet");
        assert_eq!(core["count"], 3);
        assert_eq!(core["series"]["count"], 2);
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
        assert_eq!(EventsV1.to_view(core), v1);
        assert_eq!(
            EventsV1.stored_field(&["regarding".into(), "name".into()]),
            ["involvedObject", "name"]
        );
    }
}
