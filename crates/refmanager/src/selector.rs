//! Label selectors compiled for matching.
//!
//! A [`Selector`] is built once per sync from an owner's `spec.selector`
//! (a [`LabelSelector`] for ReplicaSets, a plain label map for
//! ReplicationControllers) and then tested against every candidate's labels.
//! Building it validates the selector the way the API machinery does, so a
//! malformed selector becomes a [`SelectorError`] instead of a silent
//! "matches nothing" or a panic.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::label_syntax::{validate_key, validate_value};

/// Why a label selector could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// A `matchExpressions` entry used an operator other than `In`, `NotIn`,
    /// `Exists` or `DoesNotExist` (operators are case-sensitive).
    #[error("{operator:?} is not a valid label selector operator (key {key:?})")]
    UnknownOperator {
        /// The requirement's key.
        key: String,
        /// The operator as written.
        operator: String,
    },
    /// An `In` or `NotIn` requirement had no values.
    #[error("the {operator} operator on key {key:?} needs at least one value")]
    MissingValues {
        /// The requirement's key.
        key: String,
        /// The operator (`In` or `NotIn`).
        operator: Operator,
    },
    /// An `Exists` or `DoesNotExist` requirement carried values.
    #[error("the {operator} operator on key {key:?} takes no values")]
    UnexpectedValues {
        /// The requirement's key.
        key: String,
        /// The operator (`Exists` or `DoesNotExist`).
        operator: Operator,
    },
    /// A key is not a valid label key (`[prefix/]name`).
    #[error("invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// The key as written.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value is not a valid label value.
    #[error("invalid label value {value:?} for key {key:?}: {reason}")]
    InvalidValue {
        /// The key the value belongs to.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// How a single requirement compares a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Operator {
    /// The label is present and equals the single value (from `matchLabels`).
    Equals,
    /// The label is present and its value is one of the values.
    In,
    /// The label is absent, or its value is none of the values.
    NotIn,
    /// The label is present, whatever its value.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operator::Equals => "Equals",
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inner {
    /// Matches no label set at all.
    Nothing,
    /// Matches a label set when every requirement does; empty = everything.
    All(Vec<Requirement>),
}

/// A validated label selector, ready to match label sets.
///
/// Semantics follow the Kubernetes API machinery:
///
/// | built from | matches |
/// |---|---|
/// | [`Selector::from_label_selector`] with no `matchLabels` and no `matchExpressions` | **everything** |
/// | [`Selector::from_optional_label_selector`] with `None` | nothing |
/// | [`Selector::from_map`] with an empty map | **nothing** (see below) |
/// | [`Selector::everything`] / [`Selector::nothing`] | everything / nothing |
///
/// An empty map selector matches nothing because that is how the
/// ReplicationController lister treats it ("should match nothing, not
/// everything"): a claim pass with a match-everything selector would adopt
/// every orphan in the namespace. The API server rejects empty selectors on
/// ReplicaSets and ReplicationControllers, so neither case arises with
/// objects read from a real cluster; controllers that want to refuse an
/// empty `LabelSelector` explicitly can check [`Selector::is_everything`].
///
/// ```
/// use std::collections::BTreeMap;
/// use ctrlkit_refmanager::Selector;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
///
/// let selector = Selector::from_label_selector(&LabelSelector {
///     match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
///     match_expressions: Some(vec![LabelSelectorRequirement {
///         key: "tier".into(),
///         operator: "NotIn".into(),
///         values: Some(vec!["canary".into()]),
///     }]),
/// })?;
/// let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
/// assert!(selector.matches(&labels));
/// assert_eq!(selector.to_string(), "app=web,tier notin (canary)");
/// # Ok::<(), ctrlkit_refmanager::SelectorError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    inner: Inner,
}

impl Selector {
    /// A selector that matches every label set, including an empty one.
    pub fn everything() -> Self {
        Selector {
            inner: Inner::All(Vec::new()),
        }
    }

    /// A selector that matches no label set.
    pub fn nothing() -> Self {
        Selector {
            inner: Inner::Nothing,
        }
    }

