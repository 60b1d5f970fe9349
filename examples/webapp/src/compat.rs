//! Reading fields whose type differs between the Kubernetes versions the
//! crate builds against: in k8s-openapi 0.29, 1.37 made `Deployment.spec`
//! a plain field (an `Option` up to 1.36) and `DeploymentCondition.type_`
//! and `.status` optional. The traits below are implemented for both
//! shapes, so the code compiles with either version feature and without a
//! `cfg`. Writing goes through `.into()`, which turns a value into itself
//! or into `Some(value)` alike.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};

/// A string field that may be optional.
pub(crate) trait Text {
    /// The value, empty when absent.
    fn text(&self) -> &str;
}

impl Text for String {
    fn text(&self) -> &str {
        self
    }
}

impl Text for Option<String> {
    fn text(&self) -> &str {
        self.as_deref().unwrap_or_default()
    }
}

/// A spec field that may be optional.
pub(crate) trait MaybeSpec {
    /// The spec, if present.
    fn get(&self) -> Option<&DeploymentSpec>;
}

impl MaybeSpec for DeploymentSpec {
    fn get(&self) -> Option<&DeploymentSpec> {
        Some(self)
    }
}

impl MaybeSpec for Option<DeploymentSpec> {
    fn get(&self) -> Option<&DeploymentSpec> {
        self.as_ref()
    }
}

/// `spec` as the value of `Deployment.spec`, whichever its type.
pub(crate) fn deployment_spec_field<T: From<DeploymentSpec>>(spec: DeploymentSpec) -> T {
    T::from(spec)
}

/// `s` as the value of a string field that may be optional.
#[cfg(test)]
pub(crate) fn text_field<T: From<String>>(s: &str) -> T {
    T::from(s.to_owned())
}

/// The Deployment's spec, if it has one.
pub(crate) fn deployment_spec(deployment: &Deployment) -> Option<&DeploymentSpec> {
    deployment.spec.get()
}
