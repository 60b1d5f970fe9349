//! Object keys: the `namespace/name` identity the store is keyed by.

use std::fmt;
use std::str::FromStr;

use kube::Resource;

/// Longest `namespace/name` [`ObjectKey::with_str`] formats on the stack;
/// a Kubernetes namespace (63) and most names fit.
const INLINE_KEY: usize = 128;

/// The identity of an object inside an informer's store: its namespace and
/// name.
///
/// Cluster-scoped objects have an empty namespace. The string form (via
/// [`Display`](fmt::Display)) is `namespace/name`, or just `name` for
/// cluster-scoped objects, which is the key format client-go's controllers
/// put into their workqueues; [`FromStr`] parses it back.
///
/// Keys carry no UID: an object deleted and re-created under the same name
/// has the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// A key for `name` in `namespace` (empty for cluster-scoped objects).
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of `obj`, from `metadata.namespace` and `metadata.name`.
    ///
    /// A missing name gives an empty name (objects read from the API always
    /// have one; only hand-built objects may lack it).
    pub fn from_object<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    /// Calls `f` with the string form of the key (its [`Display`](fmt::Display),
    /// `namespace/name` or `name`) without allocating for keys up to 128
    /// bytes: for looking the key up in maps keyed by that string on hot
    /// paths, where `to_string` would allocate each time.
    pub fn with_str<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        if self.namespace.is_empty() {
            return f(&self.name);
        }
        let (ns, name) = (self.namespace.as_bytes(), self.name.as_bytes());
        let len = ns.len() + 1 + name.len();
        let mut buf = [0u8; INLINE_KEY];
        if let Some(out) = buf.get_mut(..len) {
            out[..ns.len()].copy_from_slice(ns);
            out[ns.len()] = b'/';
            out[ns.len() + 1..].copy_from_slice(name);
            // Always valid: two `str`s joined by an ASCII byte.
            if let Ok(key) = std::str::from_utf8(out) {
                return f(key);
            }
        }
        f(&self.to_string())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.namespace.is_empty() {
            f.write_str(&self.namespace)?;
            f.write_str("/")?;
        }
        f.write_str(&self.name)
    }
}

/// The key's [`Display`](fmt::Display) form, built in the namespace's
/// buffer: one allocation fewer than `to_string`, for a caller that owns the
/// key and needs it as a `String`.
impl From<ObjectKey> for String {
    fn from(key: ObjectKey) -> Self {
        let ObjectKey {
            mut namespace,
            name,
        } = key;
        if namespace.is_empty() {
            return name;
        }
        namespace.reserve_exact(1 + name.len());
        namespace.push('/');
        namespace.push_str(&name);
        namespace
    }
}

/// Why a string is not a valid `namespace/name` or `name` key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid object key {key:?}: expected \"namespace/name\" or \"name\" with non-empty parts")]
pub struct ParseKeyError {
    /// The rejected input.
    pub key: String,
}

impl FromStr for ObjectKey {
    type Err = ParseKeyError;

    /// Parses `namespace/name` or `name`. Empty parts and more than one `/`
    /// are rejected.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseKeyError { key: s.to_owned() };
        let mut parts = s.split('/');
        let (namespace, name) = match (parts.next(), parts.next(), parts.next()) {
            (Some(name), None, None) => ("", name),
            (Some(ns), Some(name), None) if !ns.is_empty() => (ns, name),
            _ => return Err(bad()),
        };
        if name.is_empty() {
            return Err(bad());
        }
        Ok(Self::new(namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        let k = ObjectKey::new("ns", "a");
        assert_eq!(k.to_string(), "ns/a");
        assert_eq!("ns/a".parse::<ObjectKey>().unwrap(), k);
        let c = ObjectKey::new("", "node-1");
        assert_eq!(c.to_string(), "node-1");
        assert_eq!("node-1".parse::<ObjectKey>().unwrap(), c);
    }

    #[test]
    fn borrowed_and_owned_forms_match_display() {
        let long = "n".repeat(INLINE_KEY);
        for key in [
            ObjectKey::new("ns", "a"),
            ObjectKey::new("", "node-1"),
            ObjectKey::new("kube-system", "coredns-7db6d8ff4d-x2x9q"),
            ObjectKey::new("ns", long.as_str()),
            ObjectKey::new("ns", "é/ü"),
        ] {
            let shown = key.to_string();
            assert_eq!(key.with_str(str::to_owned), shown);
            assert_eq!(String::from(key), shown);
        }
    }

    #[test]
    fn parse_rejects_malformed_keys() {
        for bad in ["", "/", "ns/", "/a", "a/b/c"] {
            assert!(bad.parse::<ObjectKey>().is_err(), "{bad:?} accepted");
        }
    }
}