    /// Compiles a `metav1.LabelSelector`: every `matchLabels` entry becomes an
    /// equality requirement and every `matchExpressions` entry an `In`,
    /// `NotIn`, `Exists` or `DoesNotExist` requirement; all must hold.
    ///
    /// A selector with no requirements at all matches everything, as
    /// upstream's `LabelSelectorAsSelector` does.
    ///
    /// # Errors
    /// [`SelectorError`] for an unknown operator, `In`/`NotIn` without
    /// values, `Exists`/`DoesNotExist` with values, or a syntactically
    /// invalid key or value.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(equality(key, value)?);
        }
        for expr in selector.match_expressions.iter().flatten() {
            let values = expr.values.as_deref().unwrap_or_default();
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::UnknownOperator {
                        key: expr.key.clone(),
                        operator: other.to_owned(),
                    });
                }
            };
            requirements.push(requirement(&expr.key, operator, values)?);
        }
        Ok(Self::from_requirements(requirements))
    }

    /// Like [`Selector::from_label_selector`], with a missing selector
    /// (`None`) matching nothing, as upstream does for a nil selector.
    ///
    /// # Errors
    /// As [`Selector::from_label_selector`].
    pub fn from_optional_label_selector(
        selector: Option<&LabelSelector>,
    ) -> Result<Self, SelectorError> {
        match selector {
            Some(selector) => Self::from_label_selector(selector),
            None => Ok(Self::nothing()),
        }
    }

    /// Compiles a plain equality selector such as a ReplicationController's
    /// `spec.selector`: every entry must be present with that exact value.
    ///
    /// An **empty map matches nothing** (see the type-level docs).
    ///
    /// # Errors
    /// [`SelectorError::InvalidKey`] or [`SelectorError::InvalidValue`] for
    /// an entry that is not a valid label.
    pub fn from_map(selector: &BTreeMap<String, String>) -> Result<Self, SelectorError> {
        if selector.is_empty() {
            return Ok(Self::nothing());
        }
        let requirements = selector
            .iter()
            .map(|(key, value)| equality(key, value))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::from_requirements(requirements))
    }

    fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        // Sorted so `Display` is deterministic, as upstream's String() is.
        requirements.sort_by(|a, b| a.key.cmp(&b.key).then(a.operator.cmp(&b.operator)));
        Selector {
            inner: Inner::All(requirements),
        }
    }

    /// Whether the label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.inner {
            Inner::Nothing => false,
            Inner::All(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// Whether the object's labels satisfy the selector; an object without
    /// labels is treated as having an empty label set.
    pub fn matches_meta(&self, meta: &ObjectMeta) -> bool {
        match &meta.labels {
            Some(labels) => self.matches(labels),
            None => self.matches(&BTreeMap::new()),
        }
    }

    /// Whether this selector has no requirements and so matches everything.
    pub fn is_everything(&self) -> bool {
        matches!(&self.inner, Inner::All(r) if r.is_empty())
    }

    /// Whether this selector matches nothing by construction.
    pub fn is_nothing(&self) -> bool {
        matches!(self.inner, Inner::Nothing)
    }

    /// The labels every matching label set must carry with exactly this
    /// value, as `(key, value)` pairs: the `matchLabels` entries (or map
    /// entries) and `In` requirements with a single value.
    ///
    /// Guarantee: if [`Selector::matches`] accepts a label set, that set
    /// contains every returned pair. So a lookup may narrow its candidates
    /// to objects carrying any one of these labels without missing a match.
    /// The converse does not hold (other requirements still apply), and a
    /// selector with only set-based requirements (`In` with several values,
    /// `NotIn`, `Exists`, `DoesNotExist`) returns none. A match-nothing
    /// selector also returns none.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use ctrlkit_refmanager::Selector;
    ///
    /// let selector = Selector::from_map(&BTreeMap::from([
    ///     ("app".to_string(), "web".to_string()),
    ///     ("tier".to_string(), "fe".to_string()),
    /// ]))?;
    /// let pairs: Vec<_> = selector.equality_requirements().collect();
    /// assert_eq!(pairs, [("app", "web"), ("tier", "fe")]);
    /// # Ok::<(), ctrlkit_refmanager::SelectorError>(())
    /// ```
    pub fn equality_requirements(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let requirements = match &self.inner {
            Inner::Nothing => &[][..],
            Inner::All(requirements) => requirements.as_slice(),
        };
        requirements.iter().filter_map(|r| match r.operator {
            Operator::Equals | Operator::In if r.values.len() == 1 => {
                let value = r.values.first()?;
                Some((r.key.as_str(), value.as_str()))
            }
            _ => None,
        })
    }
}

