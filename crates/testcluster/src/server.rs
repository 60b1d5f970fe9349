//! The HTTP layer: routes Kubernetes REST paths to the API operations.

use crate::json::At;
use crate::shard_selector::ShardSelector;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::authz::Authorization;
use crate::decode::{self, Decoders};
use crate::discovery;
use crate::faults::{FaultInjector, RequestInfo};
use crate::kinds::PODS;
use crate::ops::{Api, DeleteOpts, Deleted, WriteCtx};
use crate::patch::PatchKind;
use crate::query::{self, ListOptions, Params};
use crate::rbac::{self, UserInfo};
use crate::resources::{ResourceDef, Review, Snapshot};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::semantics::{self, Part};
use crate::stats::{Counters, Slot};
use crate::status::ApiError;
use crate::store::{EventType, Key, Stored, build_frame};
use crate::table::TableRequest;
use crate::watch::{self, FrameFn, Start, WatchSpec};

/// The header marking requests from the cluster's own components (the
/// kubelet simulation); faults never apply to them.
pub(crate) const INTERNAL_HEADER: &str = "x-ctrlkit-internal";

/// Most watch frames sent as one body chunk.
const WATCH_BATCH: usize = 256;

/// Frames that are ready together go out as one chunk: one write and one
/// chunk header instead of one per event when a watcher catches up.
fn coalesce(frames: Vec<Bytes>) -> Bytes {
    if frames.len() == 1 {
        return frames.into_iter().next().unwrap_or_default();
    }
    let mut buf = BytesMut::with_capacity(frames.iter().map(Bytes::len).sum());
    for f in &frames {
        buf.extend_from_slice(f);
    }
    buf.freeze()
}

/// Bodies larger than this are decoded off the async workers (see
/// [`off_the_workers`]); smaller ones are cheaper to decode in place.
const BLOCKING_BODY_BYTES: usize = 64 * 1024;

/// Run `f`, which may take a while (decoding a large or YAML body), where
/// it cannot stall the async workers: on a multi-threaded runtime the
/// worker first hands its other tasks to another thread. A current-thread
/// runtime has nowhere else to run it; the body limits bound it there.
fn off_the_workers<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// How much of an oversized body is read and thrown away before the 413 is
/// sent. Clients (hyper's, for one) write the whole body before they read
/// the answer; a server that answers and closes with the body half read
/// resets the connection under them, and they see a broken pipe instead of
/// the 413. Go's net/http discards a bounded remainder for the same reason.
/// A body announced larger than this is answered at once: nobody should
/// wait for 100 MB to be uploaded just to be told no.
const DRAIN_OVERSIZED_BYTES: usize = 4 * decode::MAX_REQUEST_BODY_BYTES;

/// How long the rest of an oversized body is waited for before the 413 is
/// sent anyway (a client that stalls mid-body holds no handler for long).
const DRAIN_OVERSIZED_FOR: Duration = Duration::from_secs(10);

/// The request body, at most [`decode::MAX_REQUEST_BODY_BYTES`]: a larger
/// one (by its `Content-Length`, or once that many bytes were read) is
/// kube-apiserver's `413 RequestEntityTooLarge`, answered after the rest of
/// the body was drained (see [`DRAIN_OVERSIZED_BYTES`]).
async fn read_body(headers: &HeaderMap, mut body: Body) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let limit = decode::MAX_REQUEST_BODY_BYTES;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_OVERSIZED_BYTES as u64) {
        return Err(ApiError::request_entity_too_large(limit));
    }
    let mut oversized = declared.is_some_and(|n| n > limit as u64);
    let drain_until = tokio::time::Instant::now() + DRAIN_OVERSIZED_FOR;
    let mut data = BytesMut::new();
    let mut read = 0usize;
    loop {
        let frame = if oversized {
            match tokio::time::timeout_at(drain_until, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => break,
            }
        } else {
            body.frame().await
        };
        let chunk = match frame {
            None => break,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(chunk) => chunk,
                Err(_) => continue,
            },
            Some(Err(_)) if oversized => break,
            Some(Err(_)) => return Err(ApiError::bad_request("reading the request body failed")),
        };
        read = read.saturating_add(chunk.len());
        if read > limit && !oversized {
            oversized = true;
            data = BytesMut::new();
        }
        if oversized {
            if read > DRAIN_OVERSIZED_BYTES {
                break;
            }
        } else {
            data.extend_from_slice(&chunk);
        }
    }
    if oversized {
        Err(ApiError::request_entity_too_large(limit))
    } else {
        Ok(data.freeze())
    }
}

