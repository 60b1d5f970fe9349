//! Controllers for any Kubernetes resource, built from ctrlkit's parts.
//!
//! - [`child`]: create, delete and patch children of any kind on behalf of an
//!   owner, with events, expectations and a recording fake.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod child;
