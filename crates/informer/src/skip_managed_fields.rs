//! Decoding an object without its `metadata.managedFields`: the field is
//! skipped in the JSON, unread, instead of decoded and then dropped
//! (the decode behind [`Transform::drop_managed_fields`]).
//!
//! Generic over the object type: the object's own `Deserialize` runs, but
//! it reads its top-level map through an adapter that, under the key
//! `metadata`, hands the metadata's `Deserialize` a map whose
//! `managedFields` key reads as an unknown field. k8s-openapi's types and
//! `kube`'s `ObjectMeta` skip unknown fields (serde's `IgnoredAny`), which
//! for JSON walks over the value without building anything.
//!
//! [`Transform::drop_managed_fields`]: crate::Transform::drop_managed_fields

use std::cell::Cell;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, forward_to_deserialize_any};

use crate::decode::Shape;

/// The key the metadata's decoder sees instead of `managedFields`: a name
/// no object type has, so its value is skipped as an unknown field.
const SKIPPED_KEY: &str = "";

/// `K` decoded from JSON with `metadata.managedFields` skipped unread; for
/// every object, what decoding `K` and setting `managedFields` to `None`
/// gives (for types that, like every Kubernetes type, skip unknown fields).
pub(crate) struct WithoutManagedFields<K>(K);

impl<'de, K: Deserialize<'de>> Deserialize<'de> for WithoutManagedFields<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Level {
            inner: deserializer,
            level: Where::Object,
        })
        .map(Self)
    }
}

impl<K: DeserializeOwned> Shape<K> for WithoutManagedFields<K> {
    fn into_object(self) -> K {
        self.0
    }
}

/// Which map an adapter stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    /// The object: its `metadata` value is read through the adapter.
    Object,
    /// The object's metadata: its `managedFields` key is hidden.
    Metadata,
}

/// A deserializer whose maps are read through [`LevelMap`].
struct Level<D> {
    inner: D,
    level: Where,
}

macro_rules! wrap_visitor {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Self::Error> {
                self.inner.$method($($arg,)* LevelVisitor { inner: visitor, level: self.level })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Level<D> {
    type Error = D::Error;

    wrap_visitor! {
        deserialize_any();
        deserialize_map();
        deserialize_option();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
    }

    // Nothing else holds the maps this adapter is about; the rest goes
    // through `deserialize_any`, which JSON answers the same way.
    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct enum identifier ignored_any
    }
}

/// A visitor that reads a map through [`LevelMap`].
struct LevelVisitor<V> {
    inner: V,
    level: Where,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for LevelVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_map(LevelMap {
            inner: map,
            level: self.level,
            metadata_next: Cell::new(false),
        })
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_some(Level {
            inner: d,
            level: self.level,
        })
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.inner.visit_bool(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.inner.visit_i64(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.inner.visit_u64(v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.inner.visit_f64(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.inner.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        self.inner.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.inner.visit_string(v)
    }
}

/// A map of the object (whose `metadata` value it reads through a
/// [`Level`] for the metadata) or of the metadata (whose `managedFields`
/// key it hides).
struct LevelMap<A> {
    inner: A,
    level: Where,
    /// The key just read was the object's `metadata`.
    metadata_next: Cell<bool>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for LevelMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        self.metadata_next.set(false);
        self.inner.next_key_seed(KeySeed {
            inner: seed,
            level: self.level,
            metadata: &self.metadata_next,
        })
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        if self.metadata_next.get() {
            self.inner.next_value_seed(MetadataSeed(seed))
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// The object's metadata value, read through a [`Level`] for the metadata.
struct MetadataSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Level {
            inner: d,
            level: Where::Metadata,
        })
    }
}

/// A map key, looked at on its way to the type's own key decoder.
struct KeySeed<'a, S> {
    inner: S,
    level: Where,
    metadata: &'a Cell<bool>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(KeyDeserializer {
            inner: d,
            level: self.level,
            metadata: self.metadata,
        })
    }
}

struct KeyDeserializer<'a, D> {
    inner: D,
    level: Where,
    metadata: &'a Cell<bool>,
}

macro_rules! look_at_key {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.inner.$method(KeyVisitor { inner: visitor, level: self.level, metadata: self.metadata })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDeserializer<'_, D> {
    type Error = D::Error;

    look_at_key! { deserialize_any deserialize_identifier deserialize_str deserialize_string }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum ignored_any
    }
}

struct KeyVisitor<'a, V> {
    inner: V,
    level: Where,
    metadata: &'a Cell<bool>,
}

impl<V> KeyVisitor<'_, V> {
    /// Notes the object's `metadata` key; hides the metadata's
    /// `managedFields` key. `None`: pass the key on as it is.
    fn look(&self, key: &str) -> Option<&'static str> {
        match self.level {
            Where::Object => {
                self.metadata.set(key == "metadata");
                None
            }
            Where::Metadata => (key == "managedFields").then_some(SKIPPED_KEY),
        }
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match self.look(v) {
            Some(hidden) => self.inner.visit_str(hidden),
            None => self.inner.visit_str(v),
        }
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        match self.look(v) {
            Some(hidden) => self.inner.visit_str(hidden),
            None => self.inner.visit_borrowed_str(v),
        }
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        match self.look(&v) {
            Some(hidden) => self.inner.visit_str(hidden),
            None => self.inner.visit_string(v),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.inner.visit_u64(v)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        self.inner.visit_bytes(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;

    const RS: &str = r#"{
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
            "labels": {"app": "x", "managedFields": "a label, kept"},
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}],
            "annotations": {"k": "v"}
        },
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}},
                 "template": {"metadata": {"labels": {"app": "x"}, "managedFields": []}}},
        "status": {"replicas": 2, "readyReplicas": 1, "observedGeneration": 4}
    }"#;

    #[test]
    fn gives_what_a_full_decode_without_managed_fields_gives() {
        let mut full: ReplicaSet = serde_json::from_str(RS).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        let skipped: ReplicaSet = serde_json::from_str::<WithoutManagedFields<ReplicaSet>>(RS)
            .unwrap()
            .into_object();
        assert_eq!(skipped, full);
        // Only the object's own metadata loses the key: a label of that
        // name stays.
        assert_eq!(
            skipped.metadata.labels.unwrap()["managedFields"],
            "a label, kept"
        );
    }

    #[test]
    fn a_bad_managed_fields_value_is_not_read() {
        let json =
            r#"{"metadata": {"name": "p", "managedFields": 42}, "spec": {"containers": []}}"#;
        assert!(serde_json::from_str::<Pod>(json).is_err());
        let pod: Pod = serde_json::from_str::<WithoutManagedFields<Pod>>(json)
            .unwrap()
            .into_object();
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert!(pod.metadata.managed_fields.is_none());
    }

    #[test]
    fn other_errors_are_still_errors() {
        let json = r#"{"metadata": {"name": "a"}, "spec": {"replicas": "three", "selector": {}}}"#;
        assert!(serde_json::from_str::<WithoutManagedFields<ReplicaSet>>(json).is_err());
        assert!(serde_json::from_str::<WithoutManagedFields<ReplicaSet>>("[1]").is_err());
    }
}
