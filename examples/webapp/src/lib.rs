//! WIP
pub mod api;
pub mod children;
mod compat;
pub mod controller;
pub mod reconcile;
pub mod resource;
pub mod routes;
pub mod status;
pub mod validate;
