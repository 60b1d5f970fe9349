//! CustomResourceDefinition support (apiextensions.k8s.io/v1), independent
//! of the server: everything works on `serde_json::Value` objects.
//!
//! - [`Schema`]: a compiled `openAPIV3Schema` that defaults, prunes and
//!   validates custom objects as kube-apiserver does ([`Schema::admit`]).
//! - [`field`]: kube-apiserver's field errors and the `422 Invalid` `Status`
//!   built from them.
//!
//! Field paths and messages are kube-apiserver's (looked up in
//! apiextensions-apiserver and kube-openapi), so a test that asserts on a
//! rejection sees what a real cluster answers.

mod coerce;
pub mod field;
mod formats;
pub mod names;
mod schema;
mod validate;

pub use schema::{Schema, SchemaError};
