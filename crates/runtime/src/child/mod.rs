//! Children of any kind: create from a template with a controller
//! reference, delete, patch, with events on the owner, a write gate, a
//! recording fake and read-own-writes recording.
//!
//! This is `ctrlkit-childcontrol`, re-exported; see [`ChildControl`] for
//! the trait and [`KubeChildControl`] for the API-backed implementation.

pub use ctrlkit_childcontrol::*;