/// Shared server state.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) api: Arc<Api>,
    pub(crate) faults: Arc<FaultInjector>,
    pub(crate) address: String,
    pub(crate) bookmark_interval: Duration,
    /// KEP-5866's feature gate: whether `shardSelector` is honoured.
    pub(crate) sharded_list_and_watch: bool,
    pub(crate) stats: Arc<Counters>,
    /// Request body decoders beyond JSON and YAML.
    pub(crate) decoders: Decoders,
    /// Authentication and authorization (enforced when RBAC is on).
    pub(crate) authz: Authorization,
}

fn json_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn value_response(code: StatusCode, v: &Value) -> Response<Body> {
    json_response(code, Bytes::from(v.to_string()))
}

/// A stored object as `def` serves it.
fn stored_response(def: &ResourceDef, code: StatusCode, s: &Stored) -> Response<Body> {
    json_response(code, def.served_json(s))
}

/// kube-apiserver's answer to a path no handler serves: an unknown
/// resource, group, version or subresource.
fn not_found_path() -> Response<Body> {
    ApiError::not_found_path().into_response()
}

/// kube-apiserver's answer to a method the path does not support.
fn method_not_allowed() -> Response<Body> {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
    .into_response()
}

/// A parsed resource path.
#[derive(Debug)]
struct Target<'a> {
    def: Arc<ResourceDef>,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

