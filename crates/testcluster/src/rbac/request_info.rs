//! Request attributes from an HTTP method, path and query, as
//! kube-apiserver's `RequestInfoFactory` derives them.

/// What a request asks to do, in the terms authorization uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// A request for an API resource (`/api/...`, `/apis/...` with a
    /// version) rather than a plain path (`/healthz`, `/apis`).
    pub is_resource_request: bool,
    /// The URL path.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `proxy`; for non-resource requests the lower-case
    /// HTTP method.
    pub verb: String,
    /// `api` or `apis`.
    pub api_prefix: String,
    /// The API group (empty for the core group).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The namespace, if the path has one.
    pub namespace: String,
    /// The resource, e.g. `pods`.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The object name, if the path (or a `metadata.name=` field selector
    /// on a list or watch) names one.
    pub name: String,
}

/// Subresources of namespaces that are not resources of their own.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(k) == key).then(|| decode(v))
    })
}

/// Percent-decoding of a query component (`+` is a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `metadata.name=<x>` (or `==`) in a field selector, if it requires one.
fn name_from_field_selector(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (k, v) = term.split_once("==").or_else(|| {
            if term.contains("!=") {
                None
            } else {
                term.split_once('=')
            }
        })?;
        (k.trim() == "metadata.name").then(|| v.trim().to_string())
    })
}

/// The request attributes of `method` on `path` with `query` (the raw
/// query string, without `?`).
pub fn resolve(method: &str, path: &str, query: &str) -> RequestInfo {
    let mut info = RequestInfo {
        is_resource_request: false,
        path: path.to_string(),
        verb: method.to_lowercase(),
        ..RequestInfo::default()
    };
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() < 3 || (parts[0] != "api" && parts[0] != "apis") {
        return info;
    }
    let mut rest: &[&str] = &parts[1..];
    let prefix = parts[0];
    let mut group = "";
    if prefix == "apis" {
        if rest.len() < 3 {
            return info;
        }
        group = rest[0];
        rest = &rest[1..];
    }
    info.api_prefix = prefix.to_string();
    info.api_group = group.to_string();
    info.is_resource_request = true;
    info.api_version = rest[0].to_string();
    rest = &rest[1..];

    if rest.first().is_some_and(|p| *p == "proxy" || *p == "watch") {
        if rest.len() < 2 {
            // `/api/v1/watch` alone is not a resource request.
            return RequestInfo {
                is_resource_request: false,
                path: path.to_string(),
                verb: method.to_lowercase(),
                ..RequestInfo::default()
            };
        }
        info.verb = rest[0].to_string();
        rest = &rest[1..];
    } else {
        info.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }

    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        info.namespace = rest[1].to_string();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    if rest.len() >= 3 && info.verb != "proxy" {
        info.subresource = rest[2].to_string();
    }
    if rest.len() >= 2 {
        info.name = rest[1].to_string();
    }
    if !rest.is_empty() {
        info.resource = rest[0].to_string();
    }

    if info.name.is_empty() && info.verb == "get" {
        let watch = query_param(query, "watch")
            .is_some_and(|w| !matches!(w.to_lowercase().as_str(), "" | "false" | "0"));
        info.verb = if watch { "watch" } else { "list" }.to_string();
        if let Some(name) =
            query_param(query, "fieldSelector").and_then(|s| name_from_field_selector(&s))
            && crate::crd::names::path_segment_name(&name).is_empty()
        {
            info.name = name;
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_string();
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(
        method: &str,
        path: &str,
        query: &str,
    ) -> (String, String, String, String, String, String) {
        let i = resolve(method, path, query);
        (
            i.verb,
            i.api_group,
            i.namespace,
            i.resource,
            i.subresource,
            i.name,
        )
    }

    fn t(
        v: &str,
        g: &str,
        ns: &str,
        res: &str,
        sub: &str,
        name: &str,
    ) -> (String, String, String, String, String, String) {
        (
            v.into(),
            g.into(),
            ns.into(),
            res.into(),
            sub.into(),
            name.into(),
        )
    }

    #[test]
    fn verbs_from_methods_and_paths() {
        assert_eq!(
            r("GET", "/api/v1/namespaces/default/pods", ""),
            t("list", "", "default", "pods", "", "")
        );
        assert_eq!(
            r("GET", "/api/v1/namespaces/default/pods", "watch=true"),
            t("watch", "", "default", "pods", "", "")
        );
        assert_eq!(
            r(
                "GET",
                "/api/v1/namespaces/default/pods",
                "watch=1&resourceVersion=5"
            ),
            t("watch", "", "default", "pods", "", "")
        );
        assert_eq!(
            r("GET", "/api/v1/namespaces/default/pods/web", ""),
            t("get", "", "default", "pods", "", "web")
        );
        assert_eq!(
            r(
                "PUT",
                "/apis/apps/v1/namespaces/ns/replicasets/rs/status",
                ""
            ),
            t("update", "apps", "ns", "replicasets", "status", "rs")
        );
        assert_eq!(
            r(
                "PATCH",
                "/apis/apps/v1/namespaces/ns/deployments/d/scale",
                ""
            ),
            t("patch", "apps", "ns", "deployments", "scale", "d")
        );
        assert_eq!(
            r("POST", "/api/v1/namespaces/ns/pods", ""),
            t("create", "", "ns", "pods", "", "")
        );
        assert_eq!(
            r("DELETE", "/api/v1/namespaces/ns/pods", ""),
            t("deletecollection", "", "ns", "pods", "", "")
        );
        assert_eq!(
            r("DELETE", "/api/v1/namespaces/ns/pods/p", ""),
            t("delete", "", "ns", "pods", "", "p")
        );
        assert_eq!(
            r("GET", "/api/v1/nodes", ""),
            t("list", "", "", "nodes", "", "")
        );
        assert_eq!(
            r("GET", "/api/v1/watch/namespaces/ns/pods", ""),
            t("watch", "", "ns", "pods", "", "")
        );
        assert_eq!(
            r(
                "GET",
                "/api/v1/namespaces/ns/pods",
                "fieldSelector=metadata.name%3Dweb"
            ),
            t("list", "", "ns", "pods", "", "web")
        );
    }

    #[test]
    fn namespaces_themselves() {
        assert_eq!(
            r("GET", "/api/v1/namespaces/ns", ""),
            t("get", "", "ns", "namespaces", "", "ns")
        );
        assert_eq!(
            r("PUT", "/api/v1/namespaces/ns/finalize", ""),
            t("update", "", "ns", "namespaces", "finalize", "ns")
        );
        assert_eq!(
            r("GET", "/api/v1/namespaces", ""),
            t("list", "", "", "namespaces", "", "")
        );
    }

    #[test]
    fn non_resource_paths() {
        for path in [
            "/healthz",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
        ] {
            let i = resolve("GET", path, "");
            assert!(!i.is_resource_request, "{path}");
            assert_eq!(i.verb, "get");
            assert_eq!(i.path, path);
        }
    }
}
