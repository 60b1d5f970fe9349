//! Allocation-free access to nested JSON fields.

use serde_json::Value;

/// Field access by a fixed path of object keys. Unlike
/// [`Value::pointer`] it does not allocate, which matters on the hot paths
/// (every watch event is filtered per watcher).
pub(crate) trait At {
    /// The value at `path` (object keys, outermost first), if present.
    fn at(&self, path: &[&str]) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, path: &[&str]) -> Option<&Value> {
        let mut cur = self;
        for key in path {
            cur = cur.as_object()?.get(*key)?;
        }
        Some(cur)
    }
}
