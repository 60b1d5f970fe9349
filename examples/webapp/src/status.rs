//! The status a WebApp reports: `Ready`, `Progressing` and `Degraded`
//! conditions (`metav1.Condition`), `observedGeneration`, the ready pods
//! and the URL, computed from what the reconcile did and what the
//! Deployment reports.
//!
//! A Deployment's rollout is judged as `kubectl rollout status` judges it:
//! its controller has observed its generation; its `Progressing` condition
//! does not say `ProgressDeadlineExceeded`; every replica is updated, no
//! old replica is left and every updated replica is available.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use crate::compat::{Text, deployment_spec};
use crate::resource::{WebApp, WebAppStatus};
use crate::validate::InvalidSpec;

/// Condition type: the app serves with every replica available.
pub const READY: &str = "Ready";
/// Condition type: a rollout is under way.
pub const PROGRESSING: &str = "Progressing";
/// Condition type: something needs a human (invalid spec, failing writes,
/// a stalled rollout).
pub const DEGRADED: &str = "Degraded";

/// Reason: the spec cannot be realised ([`InvalidSpec`]).
pub const INVALID_SPEC: &str = "InvalidSpec";
/// Reason: the Deployment is rolling out.
pub const ROLLOUT_IN_PROGRESS: &str = "RolloutInProgress";
/// Reason: the rollout is complete.
pub const ROLLOUT_COMPLETE: &str = "RolloutComplete";
/// Reason: the Deployment exceeded its progress deadline (upstream's
/// reason, passed on).
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
/// Reason of `Degraded=False`.
pub const AS_EXPECTED: &str = "AsExpected";

/// What the reconcile found, for the status.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// The spec cannot be realised; nothing was built from it.
    Invalid(&'a InvalidSpec),
    /// A child could not be created or updated, or is in the way.
    Failed {
        /// A CamelCase reason, e.g. `FailedCreate`.
        reason: &'a str,
        /// What went wrong, in the API server's words where it has some.
        message: &'a str,
    },
    /// The children are in place; the Deployment as last seen (returned by
    /// this reconcile's write, or cached).
    Applied(&'a Deployment),
}

/// The state of a Deployment's rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollout {
    /// Still going; why, as `kubectl rollout status` words it.
    InProgress(String),
    /// The progress deadline passed; the Deployment's message.
    Stalled(String),
    /// Every replica updated and available.
    Complete,
}

/// Judges `deployment`'s rollout towards `replicas` pods.
pub fn rollout(deployment: &Deployment, replicas: i32) -> Rollout {
    let spec_replicas = deployment_spec(deployment).and_then(|s| s.replicas);
    if spec_replicas != Some(replicas) {
        return Rollout::InProgress("waiting for the Deployment to be updated".into());
    }
    let status = deployment.status.clone().unwrap_or_default();
    if deployment.metadata.generation.unwrap_or(0) > status.observed_generation.unwrap_or(0) {
        return Rollout::InProgress("waiting for the Deployment's update to be observed".into());
    }
    let stalled =
        status.conditions.iter().flatten().find(|c| {
            c.type_.text() == "Progressing" && c.reason.text() == PROGRESS_DEADLINE_EXCEEDED
        });
    if let Some(condition) = stalled {
        return Rollout::Stalled(condition.message.clone().unwrap_or_default());
    }
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    let total = status.replicas.unwrap_or(0);
    if updated < replicas {
        Rollout::InProgress(format!(
            "{updated} out of {replicas} new replicas have been updated"
        ))
    } else if total > updated {
        Rollout::InProgress(format!(
            "{} old replicas are pending termination",
            total - updated
        ))
    } else if available < updated {
        Rollout::InProgress(format!(
            "{available} of {updated} updated replicas are available"
        ))
    } else {
        Rollout::Complete
    }
}

/// Where the WebApp's Service answers inside the cluster.
pub fn url(app: &WebApp) -> String {
    format!(
        "http://{}.{}.svc:{}",
        app.name_any(),
        app.namespace().unwrap_or_default(),
        app.spec.port
    )
}

/// The status for `outcome`. A condition whose status did not change
/// keeps its `lastTransitionTime`; others get `now`. Compare the result
/// with the current status to write only changes.
pub fn desired_status(app: &WebApp, outcome: Outcome<'_>, now: &Time) -> WebAppStatus {
    let previous = app
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let generation = app.metadata.generation;
    let set = |type_: &str, status: bool, reason: &str, message: &str| {
        condition(previous, type_, status, reason, message, generation, now)
    };
    let mut ready_replicas = 0;
    let conditions = match outcome {
        Outcome::Invalid(invalid) => {
            let message = invalid.to_string();
            vec![
                set(READY, false, INVALID_SPEC, &message),
                set(
                    PROGRESSING,
                    false,
                    INVALID_SPEC,
                    "the spec cannot be realised",
                ),
                set(DEGRADED, true, INVALID_SPEC, &message),
            ]
        }
        Outcome::Failed { reason, message } => vec![
            set(READY, false, reason, message),
            set(PROGRESSING, false, reason, message),
            set(DEGRADED, true, reason, message),
        ],
        Outcome::Applied(deployment) => {
            let status = deployment.status.as_ref();
            ready_replicas = status.and_then(|s| s.ready_replicas).unwrap_or(0);
            match rollout(deployment, app.spec.replicas) {
                Rollout::InProgress(message) => vec![
                    set(READY, false, ROLLOUT_IN_PROGRESS, &message),
                    set(PROGRESSING, true, ROLLOUT_IN_PROGRESS, &message),
                    set(DEGRADED, false, AS_EXPECTED, ""),
                ],
                Rollout::Stalled(message) => vec![
                    set(READY, false, PROGRESS_DEADLINE_EXCEEDED, &message),
                    set(PROGRESSING, false, PROGRESS_DEADLINE_EXCEEDED, &message),
                    set(DEGRADED, true, PROGRESS_DEADLINE_EXCEEDED, &message),
                ],
                Rollout::Complete => {
                    let message = format!("{ready_replicas}/{} replicas ready", app.spec.replicas);
                    vec![
                        set(READY, true, ROLLOUT_COMPLETE, &message),
                        set(PROGRESSING, false, ROLLOUT_COMPLETE, &message),
                        set(DEGRADED, false, AS_EXPECTED, ""),
                    ]
                }
            }
        }
    };
    WebAppStatus {
        observed_generation: generation,
        ready_replicas,
        // An invalid spec leaves what the last valid one built running,
        // route included.
        url: match outcome {
            Outcome::Invalid(_) => app.status.as_ref().and_then(|s| s.url.clone()),
            _ => Some(url(app)),
        },
        conditions,
    }
}

fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time,
    }
}

/// The condition of `type_` in `status`, if any.
pub fn find<'a>(status: Option<&'a WebAppStatus>, type_: &str) -> Option<&'a Condition> {
    status?.conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentSpec, DeploymentStatus};
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::compat::{deployment_spec_field, text_field};
    use crate::resource::WebAppSpec;

    fn deployment(replicas: i32, status: DeploymentStatus) -> Deployment {
        let mut d = Deployment {
            spec: deployment_spec_field(DeploymentSpec {
                replicas: Some(replicas),
                ..DeploymentSpec::default()
            }),
            status: Some(status),
            ..Deployment::default()
        };
        d.metadata.generation = Some(2);
        d
    }

    fn counts(observed: i64, total: i32, updated: i32, available: i32) -> DeploymentStatus {
        DeploymentStatus {
            observed_generation: Some(observed),
            replicas: Some(total),
            updated_replicas: Some(updated),
            available_replicas: Some(available),
            ready_replicas: Some(available),
            ..DeploymentStatus::default()
        }
    }

    #[test]
    fn rollout_is_judged_as_kubectl_does() {
        let progress = |d: &Deployment| match rollout(d, 3) {
            Rollout::InProgress(m) => m,
            other => panic!("{other:?}"),
        };
        assert!(progress(&deployment(2, counts(2, 3, 3, 3))).contains("to be updated"));
        assert!(progress(&deployment(3, counts(1, 3, 3, 3))).contains("observed"));
        assert_eq!(
            progress(&deployment(3, counts(2, 3, 1, 1))),
            "1 out of 3 new replicas have been updated"
        );
        assert_eq!(
            progress(&deployment(3, counts(2, 5, 3, 3))),
            "2 old replicas are pending termination"
        );
        assert_eq!(
            progress(&deployment(3, counts(2, 3, 3, 2))),
            "2 of 3 updated replicas are available"
        );
        assert_eq!(
            rollout(&deployment(3, counts(2, 3, 3, 3)), 3),
            Rollout::Complete
        );

        let mut stalled = counts(2, 3, 1, 1);
        stalled.conditions = Some(vec![DeploymentCondition {
            type_: text_field("Progressing"),
            status: text_field("False"),
            reason: Some(PROGRESS_DEADLINE_EXCEEDED.into()),
            message: Some("ReplicaSet \"web-1\" has timed out progressing.".into()),
            ..DeploymentCondition::default()
        }]);
        assert_eq!(
            rollout(&deployment(3, stalled), 3),
            Rollout::Stalled("ReplicaSet \"web-1\" has timed out progressing.".into())
        );
    }

    #[test]
    fn transition_times_move_only_when_a_condition_flips() {
        let mut app = WebApp::new(
            "web",
            WebAppSpec {
                image: "nginx".into(),
                replicas: 3,
                port: 80,
                config: None,
            },
        );
        app.metadata.namespace = Some("shop".into());
        app.metadata.generation = Some(4);
        let t0 = Time(Timestamp::UNIX_EPOCH);
        let t1 = Time(Timestamp::from_second(60).unwrap());

        let rolling = deployment(3, counts(2, 3, 3, 1));
        let first = desired_status(&app, Outcome::Applied(&rolling), &t0);
        assert_eq!(first.url.as_deref(), Some("http://web.shop.svc:80"));
        assert_eq!(first.observed_generation, Some(4));
        assert_eq!(first.ready_replicas, 1);
        app.status = Some(first.clone());

        // Still rolling, one more pod: same statuses, new message, old times.
        let rolling = deployment(3, counts(2, 3, 3, 2));
        let second = desired_status(&app, Outcome::Applied(&rolling), &t1);
        let ready = find(Some(&second), READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.last_transition_time.clone()),
            ("False", t0.clone())
        );
        assert_eq!(ready.message, "2 of 3 updated replicas are available");
        app.status = Some(second);

        // Complete: Ready and Progressing flip at t1, Degraded stays.
        let done = deployment(3, counts(2, 3, 3, 3));
        let third = desired_status(&app, Outcome::Applied(&done), &t1);
        let times: Vec<_> = third
            .conditions
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.last_transition_time == t1,
                )
            })
            .collect();
        assert_eq!(
            times,
            [
                ("Ready", "True", true),
                ("Progressing", "False", true),
                ("Degraded", "False", false)
            ]
        );
        assert!(
            third
                .conditions
                .iter()
                .all(|c| c.observed_generation == Some(4))
        );
    }
}
