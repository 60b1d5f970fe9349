//! Repeated creates from one body skip the JSON round trip.
//!
//! Controllers create many objects from one template: request bodies
//! identical but for `metadata.name`, or identical altogether when they
//! use `generateName`. The first create of such a body takes the general
//! path (parse, check, default, validate, serialize); the object it made,
//! serialized with gaps for the name, uid, creationTimestamp and
//! resourceVersion, and its summary, are kept here under the body with the
//! name's value cut out. A later create of the same body fills the gaps:
//! it neither parses nor serializes the object, which was most of a
//! create's cost.
//!
//! The result is the same as the general path's because, for the kinds
//! kept here, nothing on the create path depends on the name but the
//! name's own validation, which the fast path repeats (leaving any error
//! to the general path to report). Namespaces (a label carries the name)
//! and dry runs are never kept.

use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::encoded::Gapped;
use crate::json::At;
use crate::store::{FieldOwners, Write};
use crate::summary::Summary;

/// The metadata fields each create fills in, in the order of `Gapped`'s
/// field indexes.
const FIELDS: [&str; 4] = ["creationTimestamp", "name", "resourceVersion", "uid"];
const RESOURCE_VERSION: usize = 2;

/// Templates kept at most; past that the cache starts over (a controller
/// has a handful of templates, a test a few hundred bodies at most).
const CAPACITY: usize = 256;

/// Largest body kept as a template: the cache holds its bodies, so its
/// memory stays bounded (about 32 MiB at most) whatever tests create;
/// larger bodies take the general path every time.
const MAX_TEMPLATE_BODY: usize = 64 * 1024;

/// A request body split around the value of its `metadata.name`.
#[derive(Debug)]
pub(crate) struct Probe<'a> {
    pub(crate) resource: usize,
    namespace: &'a str,
    before: &'a [u8],
    after: &'a [u8],
    /// The body's `metadata.name`, decoded; `None` when it has none.
    pub(crate) name: Option<String>,
    hash: u64,
}

/// Where a body's name is: its other members are skipped, not kept. A
/// duplicate `metadata` or `name` key fails the probe (the general path
/// takes the last one).
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow)]
    metadata: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
}

/// One body's create, ready to be repeated under other names.
#[derive(Debug)]
pub(crate) struct Template {
    resource: usize,
    namespace: Box<str>,
    /// The body without the name's value, cut at `split`.
    key: Box<[u8]>,
    split: usize,
    named: bool,
    /// `metadata.generateName`, if not empty.
    pub(crate) generate: Option<String>,
    encoded: Gapped,
    summary: Summary,
}

impl Template {
    /// The template of `object`, the validated and defaulted object the
    /// general path made from `probe`'s body, and the write that stores
    /// `object` itself.
    pub(crate) fn new(
        probe: &Probe<'_>,
        generate: Option<String>,
        object: &mut Value,
    ) -> (Template, Write) {
        let field = |f| {
            object
                .at(&["metadata", f])
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (name, uid, timestamp) = (field("name"), field("uid"), field("creationTimestamp"));
        let summary = Summary::of(object);
        let encoded = Gapped::new(object, &FIELDS);
        let template = Template {
            resource: probe.resource,
            namespace: probe.namespace.into(),
            key: [probe.before, probe.after].concat().into(),
            split: probe.before.len(),
            named: probe.name.is_some(),
            generate,
            encoded,
            summary,
        };
        let write = template.write(&name, &uid, &timestamp);
        (template, write)
    }

    /// The write that stores this template's object under `name`.
    pub(crate) fn write(&self, name: &str, uid: &str, timestamp: &str) -> Write {
        Write::PutEncoded(
            self.summary.renamed(name, uid),
            self.encoded
                .fill(&[timestamp, name, "", uid], RESOURCE_VERSION),
            Arc::new(FieldOwners::new()),
        )
    }

    fn matches(&self, probe: &Probe<'_>) -> bool {
        self.resource == probe.resource
            && *self.namespace == *probe.namespace
            && self.named == probe.name.is_some()
            && self.split == probe.before.len()
            && self.key.len() == probe.before.len() + probe.after.len()
            && self.key[..self.split] == *probe.before
            && self.key[self.split..] == *probe.after
    }
}

/// The templates of recent create bodies.
#[derive(Debug)]
pub(crate) struct Templates {
    by_hash: Mutex<HashMap<u64, Arc<Template>>>,
    hasher: foldhash::fast::RandomState,
}

impl Templates {
    pub(crate) fn new() -> Templates {
        Templates {
            by_hash: Mutex::new(HashMap::new()),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Split `body` around its name; `None` when it is larger than
    /// [`MAX_TEMPLATE_BODY`], not a JSON object with plain (unescaped) keys, or its
    /// metadata or name has a type the general path rejects.
    pub(crate) fn probe<'a>(
        &self,
        resource: usize,
        namespace: &'a str,
        body: &'a [u8],
    ) -> Option<Probe<'a>> {
        if body.len() > MAX_TEMPLATE_BODY {
            return None;
        }
        let top: Top<'a> = serde_json::from_slice(body).ok()?;
        let mut split = None;
        if let Some(raw) = top.metadata.and_then(|m| m.name) {
            let name: String = serde_json::from_str(raw.get()).ok()?;
            let start = raw
                .get()
                .as_ptr()
                .addr()
                .checked_sub(body.as_ptr().addr())?;
            let end = start.checked_add(raw.get().len())?;
            split = Some((body.get(..start)?, body.get(end..)?, name));
        }
        let (before, after, name) = match split {
            Some((before, after, name)) => (before, after, Some(name)),
            None => (body, &[][..], None),
        };
        let hash = self
            .hasher
            .hash_one((resource, namespace, before, after, name.is_some()));
        Some(Probe {
            resource,
            namespace,
            before,
            after,
            name,
            hash,
        })
    }

    /// The template made from `probe`'s body, if there is one.
    pub(crate) fn get(&self, probe: &Probe<'_>) -> Option<Arc<Template>> {
        let by_hash = self.by_hash.lock();
        by_hash
            .get(&probe.hash)
            .filter(|t| t.matches(probe))
            .cloned()
    }

    /// Keep `template`, made from `probe`'s body.
    pub(crate) fn insert(&self, probe: &Probe<'_>, template: Template) {
        let mut by_hash = self.by_hash.lock();
        if by_hash.len() >= CAPACITY {
            by_hash.clear();
        }
        by_hash.insert(probe.hash, Arc::new(template));
    }
}
