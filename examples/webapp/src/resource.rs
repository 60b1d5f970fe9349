//! The `WebApp` custom resource: its spec, its status and the
//! CustomResourceDefinition generated from them.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The finalizer a WebApp carries while its route is registered: the
/// routes ConfigMap lives in another namespace, so no ownerReference can
/// make the garbage collector remove the entry.
pub const FINALIZER: &str = "example.ctrlkit.dev/route";

/// The most replicas a WebApp may ask for (the schema's maximum).
pub const MAX_REPLICAS: i32 = 100;

// `#[derive(CustomResource)]` generates the `WebApp` type (this spec plus
// `metadata` and `status`) and its CRD (`crd()`); doc comments become the
// schema's descriptions, shown by `kubectl explain webapp.spec`.

/// A web application: a Deployment running `image` behind a Service on
/// `port`, with `config` in a ConfigMap mounted at `/etc/webapp`.
// Each `printcolumn(...)` repeats `type_ = ...`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "example.ctrlkit.dev",
    version = "v1",
    kind = "WebApp",
    plural = "webapps",
    shortname = "wa",
    category = "all",
    namespaced,
    status = "WebAppStatus",
    doc = "A web application run by webapp-operator: a Deployment, a Service and a ConfigMap, and an entry in the shared routes ConfigMap",
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "URL",
        type_ = "string",
        json_path = ".status.url",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// The container image to run, e.g. `nginx:1.27`.
    #[schemars(length(min = 1))]
    pub image: String,
    /// How many pods to run.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,
    /// The port the container listens on and the Service exposes.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Configuration files: each key becomes a file under `/etc/webapp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, String>>,
}

fn default_replicas() -> i32 {
    1
}

fn default_port() -> i32 {
    8080
}

// Every field is serialized, `None` as `null`, so that a JSON merge patch
// of the whole status removes what is no longer true.

/// What webapp-operator observed.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebAppStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default)]
    pub observed_generation: Option<i64>,
    /// Pods of the Deployment that are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Where the Service answers inside the cluster (the URL registered in
    /// the routes ConfigMap); `null` until the spec was first valid.
    #[serde(default)]
    pub url: Option<String>,
    /// `Ready`, `Progressing` and `Degraded`, as `metav1.Condition`s.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The CustomResourceDefinition of [`WebApp`], generated from the Rust
/// types.
pub fn crd() -> CustomResourceDefinition {
    WebApp::crd()
}

/// Prints [`crd_yaml`] on stdout for `--print-crd`; the exit status says
/// whether it could.
pub fn print_crd() -> std::process::ExitCode {
    match crd_yaml() {
        Ok(yaml) => {
            print!("{yaml}");
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: cannot serialize the CRD: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// [`crd`] as the YAML committed in `deploy/webapp-operator/crd.yaml`
/// (what `webapp-operator --print-crd` prints).
///
/// # Errors
/// If the CRD cannot be serialized (never for this type).
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    let yaml = serde_yaml::to_string(&crd())?;
    Ok(format!(
        "# Generated from examples/webapp/src/resource.rs by `webapp-operator --print-crd`;\n\
         # do not edit by hand (tests/crd.rs fails when they differ).\n{yaml}"
    ))
}
