//! Creating, deleting and patching pods on behalf of an owning controller.
//!
//! This crate is being built; see the crate README for its scope.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod control;
mod error;
mod fake;
mod kube_control;
mod template;

pub use control::PodControl;
pub use error::{PodControlError, is_namespace_terminating_status};
pub use fake::{FakePodControl, Operation, RecordedCreate, RecordedDelete, RecordedPatch};
pub use kube_control::{
    FAILED_CREATE_POD_REASON, FAILED_DELETE_POD_REASON, KubePodControl,
    SUCCESSFUL_CREATE_POD_REASON, SUCCESSFUL_DELETE_POD_REASON,
};
pub use template::{
    MAX_GENERATED_NAME_PREFIX_LEN, generate_name_prefix, pod_from_template, validate_controller_ref,
};
pub mod availability;
pub mod pod;
pub mod ranking;
