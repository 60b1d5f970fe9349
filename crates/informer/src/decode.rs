//! Decoding objects one at a time, so one object the client cannot decode
//! (a field beyond its type's range, a newer API's shape) is skipped and
//! reported instead of failing a whole list or watch.
//!
//! The common case costs nothing extra: a list body or a watch line is
//! decoded straight into `K`, exactly as before. Only when that fails is
//! the same text decoded again, each object kept as raw JSON and decoded on
//! its own, falling back to its metadata when `K` does not fit.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::{Status, WatchEvent};
use kube::runtime::watcher::Event;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::key::ObjectKey;

/// An object as the informer received it: decoded into `K`, or not
/// decodable into `K` (see [`UndecodableObject`]).
#[derive(Debug, Clone)]
pub enum MaybeDecoded<K> {
    /// The object, decoded.
    Decoded(K),
    /// The object could not be decoded into `K`; what is known of it.
    Undecodable(UndecodableObject),
}

impl<K: DeserializeOwned> MaybeDecoded<K> {
    /// Decodes one object from its JSON text: into `K` when it fits,
    /// otherwise an [`UndecodableObject`] with as much of the metadata as
    /// can be read and the error that stopped the decoding of `K`.
    ///
    /// ```
    /// use ctrlkit_informer::MaybeDecoded;
    /// use k8s_openapi::api::apps::v1::ReplicaSet;
    ///
    /// let json = r#"{"metadata": {"namespace": "ns", "name": "big", "resourceVersion": "7"},
    ///                "spec": {"replicas": 2147483648, "selector": {}}}"#;
    /// match MaybeDecoded::<ReplicaSet>::from_json(json) {
    ///     MaybeDecoded::Undecodable(bad) => {
    ///         assert_eq!(bad.key().unwrap().to_string(), "ns/big");
    ///         assert!(bad.error().to_string().contains("2147483648"));
    ///     }
    ///     MaybeDecoded::Decoded(_) => unreachable!("replicas does not fit in an i32"),
    /// }
    /// ```
    pub fn from_json(json: &str) -> Self {
        match serde_json::from_str::<K>(json) {
            Ok(obj) => Self::Decoded(obj),
            Err(error) => Self::Undecodable(UndecodableObject::new(metadata_of(json), error)),
        }
    }
}

impl<K: Resource> MaybeDecoded<K> {
    /// The object's metadata: all of it when decoded, what could be read
    /// otherwise.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Self::Decoded(obj) => obj.meta(),
            Self::Undecodable(bad) => bad.metadata(),
        }
    }
}

impl<K> From<K> for MaybeDecoded<K> {
    fn from(obj: K) -> Self {
        Self::Decoded(obj)
    }
}

/// An object the informer received but could not decode into its type:
/// the metadata that could be read and the decoding error.
///
/// The informer skips such an object (it keeps the last version it could
/// decode, if any) and reports it: a warn log, the `decode_errors` count
/// and [`EventHandler::on_undecodable`](crate::EventHandler::on_undecodable).
#[derive(Debug, Clone)]
pub struct UndecodableObject {
    // Boxed: it is the rare case, and keeps every event small.
    metadata: Box<ObjectMeta>,
    error: Arc<serde_json::Error>,
}

impl UndecodableObject {
    /// An undecodable object with the `metadata` that could be read and the
    /// `error` that stopped the decoding.
    pub fn new(metadata: ObjectMeta, error: serde_json::Error) -> Self {
        Self {
            metadata: Box::new(metadata),
            error: Arc::new(error),
        }
    }

    /// The object's metadata as far as it could be decoded; empty when even
    /// the metadata did not decode.
    pub fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    /// Why the object could not be decoded into the informer's type.
    pub fn error(&self) -> &serde_json::Error {
        &self.error
    }

    /// The object's store key, if its name could be read.
    pub fn key(&self) -> Option<ObjectKey> {
        let name = self.metadata.name.as_deref().filter(|n| !n.is_empty())?;
        Some(ObjectKey::new(
            self.metadata.namespace.clone().unwrap_or_default(),
            name,
        ))
    }

    /// The object's resourceVersion, if it could be read.
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
}

impl fmt::Display for UndecodableObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.key() {
            Some(key) => write!(f, "object {key}")?,
            None => f.write_str("an object without a readable name")?,
        }
        if let Some(rv) = self.resource_version() {
            write!(f, " at resourceVersion {rv}")?;
        }
        write!(f, " cannot be decoded: {}", self.error)
    }
}

