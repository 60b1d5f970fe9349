//! The `controller.kubernetes.io/pod-deletion-cost` annotation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use thiserror::Error;

/// The annotation through which users tell a controller which pods to delete
/// first when scaling down: lower cost goes first.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Why a `pod-deletion-cost` annotation could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {POD_DELETION_COST_ANNOTATION} value {value:?}: {reason}")]
pub struct InvalidDeletionCost {
    /// The annotation value as found.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Reads the deletion cost from a pod's annotations.
///
/// A missing annotation is cost 0. A present one must be a base-10 32-bit
/// integer written the way the API server's validation accepts: a leading
/// `-`, or exactly `0`, or a first digit `1`–`9` (so `+5`, `007` and the
/// empty string are rejected).
pub fn deletion_cost_from_annotations(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<i32, InvalidDeletionCost> {
    let Some(value) = annotations.and_then(|a| a.get(POD_DELETION_COST_ANNOTATION)) else {
        return Ok(0);
    };
    let invalid = |reason| InvalidDeletionCost {
        value: value.clone(),
        reason,
    };
    let well_formed = matches!(value.as_bytes(), [b'-', ..] | [b'0'] | [b'1'..=b'9', ..]);
    if !well_formed {
        return Err(invalid("must be an integer without a leading '+' or '0'"));
    }
    value
        .parse::<i32>()
        .map_err(|_| invalid("must be an integer within the 32-bit range"))
}

/// The pod's deletion cost, with an unreadable annotation counting as 0 (as
/// upstream's ranking does, so a typo never breaks scale-down).
pub fn pod_deletion_cost(pod: &Pod) -> i32 {
    deletion_cost_from_annotations(pod.metadata.annotations.as_ref()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &str) -> Result<i32, InvalidDeletionCost> {
        let a = BTreeMap::from([(POD_DELETION_COST_ANNOTATION.to_string(), v.to_string())]);
        deletion_cost_from_annotations(Some(&a))
    }

    #[test]
    fn parsing_follows_the_validation_rules() {
        let ok = [
            ("0", 0),
            ("10", 10),
            ("-10", -10),
            ("-0", 0),
            ("-007", -7),
            ("2147483647", i32::MAX),
            ("-2147483648", i32::MIN),
        ];
        for (v, want) in ok {
            assert_eq!(parse(v), Ok(want), "{v:?}");
        }
        let bad = [
            "",
            "+10",
            "008",
            "00",
            "2147483648",
            "-2147483649",
            "-",
            "1.5",
            "1e3",
            " 1",
            "1 ",
            "abc",
            "1_000",
            "٣",
        ];
        for v in bad {
            let err = parse(v).unwrap_err();
            assert_eq!(err.value, v);
            assert!(err.to_string().contains(POD_DELETION_COST_ANNOTATION));
        }
        assert_eq!(deletion_cost_from_annotations(None), Ok(0));
        assert_eq!(
            deletion_cost_from_annotations(Some(&BTreeMap::new())),
            Ok(0)
        );
    }

    #[test]
    fn malformed_cost_counts_as_zero_on_a_pod() {
        let mut pod = Pod::default();
        assert_eq!(pod_deletion_cost(&pod), 0);
        pod.metadata.annotations = Some(BTreeMap::from([(
            POD_DELETION_COST_ANNOTATION.to_string(),
            "+5".to_string(),
        )]));
        assert_eq!(pod_deletion_cost(&pod), 0);
        pod.metadata.annotations = Some(BTreeMap::from([(
            POD_DELETION_COST_ANNOTATION.to_string(),
            "-5".to_string(),
        )]));
        assert_eq!(pod_deletion_cost(&pod), -5);
    }
}
