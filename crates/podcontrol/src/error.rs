//! The error type: the child-control error of `ctrlkit-childcontrol`, under
//! the name pod code has always used.

/// Why a [`PodControl`](crate::PodControl) call failed: the same type as
/// [`ChildControlError`](ctrlkit_childcontrol::ChildControlError), since
/// [`KubePodControl`](crate::KubePodControl) is the generic child control
/// for pods.
pub use ctrlkit_childcontrol::ChildControlError as PodControlError;
pub use ctrlkit_childcontrol::{is_namespace_terminating_status, status_is};