fn parse_target<'a>(
    snap: &Snapshot,
    group: &str,
    version: &str,
    rest: &[&'a str],
) -> Option<Target<'a>> {
    let lookup = |plural: &str| snap.lookup(group, version, plural).cloned();
    let target = |def, namespace, name, sub| {
        Some(Target {
            def,
            namespace,
            name,
            sub,
        })
    };
    match rest {
        ["namespaces", ns, plural, tail @ ..] if lookup(plural).is_some_and(|d| d.namespaced) => {
            let def = lookup(plural)?;
            match tail {
                [] => target(def, Some(*ns), None, None),
                [name] => target(def, Some(*ns), Some(*name), None),
                [name, sub] => target(def, Some(*ns), Some(*name), Some(*sub)),
                _ => None,
            }
        }
        [plural, tail @ ..] => {
            let def = lookup(plural)?;
            let namespaced = def.namespaced;
            match tail {
                [] => target(def, None, None, None),
                [name] if !namespaced => target(def, None, Some(*name), None),
                [name, sub] if !namespaced => target(def, None, Some(*name), Some(*sub)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Entry point for every request: routes it and counts the answer.
pub(crate) async fn handle(State(server): State<Arc<Server>>, req: Request) -> Response<Body> {
    let mut slot = Slot::non_resource(req.headers().contains_key(INTERNAL_HEADER));
    if req.method() != Method::GET {
        slot.set_verb("other");
    }
    let resp = route(&server, req, &mut slot).await;
    server.stats.record(slot, resp.status().as_u16());
    resp
}

fn discovery_response(
    req: &Request,
    legacy: Value,
    aggregated: impl FnOnce() -> Value,
) -> Response<Body> {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if discovery::wants_aggregated(accept) {
        let mut r = json_response(StatusCode::OK, Bytes::from(aggregated().to_string()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(discovery::AGGREGATED),
        );
        return r;
    }
    value_response(StatusCode::OK, &legacy)
}

/// Answer one request; `slot` learns its verb and resource.
async fn route(server: &Arc<Server>, req: Request, slot: &mut Slot) -> Response<Body> {
    let path = req.uri().path().to_string();
    // Authentication and authorization come first, as kube-apiserver's
    // filters: unknown tokens are 401, denied requests 403.
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let user = match server.authz.check(
        req.method().as_str(),
        &path,
        req.uri().query().unwrap_or(""),
        authorization,
    ) {
        Ok(user) => user,
        Err(e) => return e.into_response(),
    };
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let snap = server.api.registry.snapshot();
    match segments.as_slice() {
        ["version"] => return value_response(StatusCode::OK, &discovery::version()),
        ["healthz" | "livez" | "readyz", ..] => {
            return json_response(StatusCode::OK, Bytes::from_static(b"ok"));
        }
        ["api"] => {
            return discovery_response(&req, discovery::core_versions(&server.address), || {
                discovery::aggregated(&snap, true)
            });
        }
        ["apis"] => {
            return discovery_response(&req, discovery::group_list(&snap), || {
                discovery::aggregated(&snap, false)
            });
        }
        ["api", v] => {
            return match discovery::resource_list(&snap, "", v) {
                Some(doc) => value_response(StatusCode::OK, &doc),
                None => not_found_path(),
            };
        }
        ["apis", g] => {
            return match discovery::group(&snap, g) {
                Some(doc) => value_response(StatusCode::OK, &doc),
                None => not_found_path(),
            };
        }
        ["apis", g, v] => {
            return match discovery::resource_list(&snap, g, v) {
                Some(doc) => value_response(StatusCode::OK, &doc),
                None => not_found_path(),
            };
        }
        ["openapi", "v3"] => {
            let custom = server.api.crds.openapi();
            return value_response(StatusCode::OK, &discovery::openapi_root(&snap, &custom));
        }
        ["openapi", "v3", "api", v] => {
            return match discovery::openapi_group_version(&snap, "", v) {
                Some(doc) => openapi_response(doc.body(), doc.etag()),
                None => not_found_path(),
            };
        }
        ["openapi", "v3", "apis", g, v] => {
            let custom = server.api.crds.openapi();
            if let Some(doc) = custom.get(&(g.to_string(), v.to_string())) {
                return openapi_response(doc.body(), doc.etag());
            }
            return match discovery::openapi_group_version(&snap, g, v) {
                Some(doc) => openapi_response(doc.body(), doc.etag()),
                None => not_found_path(),
            };
        }
        _ => {}
    }
    let target = match segments.as_slice() {
        ["api", v, rest @ ..] => parse_target(&snap, "", v, rest),
        ["apis", g, v, rest @ ..] => parse_target(&snap, g, v, rest),
        _ => None,
    };
    drop(snap);
    let Some(target) = target else {
        return not_found_path();
    };
    let params: Params = Query::<Params>::try_from_uri(req.uri())
        .map(|q| q.0)
        .unwrap_or_default();
    let internal = slot.internal;
    let is_watch = query::flag(&params, "watch");
    let def = target.def.clone();
    // The verbs of the path's kind, as kube-apiserver routes them: a
    // collection takes GET/POST/DELETE, an object GET/PUT/PATCH/DELETE,
    // `status` and `scale` GET/PUT/PATCH, `binding` POST.
    let method = req.method().clone();
    let verb = match (target.name.is_some(), target.sub, method) {
        (false, _, Method::GET) if is_watch => Some("watch"),
        (false, _, Method::GET) => Some("list"),
        (false, _, Method::POST) => Some("create"),
        (false, _, Method::DELETE) => Some("deletecollection"),
        (true, None, Method::GET) => Some("get"),
        (true, None, Method::PUT) => Some("update"),
        (true, None, Method::PATCH) => Some("patch"),
        (true, None, Method::DELETE) => Some("delete"),
        (true, Some(sub), m) if def.has_subresource(sub) => match (sub, m) {
            ("binding", Method::POST) => Some("create"),
            ("binding", _) => None,
            (_, Method::GET) => Some("get"),
            (_, Method::PUT) => Some("update"),
            (_, Method::PATCH) => Some("patch"),
            _ => None,
        },
        (true, Some(_), _) => {
            slot.set(def.id, def.plural, target.sub, "other");
            return not_found_path();
        }
        _ => None,
    };
    // A verb the resource does not take (a list of reviews, a
    // deletecollection of namespaces) is 405, as on kube-apiserver.
    let verb = verb.filter(|v| target.sub.is_some() || def.verbs.contains(v));
    let Some(verb) = verb else {
        slot.set(def.id, def.plural, target.sub, "other");
        return method_not_allowed();
    };
    slot.set(def.id, def.plural, target.sub, verb);
    let info = RequestInfo {
        verb,
        resource: def.plural,
        subresource: target.sub,
        namespace: target.namespace,
        name: target.name,
        internal,
    };
    if !internal && let Some(resp) = server.faults.before_request(&info).await {
        return resp;
    }
    if verb == "watch" {
        return watch_response(server, &target, &params, req.headers(), &info);
    }
    let (parts, body) = req.into_parts();
    let body = match read_body(&parts.headers, body).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let run = || match def.review {
        Some(review) => review_response(server, &target, review, &parts.headers, user, &body),
        None => dispatch(
            server,
            &target,
            verb,
            &parts.headers,
            content_type,
            &params,
            &body,
        ),
    };
    let result = if body.len() > BLOCKING_BODY_BYTES || decode::is_yaml(content_type) {
        off_the_workers(run)
    } else {
        run()
    };
    result.unwrap_or_else(ApiError::into_response)
}

/// An OpenAPI v3 document with the `ETag` its index URL carries.
fn openapi_response(body: &[u8], etag: &str) -> Response<Body> {
    let mut r = json_response(StatusCode::OK, Bytes::copy_from_slice(body));
    if let Ok(v) = HeaderValue::from_str(&format!("\"{etag}\"")) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}

/// Answer a review (create only, nothing stored): access reviews decided
/// by the cluster's authorizer (everything allowed when RBAC is off),
/// token reviews by its token registry.
fn review_response(
    server: &Server,
    target: &Target<'_>,
    review: Review,
    headers: &HeaderMap,
    user: Option<UserInfo>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut request = server.decoders.decode(&target.def, content_type, body)?;
    semantics::check_body(&target.def, &mut request)?;
    let requester = || {
        user.clone().unwrap_or_else(|| {
            server.authz.user_of(
                headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok()),
            )
        })
    };
    let decide = |u: &UserInfo, r: &rbac::RequestInfo| server.authz.decide(u, r);
    let answer = match review {
        Review::SelfSubjectAccess => {
            rbac::decide_self_subject_access_review(&decide, &requester(), &request)
        }
        Review::SubjectAccess => rbac::decide_subject_access_review(&decide, &request),
        Review::Token => rbac::token_review(&request, &|t| server.authz.token_user(t)),
        Review::SelfSubject => Ok(rbac::self_subject_review(&requester(), &request)),
    };
    match answer {
        Ok(v) => Ok(value_response(StatusCode::CREATED, &v)),
        Err(status) => Err(ApiError::from_status(&status)),
    }
}

fn manager<'a>(params: &'a Params, headers: &'a HeaderMap) -> &'a str {
    if let Some(m) = params.get("fieldManager") {
        return m;
    }
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .unwrap_or("unknown")
}

fn part_of(target: &Target<'_>) -> Result<Part, ApiError> {
    let def = &target.def;
    match target.sub {
        None => Ok(Part::Main),
        Some(sub) if def.has_subresource(sub) && sub == "status" => Ok(Part::Status),
        Some(sub) if def.has_subresource(sub) && sub == "scale" => Ok(Part::Scale),
        Some(_) => Err(ApiError::not_found_path()),
    }
}

fn dispatch(
    server: &Server,
    target: &Target<'_>,
    verb: &str,
    headers: &HeaderMap,
    content_type: &str,
    params: &Params,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let api = &server.api;
    let def = &target.def;
    let parse_body = |body: &[u8]| server.decoders.decode(def, content_type, body);
    let ns = target.namespace.unwrap_or("");
    let name = target.name.unwrap_or("");
    let dry_run = params.get("dryRun").is_some_and(|d| d == "All");
    let ctx = WriteCtx::new(manager(params, headers), dry_run);
    if def.namespaced && target.namespace.is_none() && !matches!(verb, "list" | "watch") {
        return Err(ApiError::not_found("namespaces", ""));
    }
    match verb {
        "get" => {
            let stored = api.get(def, ns, name)?;
            // A get at a resourceVersion is served from kube-apiserver's
            // watch cache, which must have reached that version.
            if let Some(rv) = params.get("resourceVersion").filter(|v| !v.is_empty()) {
                let rv: u64 = rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?;
                let current = api.store.current_rv();
                if rv > current {
                    return Err(ApiError::too_large_resource_version(rv, current));
                }
            }
            let table = table_request(headers, params)?;
            match (part_of(target)?, table) {
                (Part::Scale, _) => Ok(value_response(
                    StatusCode::OK,
                    &semantics::scale_of(def, &stored.value()),
                )),
                (Part::Main, Some(table)) => {
                    let value = stored.value();
                    let row = table.row(def, &value, def.to_view(value.clone()), api.now());
                    let doc = table.table(
                        def,
                        json!({"resourceVersion": stored.rv.to_string()}),
                        vec![row],
                    );
                    Ok(table_response(&table, &doc))
                }
                _ => Ok(stored_response(def, StatusCode::OK, &stored)),
            }
        }
        "list" => list(api, target, params, headers, server.sharded_list_and_watch),
        "create" if target.sub == Some("binding") && def.id == PODS => {
            let body = parse_body(body)?;
            api.bind(ns, name, &body, ctx)?;
            Ok(value_response(
                StatusCode::CREATED,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            ))
        }
        "create" if target.name.is_none() => {
            let stored = if decode::is_json(content_type) {
                api.create_body(def, ns, body, &parse_body, ctx)?
            } else {
                api.create(def, ns, parse_body(body)?, ctx)?
            };
            Ok(stored_response(def, StatusCode::CREATED, &stored))
        }
        "update" => {
            let part = part_of(target)?;
            let body = parse_body(body)?;
            let stored = api.update(def, ns, name, part, body, ctx)?;
            Ok(part_response(def, part, &stored))
        }
        "patch" => {
            let part = part_of(target)?;
            let ct = content_type;
            let kind = PatchKind::from_content_type(ct)
                .filter(|k| *k != PatchKind::Strategic || def.strategic_merge)
                .ok_or_else(|| {
                    let accepted = if def.strategic_merge {
                        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
                    } else {
                        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                    };
                    ApiError::new(
                        415,
                        "UnsupportedMediaType",
                        format!("the body of the request was in an unknown format - accepted media types include: {accepted}"),
                    )
                })?;
            let force = query::flag(params, "force");
            let mgr = if kind == PatchKind::Apply {
                params.get("fieldManager").map(String::as_str).unwrap_or("")
            } else {
                ctx.manager
            };
            let ctx = WriteCtx::new(mgr, dry_run);
            let stored = api.patch(def, ns, name, part, kind, body, force, ctx)?;
            Ok(part_response(def, part, &stored))
        }
        "delete" => {
            let opts = delete_opts(params, body)?;
            match api.delete(def, ns, name, &opts)? {
                Deleted::Gone(s) => Ok(stored_response(def, StatusCode::OK, &s)),
                Deleted::Pending(s) => Ok(stored_response(def, StatusCode::ACCEPTED, &s)),
            }
        }
        "deletecollection" => {
            let opts = delete_opts(params, body)?;
            let (labels, fields) = selectors(def, params)?;
            let (items, _) = api.store.list(def.storage, target.namespace, None);
            let mut deleted = Vec::new();
            for item in items
                .iter()
                .filter(|s| labels.matches_stored(s) && fields.matches_stored(s))
            {
                let (ins, n) = (&item.summary.namespace, &item.summary.name);
                match api.delete(def, ins, n, &opts) {
                    Ok(Deleted::Gone(s) | Deleted::Pending(s)) => deleted.push(s),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let rv = api.store.current_rv();
            Ok(list_response(def, rv, &deleted, None, None))
        }
        _ => Err(ApiError::new(405, "MethodNotAllowed", "unsupported verb")),
    }
}

fn part_response(def: &ResourceDef, part: Part, stored: &Stored) -> Response<Body> {
    match part {
        Part::Scale => value_response(StatusCode::OK, &semantics::scale_of(def, &stored.value())),
        _ => stored_response(def, StatusCode::OK, stored),
    }
}

fn delete_opts(params: &Params, body: &[u8]) -> Result<DeleteOpts, ApiError> {
    let mut opts = DeleteOpts::default();
    let trimmed = body.iter().all(u8::is_ascii_whitespace);
    if !trimmed {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        opts.grace_period = v.get("gracePeriodSeconds").and_then(Value::as_i64);
        opts.propagation = v
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string);
        if v.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            opts.propagation = Some("Orphan".into());
        }
        opts.uid = v
            .at(&["preconditions", "uid"])
            .and_then(Value::as_str)
            .map(str::to_string);
        opts.resource_version = v
            .at(&["preconditions", "resourceVersion"])
            .and_then(Value::as_str)
            .map(str::to_string);
        opts.dry_run = v
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"));
    }
    if let Some(g) = query::int64(params, "gracePeriodSeconds")? {
        opts.grace_period = Some(g);
    }
    if let Some(p) = params.get("propagationPolicy") {
        opts.propagation = Some(p.clone());
    }
    if query::flag(params, "orphanDependents") {
        opts.propagation = Some("Orphan".into());
    }
    if params.get("dryRun").is_some_and(|d| d == "All") {
        opts.dry_run = true;
    }
    Ok(opts)
}

/// The request's selectors; field paths of a view are mapped to the
/// stored form they are matched against.
fn selectors(
    def: &ResourceDef,
    params: &Params,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = match params.get("labelSelector") {
        Some(s) => LabelSelector::parse(s)?,
        None => LabelSelector::default(),
    };
    let mut fields = match params.get("fieldSelector") {
        Some(s) => FieldSelector::parse(s)?,
        None => FieldSelector::default(),
    };
    if let Some(c) = &def.conversion {
        fields.map_paths(|p| c.stored_field(p));
    }
    Ok((labels, fields))
}

/// A continue token: the key to go on after and the first page's
/// resourceVersion, which every later page reports, as kube-apiserver's
/// tokens carry it: a client watching from the last page's version then
/// sees every change made while it paged (the pages themselves are read
/// from the current state, not from a snapshot at that version).
fn encode_continue(key: &Key, rv: u64) -> String {
    let raw = format!("{rv}/{}/{}", key.0, key.1);
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(Key, u64), ApiError> {
    let bad = || ApiError::bad_request("invalid continue token");
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Result<Vec<u8>, _> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or(""), 16))
        .collect();
    let raw = String::from_utf8(bytes.map_err(|_| bad())?).map_err(|_| bad())?;
    let (rv, key) = raw.split_once('/').ok_or_else(bad)?;
    let rv = rv.parse().map_err(|_| bad())?;
    let (ns, name) = key.split_once('/').ok_or_else(bad)?;
    Ok(((ns.to_string(), name.to_string()), rv))
}

fn list_response(
    def: &ResourceDef,
    rv: u64,
    items: &[Arc<Stored>],
    cont: Option<(String, usize)>,
    shard_info: Option<&str>,
) -> Response<Body> {
    let size: usize = items.iter().map(|s| s.json.len() + 1).sum();
    let mut buf = BytesMut::with_capacity(size + 256);
    buf.extend_from_slice(b"{\"kind\":\"");
    buf.extend_from_slice(def.kind.as_bytes());
    buf.extend_from_slice(b"List\",\"apiVersion\":\"");
    buf.extend_from_slice(def.api_version.as_bytes());
    buf.extend_from_slice(b"\",\"metadata\":");
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some((token, remaining)) = cont {
        meta["continue"] = json!(token);
        meta["remainingItemCount"] = json!(remaining);
    }
    if let Some(selector) = shard_info {
        meta["shardInfo"] = json!({ "selector": selector });
    }
    buf.extend_from_slice(meta.to_string().as_bytes());
    buf.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            buf.extend_from_slice(b",");
        }
        buf.extend_from_slice(&def.served_json(item));
    }
    buf.extend_from_slice(b"]}");
    json_response(StatusCode::OK, buf.freeze())
}

/// The Table the request asks for, if any.
fn table_request(headers: &HeaderMap, params: &Params) -> Result<Option<TableRequest>, ApiError> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !accept.contains("as=Table") {
        return Ok(None);
    }
    TableRequest::from_request(accept, params.get("includeObject").map(String::as_str))
}