/// The metadata of an object, or empty metadata if even that does not
/// decode.
fn metadata_of(json: &str) -> ObjectMeta {
    #[derive(Deserialize)]
    struct MetadataOnly {
        #[serde(default)]
        metadata: ObjectMeta,
    }
    serde_json::from_str::<MetadataOnly>(json)
        .map(|m| m.metadata)
        .unwrap_or_default()
}

/// One page of a list response, decoded by [`decode_list`].
#[derive(Debug)]
#[non_exhaustive]
pub struct ListPage<K> {
    /// The list's resourceVersion, if not empty.
    pub resource_version: Option<String>,
    /// The token for the next page, if any.
    pub continue_token: Option<String>,
    /// The objects, each decoded on its own.
    pub items: Vec<MaybeDecoded<K>>,
    /// The shard selector the server says it applied
    /// (`metadata.shardInfo.selector`, KEP-5866), if any.
    pub shard_selector: Option<String>,
}

/// A list response body. (kube's `ObjectList` flattens its type fields,
/// which makes serde buffer the whole body before decoding the items.)
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
struct ListBody<T> {
    #[serde(default)]
    metadata: ListBodyMeta,
    #[serde(default = "Vec::new", deserialize_with = "null_as_empty")]
    items: Vec<T>,
}

/// The list metadata the informer reads. Its own type: `shardInfo`
/// (KEP-5866) is in k8s-openapi's `ListMeta` only for Kubernetes 1.36 and
/// later.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListBodyMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
    #[serde(default)]
    shard_info: Option<ShardInfo>,
}

/// `metadata.shardInfo` of a list (KEP-5866): the selector the server
/// applied, echoed back.
#[derive(Deserialize)]
struct ShardInfo {
    #[serde(default)]
    selector: Option<String>,
}

fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// Decodes a list response body as the informer does: an item that does not
/// decode into `K` becomes [`MaybeDecoded::Undecodable`]. Fails only if the
/// body is not a list at all.
///
/// When every item decodes, this is one pass over the body (kube's
/// `ObjectList` buffers the body first, for its flattened type fields);
/// otherwise the body is read a second time, item by item.
pub fn decode_list<K: DeserializeOwned>(body: &str) -> Result<ListPage<K>, serde_json::Error> {
    decode_list_as::<Converted<K>, K>(body)
}

/// [`decode_list`] with each item decoded as `S` and converted into `K`.
fn decode_list_as<S, K>(body: &str) -> Result<ListPage<K>, serde_json::Error>
where
    S: Shape<K>,
{
    let (metadata, items) = match serde_json::from_str::<ListBody<S>>(body) {
        Ok(list) => (
            list.metadata,
            list.items
                .into_iter()
                .map(|item| MaybeDecoded::Decoded(item.into_object()))
                .collect(),
        ),
        Err(error) => match serde_json::from_str::<ListBody<Box<RawValue>>>(body) {
            Ok(list) => (
                list.metadata,
                list.items
                    .iter()
                    .map(|raw| MaybeDecoded::<S>::from_json(raw.get()).convert())
                    .collect(),
            ),
            // Not even a list of JSON values: the first error says most.
            Err(_) => return Err(error),
        },
    };
    Ok(ListPage {
        resource_version: metadata.resource_version.filter(|rv| !rv.is_empty()),
        continue_token: metadata.continue_.filter(|c| !c.is_empty()),
        items,
        shard_selector: metadata.shard_info.and_then(|i| i.selector),
    })
}

/// A watch event with its object still raw. A struct rather than kube's
/// adjacently tagged enum, so the fields may come in any order.
#[derive(Deserialize)]
struct RawWatchEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// Decodes one line of a watch response as the informer does.
///
/// When the object decodes into `K` this costs what decoding a
/// `WatchEvent<K>` costs; otherwise the line is read again with the
/// object kept raw and decoded on its own. `Ok(None)` for a blank line. An object that does not decode into `K`
/// becomes [`MaybeDecoded::Undecodable`]; a line that is not a watch event
/// at all is an error (a [`Status`](kube::core::Status) line is the API's
/// error, anything else a decoding error).
pub fn decode_watch_line<K: DeserializeOwned>(
    line: &str,
) -> Result<Option<WatchEvent<MaybeDecoded<K>>>, kube::Error> {
    decode_watch_line_as::<Converted<K>, K>(line)
}

