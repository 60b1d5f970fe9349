//! Server-side Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`),
//! which `kubectl get` asks for: the type's columns, one row per object,
//! and the object itself as `includeObject` says (`None`, `Metadata` —
//! the default, a `PartialObjectMetadata` — or `Object`).

use serde_json::{Map, Value, json};

use crate::printers;
use crate::resources::ResourceDef;
use crate::status::ApiError;

/// What a row carries besides its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    Metadata,
    Object,
}

/// A request for Table output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableRequest {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as asked.
    pub(crate) api_version: &'static str,
    pub(crate) include: Include,
}

impl TableRequest {
    /// The Table request in an `Accept` header and the `includeObject`
    /// parameter, if the client asks for a Table.
    pub(crate) fn from_request(
        accept: &str,
        include_object: Option<&str>,
    ) -> Result<Option<TableRequest>, ApiError> {
        let api_version = accept.split(',').find_map(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            let table = params.first().is_some_and(|t| *t == "application/json")
                && params.contains(&"as=Table")
                && params.contains(&"g=meta.k8s.io");
            if !table {
                return None;
            }
            if params.contains(&"v=v1") {
                Some("meta.k8s.io/v1")
            } else if params.contains(&"v=v1beta1") {
                Some("meta.k8s.io/v1beta1")
            } else {
                None
            }
        });
        let Some(api_version) = api_version else {
            return Ok(None);
        };
        let include = match include_object.unwrap_or("") {
            "" | "Metadata" => Include::Metadata,
            "None" => Include::None,
            "Object" => Include::Object,
            other => {
                return Err(ApiError::bad_request(format!(
                    "includeObject: Unsupported value: {other:?}: supported values: \"None\", \"Metadata\", \"Object\""
                )));
            }
        };
        Ok(Some(TableRequest {
            api_version,
            include,
        }))
    }

    /// The `Content-Type` of a Table response.
    pub(crate) fn content_type(&self) -> &'static str {
        if self.api_version == "meta.k8s.io/v1" {
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        } else {
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
        }
    }

    /// A Table of `rows` (from [`TableRequest::row`]) with list `metadata`.
    pub(crate) fn table(&self, def: &ResourceDef, metadata: Value, rows: Vec<Value>) -> Value {
        let columns = if def.columns.is_empty() {
            printers::default_columns()
        } else {
            def.columns.clone()
        };
        let definitions: Vec<Value> = columns
            .iter()
            .map(|c| {
                json!({"name": c.name, "type": c.kind, "format": c.format,
                       "description": c.description, "priority": c.priority})
            })
            .collect();
        json!({
            "kind": "Table",
            "apiVersion": self.api_version,
            "metadata": metadata,
            "columnDefinitions": definitions,
            "rows": rows,
        })
    }

    /// One row: the cells computed from `stored` (the stored form, which
    /// the printers read), the object as served in `served`.
    pub(crate) fn row(
        &self,
        def: &ResourceDef,
        stored: &Value,
        served: Value,
        now: jiff::Timestamp,
    ) -> Value {
        let default_columns;
        let columns = if def.columns.is_empty() {
            default_columns = printers::default_columns();
            &default_columns
        } else {
            &def.columns
        };
        let cells: Vec<Value> = columns.iter().map(|c| (c.cell)(stored, now)).collect();
        let mut row = Map::new();
        row.insert("cells".into(), Value::Array(cells));
        match self.include {
            Include::None => {}
            Include::Object => {
                row.insert("object".into(), served);
            }
            Include::Metadata => {
                let metadata = served.get("metadata").cloned().unwrap_or_else(|| json!({}));
                row.insert(
                    "object".into(),
                    json!({"kind": "PartialObjectMetadata", "apiVersion": self.api_version, "metadata": metadata}),
                );
            }
        }
        Value::Object(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_requests_are_read_from_accept_and_include_object() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        let t = TableRequest::from_request(kubectl, None).unwrap().unwrap();
        assert_eq!(t.api_version, "meta.k8s.io/v1");
        assert_eq!(t.include, Include::Metadata);
        let t = TableRequest::from_request(
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            Some("Object"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (t.api_version, t.include),
            ("meta.k8s.io/v1beta1", Include::Object)
        );
        assert!(
            TableRequest::from_request("application/json", Some("Object"))
                .unwrap()
                .is_none()
        );
        assert_eq!(
            TableRequest::from_request(kubectl, Some("All"))
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn kinds_without_printers_get_name_and_created_at() {
        let def = ResourceDef::new("example.com", "v1", "widgets", "widget", "Widget", true);
        let t = TableRequest::from_request(
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            Some("None"),
        )
        .unwrap()
        .unwrap();
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        let row = t.row(&def, &obj, obj.clone(), jiff::Timestamp::UNIX_EPOCH);
        assert_eq!(row, json!({"cells": ["w", "2026-01-01T00:00:00Z"]}));
        let table = t.table(&def, json!({}), vec![row]);
        assert_eq!(table["columnDefinitions"][1]["name"], "Created At");
        assert_eq!(table["columnDefinitions"][1]["type"], "date");
    }
}
