//! Queue keys: `namespace/name`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;

/// The queue key of an object: `namespace/name`.
pub fn object_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The expectations key of a pod: `namespace/name`.
pub(crate) fn pod_key(pod: &Arc<Pod>) -> String {
    object_key(pod.as_ref())
}

/// Splits `namespace/name`; `None` if the key has not exactly one `/` or an
/// empty name.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    let (namespace, name) = key.split_once('/')?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_key_accepts_only_namespace_slash_name() {
        assert_eq!(split_key("default/web"), Some(("default", "web")));
        assert_eq!(split_key("web"), None);
        assert_eq!(split_key("default/"), None);
        assert_eq!(split_key("a/b/c"), None);
    }
}
