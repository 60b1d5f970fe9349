//! Creating, deleting and patching pods on behalf of an owning controller.
//!
//! This crate is being built; see the crate README for its scope.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod control;
mod error;

pub use control::PodControl;
pub use error::PodControlError;