/// [`decode_watch_line`] with the object decoded as `S` and converted into
/// `K`.
fn decode_watch_line_as<S, K>(
    line: &str,
) -> Result<Option<WatchEvent<MaybeDecoded<K>>>, kube::Error>
where
    S: Shape<K>,
{
    if line.trim().is_empty() {
        return Ok(None);
    }
    let error = match serde_json::from_str::<WatchEvent<S>>(line) {
        Ok(event) => {
            return Ok(Some(map_watch_event(event, |obj| {
                MaybeDecoded::Decoded(obj.into_object())
            })));
        }
        Err(error) => error,
    };
    if let Ok(raw) = serde_json::from_str::<RawWatchEvent<'_>>(line) {
        let object = || MaybeDecoded::<S>::from_json(raw.object.get()).convert();
        match raw.kind {
            "ADDED" => return Ok(Some(WatchEvent::Added(object()))),
            "MODIFIED" => return Ok(Some(WatchEvent::Modified(object()))),
            "DELETED" => return Ok(Some(WatchEvent::Deleted(object()))),
            _ => {}
        }
    }
    if let Ok(status) = serde_json::from_str::<Status>(line)
        && (status.code != 0 || !status.message.is_empty())
    {
        return Err(kube::Error::Api(status.boxed()));
    }
    Err(kube::Error::SerdeError(error))
}

/// How the informer turns a list body or a watch line into objects of type
/// `K`: decoded as `K` itself ([`full`](Self::full)), or as a smaller shape
/// converted into `K` ([`Transform::decode_as`](crate::Transform::decode_as)).
pub(crate) struct Decoder<K> {
    pub(crate) object: fn(&str) -> MaybeDecoded<K>,
    pub(crate) list: fn(&str) -> Result<ListPage<K>, serde_json::Error>,
    pub(crate) watch_line: fn(&str) -> WatchLineResult<K>,
}

/// What decoding one watch line gives (see [`decode_watch_line`]).
pub(crate) type WatchLineResult<K> = Result<Option<WatchEvent<MaybeDecoded<K>>>, kube::Error>;

// Manual: fn pointers are `Copy` whatever `K` is; a derive would ask `K: Copy`.
impl<K> Clone for Decoder<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Decoder<K> {}

impl<K> fmt::Debug for Decoder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder").finish_non_exhaustive()
    }
}

impl<K: DeserializeOwned> Decoder<K> {
    /// Every object decoded in full as `K`.
    pub(crate) fn full() -> Self {
        Self::shaped::<Converted<K>>()
    }
}

impl<K> Decoder<K> {
    /// Every object decoded as `S`, then converted into `K`.
    pub(crate) fn shaped<S: Shape<K>>() -> Self {
        Self {
            object: |json| MaybeDecoded::<S>::from_json(json).convert(),
            list: decode_list_as::<S, K>,
            watch_line: decode_watch_line_as::<S, K>,
        }
    }
}

/// What the informer decodes each object as, and how that becomes a `K`.
pub(crate) trait Shape<K>: DeserializeOwned {
    /// The object.
    fn into_object(self) -> K;
}

/// A shape converted with `Into` (`K` itself, or a
/// [`Transform::decode_as`](crate::Transform::decode_as) shape).
#[derive(Deserialize)]
#[serde(transparent)]
pub(crate) struct Converted<S>(S);

impl<S: DeserializeOwned + Into<K>, K> Shape<K> for Converted<S> {
    fn into_object(self) -> K {
        self.0.into()
    }
}

impl<S> MaybeDecoded<S> {
    /// The decoded object converted into `K`; an undecodable one as it is.
    fn convert<K>(self) -> MaybeDecoded<K>
    where
        S: Shape<K>,
    {
        match self {
            Self::Decoded(obj) => MaybeDecoded::Decoded(obj.into_object()),
            Self::Undecodable(bad) => MaybeDecoded::Undecodable(bad),
        }
    }
}

fn map_watch_event<A, B>(event: WatchEvent<A>, f: impl FnOnce(A) -> B) -> WatchEvent<B> {
    match event {
        WatchEvent::Added(o) => WatchEvent::Added(f(o)),
        WatchEvent::Modified(o) => WatchEvent::Modified(f(o)),
        WatchEvent::Deleted(o) => WatchEvent::Deleted(f(o)),
        WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
        WatchEvent::Error(e) => WatchEvent::Error(e),
    }
}

