//! CustomResourceDefinition support (apiextensions.k8s.io/v1), independent
//! of the server: everything works on `serde_json::Value` objects.
//!
//! - [`CustomResourceDefinition::from_value`]: defaults, validates and
//!   parses a CRD as kube-apiserver does on create
//!   ([`validate_crd_update`] for updates); rejections become the `422`
//!   body of [`invalid_crd_status`].
//! - [`Schema`]: a compiled `openAPIV3Schema` that defaults, prunes and
//!   validates custom objects as kube-apiserver does ([`Schema::admit`]).
//! - [`field`]: kube-apiserver's field errors and the `422 Invalid` `Status`
//!   built from them.
//! - [`PrinterColumns`]: the server-side Table columns and cells of custom
//!   objects (`additionalPrinterColumns`, evaluated with client-go's
//!   [`JsonPath`]).
//! - [`GroupVersionDocument`]: the OpenAPI v3 document kube-apiserver
//!   serves for a CRD group-version, which `kubectl explain` reads.
//!
//! Field paths and messages are kube-apiserver's (looked up in
//! apiextensions-apiserver and kube-openapi), so a test that asserts on a
//! rejection sees what a real cluster answers.

mod coerce;
mod columns;
mod definition;
pub mod field;
mod formats;
mod jsonpath;
pub mod names;
mod openapi;
mod openapi_meta;
mod schema;
mod structural;
mod validate;

pub use columns::{InvalidColumn, PrinterColumns, TableColumn};
pub use jsonpath::{JsonPath, JsonPathError, print_value};
pub use openapi::{GroupVersionDocument, definition_name, etag, group_version_document, index_key};

pub use definition::{
    API_APPROVED_ANNOTATION, CRD_GROUP, CRD_KIND, CustomResourceDefinition, Names, PrinterColumn,
    Scale, Scope, Subresources, Version, apply_crd_defaults, invalid_crd_status, validate_crd,
    validate_crd_update,
};
pub use schema::{Schema, SchemaError};