fn equality(key: &str, value: &str) -> Result<Requirement, SelectorError> {
    requirement(
        key,
        Operator::Equals,
        std::slice::from_ref(&value.to_owned()),
    )
}

fn requirement(
    key: &str,
    operator: Operator,
    values: &[String],
) -> Result<Requirement, SelectorError> {
    validate_key(key).map_err(|reason| SelectorError::InvalidKey {
        key: key.to_owned(),
        reason,
    })?;
    match operator {
        Operator::Equals | Operator::In | Operator::NotIn => {
            if values.is_empty() {
                return Err(SelectorError::MissingValues {
                    key: key.to_owned(),
                    operator,
                });
            }
            for value in values {
                validate_value(value).map_err(|reason| SelectorError::InvalidValue {
                    key: key.to_owned(),
                    value: value.clone(),
                    reason,
                })?;
            }
        }
        Operator::Exists | Operator::DoesNotExist => {
            if !values.is_empty() {
                return Err(SelectorError::UnexpectedValues {
                    key: key.to_owned(),
                    operator,
                });
            }
        }
    }
    Ok(Requirement {
        key: key.to_owned(),
        operator,
        values: values.iter().cloned().collect(),
    })
}

/// Renders the selector in the `kubectl -l` syntax, e.g.
/// `app=web,tier in (a,b),!legacy`; a match-nothing selector renders as
/// `<none>` and a match-everything selector as the empty string.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let requirements = match &self.inner {
            Inner::Nothing => return f.write_str("<none>"),
            Inner::All(requirements) => requirements,
        };
        for (i, r) in requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let values = || r.values.iter().cloned().collect::<Vec<_>>().join(",");
            match r.operator {
                Operator::Equals => write!(f, "{}={}", r.key, values())?,
                Operator::In => write!(f, "{} in ({})", r.key, values())?,
                Operator::NotIn => write!(f, "{} notin ({})", r.key, values())?,
                Operator::Exists => f.write_str(&r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelector {
        LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
            }]),
        }
    }

    #[test]
    fn match_labels_require_exact_values() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(labels(&[("type", "production"), ("app", "web")])),
            match_expressions: None,
        })
        .unwrap();
        assert!(s.matches(&labels(&[
            ("type", "production"),
            ("app", "web"),
            ("x", "y")
        ])));
        assert!(!s.matches(&labels(&[("type", "production")])));
        assert!(!s.matches(&labels(&[("type", "testing"), ("app", "web")])));
    }

    #[test]
    fn operators_follow_api_semantics() {
        let in_ = Selector::from_label_selector(&expr("env", "In", Some(&["a", "b"]))).unwrap();
        assert!(in_.matches(&labels(&[("env", "b")])));
        assert!(!in_.matches(&labels(&[("env", "c")])));
        assert!(!in_.matches(&labels(&[])));

        let not_in =
            Selector::from_label_selector(&expr("env", "NotIn", Some(&["a", "b"]))).unwrap();
        assert!(!not_in.matches(&labels(&[("env", "a")])));
        assert!(not_in.matches(&labels(&[("env", "c")])));
        // NotIn is satisfied by an absent label.
        assert!(not_in.matches(&labels(&[])));

        let exists = Selector::from_label_selector(&expr("env", "Exists", None)).unwrap();
        assert!(exists.matches(&labels(&[("env", "")])));
        assert!(!exists.matches(&labels(&[])));

        let absent =
            Selector::from_label_selector(&expr("env", "DoesNotExist", Some(&[]))).unwrap();
        assert!(absent.matches(&labels(&[("other", "x")])));
        assert!(!absent.matches(&labels(&[("env", "x")])));
    }

    #[test]
    fn empty_label_selector_matches_everything_but_none_matches_nothing() {
        let s = Selector::from_label_selector(&LabelSelector::default()).unwrap();
        assert!(s.is_everything());
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("a", "b")])));

        let s = Selector::from_optional_label_selector(None).unwrap();
        assert!(s.is_nothing());
        assert!(!s.matches(&labels(&[])));
    }

    #[test]
    fn empty_map_selector_matches_nothing() {
        let s = Selector::from_map(&BTreeMap::new()).unwrap();
        assert!(s.is_nothing());
        assert!(!s.matches(&labels(&[("a", "b")])));
        assert!(!s.matches(&labels(&[])));

        let s = Selector::from_map(&labels(&[("foo", "bar")])).unwrap();
        assert!(s.matches(&labels(&[("foo", "bar"), ("x", "y")])));
        assert!(!s.matches(&labels(&[("foo", "baz")])));
    }

    #[test]
    fn invalid_selectors_are_typed_errors() {
        assert_eq!(
            Selector::from_label_selector(&expr("env", "in", Some(&["a"]))),
            Err(SelectorError::UnknownOperator {
                key: "env".into(),
                operator: "in".into()
            })
        );
        assert_eq!(
            Selector::from_label_selector(&expr("env", "Gt", Some(&["1"]))),
            Err(SelectorError::UnknownOperator {
                key: "env".into(),
                operator: "Gt".into()
            })
        );
        for op in ["In", "NotIn"] {
            assert!(matches!(
                Selector::from_label_selector(&expr("env", op, None)),
                Err(SelectorError::MissingValues { .. })
            ));
            assert!(matches!(
                Selector::from_label_selector(&expr("env", op, Some(&[]))),
                Err(SelectorError::MissingValues { .. })
            ));
        }
        for op in ["Exists", "DoesNotExist"] {
            assert!(matches!(
                Selector::from_label_selector(&expr("env", op, Some(&["x"]))),
                Err(SelectorError::UnexpectedValues { .. })
            ));
        }
        assert!(matches!(
            Selector::from_label_selector(&expr("bad key", "Exists", None)),
            Err(SelectorError::InvalidKey { .. })
        ));
        assert!(matches!(
            Selector::from_map(&labels(&[("app", "not valid!")])),
            Err(SelectorError::InvalidValue { .. })
        ));
        assert!(matches!(
            Selector::from_map(&labels(&[("", "x")])),
            Err(SelectorError::InvalidKey { .. })
        ));
    }

    #[test]
    fn equality_requirements_are_the_labels_every_match_carries() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["fe".into()]),
                },
                LabelSelectorRequirement {
                    key: "env".into(),
                    operator: "In".into(),
                    values: Some(vec!["a".into(), "b".into()]),
                },
                LabelSelectorRequirement {
                    key: "legacy".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        })
        .unwrap();
        let pairs: Vec<_> = s.equality_requirements().collect();
        assert_eq!(pairs, [("app", "web"), ("tier", "fe")]);
        let matching = labels(&[("app", "web"), ("tier", "fe"), ("env", "b")]);
        assert!(s.matches(&matching));
        for (k, v) in pairs {
            assert_eq!(matching.get(k).map(String::as_str), Some(v));
        }

        let set_based = Selector::from_label_selector(&expr("env", "NotIn", Some(&["a"]))).unwrap();
        assert_eq!(set_based.equality_requirements().count(), 0);
        assert_eq!(Selector::nothing().equality_requirements().count(), 0);
        assert_eq!(Selector::everything().equality_requirements().count(), 0);
    }

    #[test]
    fn display_is_sorted_kubectl_syntax() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(labels(&[("b", "1")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "a".into(),
                    operator: "In".into(),
                    values: Some(vec!["y".into(), "x".into()]),
                },
                LabelSelectorRequirement {
                    key: "c".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
                LabelSelectorRequirement {
                    key: "d".into(),
                    operator: "Exists".into(),
                    values: None,
                },
            ]),
        })
        .unwrap();
        assert_eq!(s.to_string(), "a in (x,y),b=1,!c,d");
        assert_eq!(Selector::nothing().to_string(), "<none>");
        assert_eq!(Selector::everything().to_string(), "");
    }
}