/// A watcher event of decoded objects as one of possibly undecodable ones.
pub(crate) fn lift_event<K>(event: Event<K>) -> Event<MaybeDecoded<K>> {
    match event {
        Event::Apply(o) => Event::Apply(MaybeDecoded::Decoded(o)),
        Event::Delete(o) => Event::Delete(MaybeDecoded::Decoded(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(MaybeDecoded::Decoded(o)),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;

    fn rs(name: &str, replicas: &str) -> String {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{{"namespace":"ns","name":"{name}","uid":"u-{name}","resourceVersion":"5"}},"spec":{{"replicas":{replicas},"selector":{{}}}}}}"#
        )
    }

    fn names<K: kube::Resource>(items: &[MaybeDecoded<K>]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                MaybeDecoded::Decoded(o) => {
                    format!("ok {}", o.meta().name.as_deref().unwrap_or(""))
                }
                MaybeDecoded::Undecodable(u) => format!("bad {}", u.key().unwrap()),
            })
            .collect()
    }

    #[test]
    fn a_list_with_one_bad_item_keeps_the_others() {
        let body = format!(
            r#"{{"kind":"ReplicaSetList","apiVersion":"apps/v1","metadata":{{"resourceVersion":"9","continue":""}},"items":[{},{},{}]}}"#,
            rs("a", "1"),
            rs("big", "2147483648"),
            rs("c", "3")
        );
        let page = decode_list::<ReplicaSet>(&body).unwrap();
        assert_eq!(page.resource_version.as_deref(), Some("9"));
        assert_eq!(page.continue_token, None);
        assert_eq!(names(&page.items), ["ok a", "bad ns/big", "ok c"]);
        let MaybeDecoded::Undecodable(bad) = &page.items[1] else {
            unreachable!()
        };
        assert_eq!(bad.resource_version(), Some("5"));
        assert_eq!(bad.metadata().uid.as_deref(), Some("u-big"));
        let shown = bad.to_string();
        assert!(
            shown.starts_with("object ns/big at resourceVersion 5 cannot be decoded: invalid value: integer `2147483648`"),
            "{shown}"
        );
    }

    #[test]
    fn null_items_and_malformed_bodies() {
        let page =
            decode_list::<ReplicaSet>(r#"{"metadata":{"resourceVersion":"3"},"items":null}"#)
                .unwrap();
        assert!(page.items.is_empty());
        assert!(decode_list::<ReplicaSet>("not json").is_err());
        assert!(decode_list::<ReplicaSet>(r#"{"items":[1,"#).is_err());
    }

    #[test]
    fn watch_lines_decode_per_object() {
        let good = format!(r#"{{"type":"ADDED","object":{}}}"#, rs("a", "1"));
        assert!(matches!(
            decode_watch_line::<ReplicaSet>(&good),
            Ok(Some(WatchEvent::Added(MaybeDecoded::Decoded(_))))
        ));
        // Object first, type last: still understood when the object is bad.
        let bad = format!(
            r#"{{"object":{},"type":"MODIFIED"}}"#,
            rs("big", "2147483648")
        );
        match decode_watch_line::<ReplicaSet>(&bad) {
            Ok(Some(WatchEvent::Modified(MaybeDecoded::Undecodable(u)))) => {
                assert_eq!(u.key().unwrap().to_string(), "ns/big")
            }
            other => panic!("unexpected {other:?}"),
        }
        let bookmark = r#"{"type":"BOOKMARK","object":{"kind":"ReplicaSet","apiVersion":"apps/v1","metadata":{"resourceVersion":"12"}}}"#;
        assert!(matches!(
            decode_watch_line::<ReplicaSet>(bookmark),
            Ok(Some(WatchEvent::Bookmark(b))) if b.metadata.resource_version == "12"
        ));
        assert!(matches!(decode_watch_line::<ReplicaSet>("  "), Ok(None)));
        let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"boom","reason":"InternalError","code":500}"#;
        assert!(matches!(
            decode_watch_line::<ReplicaSet>(status),
            Err(kube::Error::Api(s)) if s.code == 500
        ));
        assert!(matches!(
            decode_watch_line::<ReplicaSet>("{garbage"),
            Err(kube::Error::SerdeError(_))
        ));
    }

    #[test]
    fn metadata_that_does_not_decode_leaves_an_anonymous_object() {
        let json = r#"{"metadata":{"name":5},"spec":{"replicas":"x"}}"#;
        let MaybeDecoded::Undecodable(u) = MaybeDecoded::<ReplicaSet>::from_json(json) else {
            panic!("decoded")
        };
        assert_eq!(u.key(), None);
        assert!(
            u.to_string()
                .starts_with("an object without a readable name cannot be decoded")
        );
    }
}
