//! Checks a WebApp before anything is built from it.
//!
//! The CRD's schema already makes the API server reject most bad specs
//! (an empty image, replicas outside 0..=100, a port outside 1..=65535),
//! but the reconcile does not rely on it: an object can predate a schema
//! change, a server can run without validation (a test fixture), and some
//! rules are not expressible in the schema (the name must also be a valid
//! Service name; config keys must be valid ConfigMap keys). A WebApp that
//! fails here is reported in its status and nothing is built from it: what
//! its last valid spec built keeps running. Nothing panics.

use std::fmt;

use kube::ResourceExt;

use crate::resource::{MAX_REPLICAS, WebApp};

/// Why a WebApp cannot be realised: every problem found, each as
/// `field: message` in the style of the API server's field errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InvalidSpec {
    problems: Vec<String>,
}

impl InvalidSpec {
    /// The problems, one per field.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for InvalidSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("; "))
    }
}

/// Checks everything the children will be built from.
///
/// # Errors
/// [`InvalidSpec`] listing every problem.
pub fn validate(app: &WebApp) -> Result<(), InvalidSpec> {
    let mut problems = Vec::new();
    let name = app.name_any();
    if !is_dns1035_label(&name) {
        problems.push(format!(
            "metadata.name: Invalid value: {name:?}: the Service needs a DNS-1035 label \
             (at most 63 lower case alphanumeric characters or '-', starting with a letter \
             and ending with an alphanumeric character)"
        ));
    }
    let spec = &app.spec;
    if spec.image.trim().is_empty() {
        problems.push("spec.image: Required value".to_owned());
    } else if spec.image.chars().any(char::is_whitespace) {
        problems.push(format!(
            "spec.image: Invalid value: {:?}: must not contain whitespace",
            spec.image
        ));
    }
    if !(0..=MAX_REPLICAS).contains(&spec.replicas) {
        problems.push(format!(
            "spec.replicas: Invalid value: {}: must be between 0 and {MAX_REPLICAS}, inclusive",
            spec.replicas
        ));
    }
    if !(1..=65535).contains(&spec.port) {
        problems.push(format!(
            "spec.port: Invalid value: {}: must be between 1 and 65535, inclusive",
            spec.port
        ));
    }
    for key in spec.config.iter().flat_map(|c| c.keys()) {
        if !is_config_key(key) {
            problems.push(format!(
                "spec.config[{key:?}]: Invalid value: {key:?}: a valid config key must consist \
                 of at most 253 alphanumeric characters, '-', '_' or '.', and not be '.' or '..'"
            ));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(InvalidSpec { problems }),
    }
}

/// RFC 1035 label, as Kubernetes requires of Service names.
fn is_dns1035_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// A ConfigMap data key (Kubernetes' `IsConfigMapKey`).
fn is_config_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::WebAppSpec;

    fn app(name: &str, spec: WebAppSpec) -> WebApp {
        WebApp::new(name, spec)
    }

    fn good() -> WebAppSpec {
        WebAppSpec {
            image: "nginx:1.27".into(),
            replicas: 2,
            port: 8080,
            config: Some([("index.html".to_string(), "hi".to_string())].into()),
        }
    }

    #[test]
    fn accepts_a_good_spec() {
        assert_eq!(validate(&app("web", good())), Ok(()));
        assert_eq!(
            validate(&app(
                "w",
                WebAppSpec {
                    replicas: 0,
                    port: 65535,
                    ..good()
                }
            )),
            Ok(())
        );
    }

    #[test]
    fn reports_every_problem_with_its_field() {
        let spec = WebAppSpec {
            image: " ".into(),
            replicas: 101,
            port: 0,
            config: Some([("a/b".to_string(), String::new())].into()),
        };
        let err = validate(&app("Web.App", spec)).unwrap_err();
        let fields: Vec<_> = err
            .problems()
            .iter()
            .map(|p| p.split(':').next().unwrap())
            .collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "spec.image",
                "spec.replicas",
                "spec.port",
                "spec.config[\"a/b\"]"
            ]
        );
        assert!(
            err.to_string().contains("spec.image: Required value"),
            "{err}"
        );
    }

    #[test]
    fn names_and_keys() {
        assert!(is_dns1035_label("a"));
        assert!(is_dns1035_label(&"a".repeat(63)));
        for bad in ["", "1a", "a-", "A", "a.b", &"a".repeat(64)] {
            assert!(!is_dns1035_label(bad), "{bad:?}");
        }
        assert!(is_config_key("app.conf"));
        assert!(is_config_key("..a"));
        for bad in ["", ".", "..", "a b", "a/b", &"k".repeat(254)] {
            assert!(!is_config_key(bad), "{bad:?}");
        }
        let tab = WebAppSpec {
            image: "nginx\t1".into(),
            ..good()
        };
        assert!(
            validate(&app("web", tab))
                .unwrap_err()
                .to_string()
                .contains("whitespace")
        );
    }
}
