//! Writes whose answer is read only for the metadata the server assigned:
//! the object sent plus those fields is what was stored, so decoding the
//! whole returned object (status, spec, `managedFields`) would be wasted.
//! Used by child writes (`ctrlkit-childcontrol`), status writes and the
//! event recorder (`ctrlkit-events`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Client;

/// The metadata the API server sets on a write; serde skips every other
/// field of the answer unread.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerMetadata {
    /// `metadata.name` (set by the server for a `generateName` create).
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion` the write was stored at.
    pub resource_version: Option<String>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<Time>,
}

#[derive(serde::Deserialize)]
struct Answer {
    #[serde(default)]
    metadata: ServerMetadata,
}

impl ServerMetadata {
    /// Sends `request` (a create, update or patch built with
    /// `kube::core::Request`) and reads only the answer's metadata.
    ///
    /// Cancel-safe in the sense of any request: dropping the future may
    /// leave the write done or not.
    ///
    /// # Errors
    /// The API error, or the answer not being an object.
    pub async fn request(
        client: &Client,
        request: http::Request<Vec<u8>>,
    ) -> Result<Self, kube::Error> {
        let answer: Answer = client.request(request).await?;
        Ok(answer.metadata)
    }

    /// Sets on `meta` every field the server returned, keeping the others.
    pub fn apply_to(self, meta: &mut ObjectMeta) {
        fn set<T>(field: &mut Option<T>, value: Option<T>) {
            if value.is_some() {
                *field = value;
            }
        }
        set(&mut meta.name, self.name);
        set(&mut meta.namespace, self.namespace);
        set(&mut meta.uid, self.uid);
        set(&mut meta.resource_version, self.resource_version);
        set(&mut meta.generation, self.generation);
        set(&mut meta.creation_timestamp, self.creation_timestamp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fields_the_server_returned_are_set() {
        let mut meta = ObjectMeta {
            name: Some("web".into()),
            generate_name: Some("web-".into()),
            resource_version: Some("1".into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..ObjectMeta::default()
        };
        let answer: Answer = serde_json::from_value(serde_json::json!({
            "metadata": {"resourceVersion": "7", "uid": "u-1", "managedFields": [{}]},
            "status": {"replicas": 3},
        }))
        .unwrap();
        answer.metadata.apply_to(&mut meta);
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.uid.as_deref(), Some("u-1"));
        assert_eq!(meta.name.as_deref(), Some("web"), "kept");
        assert!(meta.labels.is_some() && meta.generation.is_none());
    }
}