fn table_response(table: &TableRequest, doc: &Value) -> Response<Body> {
    let mut r = value_response(StatusCode::OK, doc);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(table.content_type()),
    );
    r
}

fn list(
    api: &Api,
    target: &Target<'_>,
    params: &Params,
    headers: &HeaderMap,
    sharded: bool,
) -> Result<Response<Body>, ApiError> {
    let def = &target.def;
    let opts = ListOptions::parse(params, &def.label())?;
    let table = table_request(headers, params)?;
    let (labels, fields) = selectors(def, params)?;
    if opts.continue_token.is_some() && opts.version > 0 {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let shard = ShardSelector::from_params(params, sharded)?;
    let start = match &opts.continue_token {
        Some(c) => Some(decode_continue(c)?),
        None => None,
    };
    let limit = opts.limit;
    let (items, current) = api.store.list(
        def.storage,
        target.namespace,
        start.as_ref().map(|(key, _)| key),
    );
    let rv = match &start {
        // Later pages are at the first page's version, while the history
        // still reaches back to it (else 410, as kube-apiserver answers a
        // continue token older than its compaction).
        Some((_, first)) => match api.store.check_watch_start(*first) {
            Ok(()) => *first,
            Err(_) => {
                return Err(ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            }
        },
        None => list_version(api, def, &opts, current)?,
    };
    let mut matching = items.into_iter().filter(|s| {
        labels.matches_stored(s) && fields.matches_stored(s) && shard.matches_stored(s)
    });
    let page: Vec<Arc<Stored>> = match limit {
        Some(l) => matching.by_ref().take(l).collect(),
        None => matching.by_ref().collect(),
    };
    let remaining = matching.count();
    let cont = match page.last() {
        Some(last) if remaining > 0 => {
            let key = Api::key(def, &last.summary.namespace, &last.summary.name);
            Some((encode_continue(&key, rv), remaining))
        }
        _ => None,
    };
    if let Some(table) = table {
        let now = api.now();
        let rows = page
            .iter()
            .map(|s| {
                let value = s.value();
                table.row(def, &value, def.to_view(value.clone()), now)
            })
            .collect();
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if let Some((token, remaining)) = cont {
            meta["continue"] = json!(token);
            meta["remainingItemCount"] = json!(remaining);
        }
        return Ok(table_response(&table, &table.table(def, meta, rows)));
    }
    // KEP-5866: the applied selector is echoed, so the client knows.
    let shard_info = params
        .get("shardSelector")
        .filter(|_| !shard.is_empty())
        .map(String::as_str);
    Ok(list_response(def, rv, &page, cont, shard_info))
}

/// The resourceVersion a list is served at, as kube-apiserver serves
/// `resourceVersion` and `resourceVersionMatch`: the current one unless
/// the list must be exact; a version the store has not reached is `504
/// Too large resource version` (kube-apiserver answers so once its watch
/// cache waited three seconds for it; the store here is never behind, so
/// it answers at once); an exact list at an older version is served when
/// the resource has not changed since, otherwise it is `410 Expired`
/// (past versions are not kept).
fn list_version(
    api: &Api,
    def: &ResourceDef,
    opts: &ListOptions,
    current: u64,
) -> Result<u64, ApiError> {
    if opts.version > current {
        return Err(ApiError::too_large_resource_version(opts.version, current));
    }
    if !opts.exact() || opts.version == current {
        return Ok(current);
    }
    match api
        .store
        .unchanged_since(def.storage, opts.version, current)
    {
        Ok(true) => Ok(opts.version),
        Ok(false) | Err(_) => Err(ApiError::gone(
            "The resourceVersion for the provided list is too old.",
        )),
    }
}

fn watch_response(
    server: &Server,
    target: &Target<'_>,
    params: &Params,
    headers: &HeaderMap,
    info: &RequestInfo<'_>,
) -> Response<Body> {
    match watch_stream(server, target, params, headers, info) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn watch_stream(
    server: &Server,
    target: &Target<'_>,
    params: &Params,
    headers: &HeaderMap,
    info: &RequestInfo<'_>,
) -> Result<Response<Body>, ApiError> {
    let def = &target.def;
    let opts = ListOptions::parse(params, &def.label())?;
    let (labels, fields) = selectors(def, params)?;
    let shard = ShardSelector::from_params(params, server.sharded_list_and_watch)?;
    let bookmarks = opts.allow_bookmarks;
    let start = match (opts.send_initial_events, opts.version) {
        (Some(true), at_least) | (None, at_least @ 0) => Start::Initial {
            end_marker: opts.send_initial_events == Some(true) && bookmarks,
            at_least,
        },
        // sendInitialEvents=false: no initial state; resourceVersion 0 or
        // none means from now.
        (Some(false), 0) => Start::After(server.api.store.current_rv()),
        (_, rv) => Start::After(rv),
    };
    let timeout = opts.watch_timeout();
    let table = table_request(headers, params)?;
    // Watchers of a view or of Tables get frames encoded for them; the
    // others share the stored frames.
    let encode: Option<FrameFn> = if table.is_some() || def.has_view() {
        let def = def.clone();
        let api = server.api.clone();
        Some(Arc::new(move |kind: EventType, s: &Stored| match &table {
            Some(t) => {
                let stored = s.value();
                let served = def.to_view(stored.clone());
                let row = t.row(&def, &stored, served, api.now());
                let meta = json!({"resourceVersion": s.rv.to_string()});
                let value = t.table(&def, meta, vec![row]);
                build_frame(kind, 0, |buf| {
                    let _ = serde_json::to_writer(&mut *buf, &value);
                })
                .0
            }
            None => {
                let served = def.served_json(s);
                build_frame(kind, served.len(), |buf| buf.extend_from_slice(&served)).0
            }
        }) as FrameFn)
    } else {
        None
    };
    let spec = WatchSpec {
        resource: def.storage,
        kind: def.kind,
        api_version: def.api_version,
        encode,
        namespace: target.namespace.map(str::to_string),
        labels,
        fields,
        shard,
        start,
        bookmarks,
        timeout,
        bookmark_interval: server.bookmark_interval,
    };
    let frames = if server.faults.take_forced_gone(info) {
        futures::stream::iter([watch::gone_frame(
            "too old resource version: forced by fault injection",
        )])
        .boxed()
    } else {
        watch::watch(server.api.clone(), spec)
    };
    let frames = server
        .faults
        .wrap_watch(info, frames)
        .ready_chunks(WATCH_BATCH)
        .map(coalesce);
    let mut r = Response::new(Body::from_stream(frames.map(Ok::<_, Infallible>)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}
