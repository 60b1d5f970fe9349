//! How keys appear in spans and logs.

use std::fmt;

/// Writes a key into a span field or log line.
pub(crate) type KeyFormatter<T> = fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result;

pub(crate) fn debug_key<T: fmt::Debug>(key: &T, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt::Debug::fmt(key, f)
}

pub(crate) fn display_key<T: fmt::Display>(key: &T, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt::Display::fmt(key, f)
}

/// A key with its formatter, recorded lazily: nothing is formatted unless a
/// subscriber records the field.
pub(crate) struct KeyField<'a, T> {
    pub(crate) key: &'a T,
    pub(crate) format: KeyFormatter<T>,
}

impl<T> fmt::Display for KeyField<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.format)(self.key, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_format_with_debug_or_display() {
        let key = String::from("default/web");
        let debug = KeyField {
            key: &key,
            format: debug_key,
        };
        assert_eq!(debug.to_string(), "\"default/web\"");
        let display = KeyField {
            key: &key,
            format: display_key,
        };
        assert_eq!(display.to_string(), "default/web");
    }
}
