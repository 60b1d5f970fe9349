//! The list/watch loop: what kube-runtime's `watcher` does, plus what an
//! informer needs and that watcher does not give:
//!
//! - objects are decoded one at a time ([`crate::decode`]), so one bad
//!   object is reported instead of failing the list or the watch;
//! - every successful response is visible, bookmarks and watches that ran
//!   to their timeout included (kube's watcher consumes them silently), so
//!   the informer can tell a quiet watch from a blind one;
//! - "Too large resource version" (HTTP 504, cause
//!   `ResourceVersionTooLarge`: the server's versions went backwards, e.g.
//!   after a restart on fresh storage) starts over with a fresh list, as
//!   client-go's reflector does. kube's watcher retries the watch from the
//!   same resourceVersion for ever and stays blind. Every informer sharing
//!   its [`ServerVersions`] with the one that saw it relists at once too;
//! - a watch line that cannot be read at all ends that watch and re-watches
//!   from the last resourceVersion, so the event is delivered again rather
//!   than lost.
//!
//! Otherwise it follows kube's watcher: paginated lists (or a streaming
//! list), a watch from the list's resourceVersion resumed after it ends,
//! 410 Gone answered with a relist, a client-side idle timeout of the watch
//! timeout plus 5 s, the same [`watcher::Config`] and [`watcher::Error`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{AsyncBufReadExt, Stream, StreamExt};
use http::HeaderValue;
use http::header::ACCEPT_ENCODING;
use kube::api::{ListParams, VersionMatch, WatchParams};
use kube::core::{Request, Status, WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, InitialListStrategy, ListSemantic};
use kube::{Api, Client, Resource};

use crate::consistent::ConsistentRead;
use crate::decode::{Decoder, ListPage as Page, MaybeDecoded};
use crate::health::{DEFAULT_WATCH_TIMEOUT, WATCH_IDLE_MARGIN};
use crate::server_versions::ServerVersions;
use crate::shard_selector::Narrowing;

/// What the loop hands to the informer.
#[derive(Debug)]
pub(crate) enum Step<K> {
    /// A change to apply (or the markers of a list). Boxed: an object is
    /// large (a `Pod` is over a kilobyte), and each stream layer between
    /// here and the informer would move it again.
    Event(Box<Event<MaybeDecoded<K>>>),
    /// A successful response with nothing to apply: a list page, a
    /// bookmark, a watch that ran to its end.
    Alive,
    /// The server's resourceVersions went backwards: the list that follows
    /// starts a new version history. `told`: another informer of the same
    /// server found out (see [`ServerVersions`]), not this one.
    VersionsReset { told: bool },
    /// A complete list (after `Init` and its `InitApply`s: apply
    /// `InitDone`), made with the shard selector of `generation`.
    ListDone { generation: u64 },
    /// The first page of a list made with shard selector `sent` came back
    /// with `echoed` in its `metadata.shardInfo.selector`.
    ShardAnswer {
        sent: String,
        echoed: Option<String>,
    },
}

impl<K> Step<K> {
    pub(crate) fn event(event: Event<MaybeDecoded<K>>) -> Self {
        Self::Event(Box::new(event))
    }
}

/// The shard selector (KEP-5866) a list/watch sends, with the generation
/// of the informer's selector it belongs to.
#[derive(Clone, Debug, Default)]
pub(crate) struct ShardQuery {
    pub(crate) generation: u64,
    pub(crate) selector: Option<String>,
}

pub(crate) type WatchLines<K> =
    BoxStream<'static, Result<WatchEvent<MaybeDecoded<K>>, kube::Error>>;

/// Where the loop lists and watches: the API server, or a script in tests.
/// Both read objects with `decoder`.
pub(crate) trait ListWatch<K>: Send + Sync + 'static {
    fn list(
        &self,
        params: &ListParams,
        shard: Option<&str>,
        decoder: Decoder<K>,
    ) -> BoxFuture<'static, Result<Page<K>, kube::Error>>;
    fn watch(
        &self,
        params: &WatchParams,
        shard: Option<&str>,
        resource_version: &str,
        decoder: Decoder<K>,
    ) -> BoxFuture<'static, Result<WatchLines<K>, kube::Error>>;
}

/// Adds KEP-5866's `shardSelector` query parameter to a list or watch.
fn with_shard<B>(
    mut request: http::Request<B>,
    shard: Option<&str>,
) -> Result<http::Request<B>, kube::Error> {
    let Some(selector) = shard else {
        return Ok(request);
    };
    let uri = request.uri().to_string();
    // Percent-encode everything but RFC 3986's unreserved characters.
    let encoded: String = selector
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let sep = if uri.contains('?') { '&' } else { '?' };
    *request.uri_mut() = format!("{uri}{sep}shardSelector={encoded}")
        .parse()
        .map_err(|e: http::uri::InvalidUri| {
            kube::Error::BuildRequest(kube::core::request::Error::BuildRequest(e.into()))
        })?;
    Ok(request)
}

/// The API server behind an [`Api`].
pub(crate) struct ApiSource {
    client: Client,
    request: Request,
    metadata_api: bool,
}

impl ApiSource {
    pub(crate) fn new<K: Resource + Clone>(api: &Api<K>) -> Self {
        Self {
            client: api.clone().into_client(),
            request: Request::new(api.resource_url()),
            metadata_api: K::metadata_api(),
        }
    }
}

impl<K> ListWatch<K> for ApiSource
where
    K: Send + 'static,
{
    fn list(
        &self,
        params: &ListParams,
        shard: Option<&str>,
        decoder: Decoder<K>,
    ) -> BoxFuture<'static, Result<Page<K>, kube::Error>> {
        let request = match self.metadata_api {
            true => self.request.list_metadata(params),
            false => self.request.list(params),
        };
        let client = self.client.clone();
        let request = request
            .map_err(kube::Error::BuildRequest)
            .and_then(|r| with_shard(r, shard));
        Box::pin(async move {
            let mut request = request?;
            request.extensions_mut().insert("list");
            let body = client.request_text(request).await?;
            (decoder.list)(&body).map_err(kube::Error::SerdeError)
        })
    }

    fn watch(
        &self,
        params: &WatchParams,
        shard: Option<&str>,
        resource_version: &str,
        decoder: Decoder<K>,
    ) -> BoxFuture<'static, Result<WatchLines<K>, kube::Error>> {
        let request = match self.metadata_api {
            true => self.request.watch_metadata(params, resource_version),
            false => self.request.watch(params, resource_version),
        };
        let client = self.client.clone();
        let request = request
            .map_err(kube::Error::BuildRequest)
            .and_then(|r| with_shard(r, shard));
        Box::pin(async move {
            let mut request = request?;
            request.extensions_mut().insert("watch");
            // As kube's own watch requests: its decompression layer cannot
            // read the multi-member gzip of newer servers' watch streams.
            request
                .headers_mut()
                .entry(ACCEPT_ENCODING)
                .or_insert(HeaderValue::from_static("identity"));
            let body = client.request_stream(request).await?;
            let lines = Box::pin(body).lines().filter_map(move |line| async move {
                match line {
                    Ok(line) => (decoder.watch_line)(&line).transpose(),
                    Err(error) => Some(Err(kube::Error::ReadEvents(error))),
                }
            });
            Ok(lines.boxed())
        })
    }
}

/// Where the loop is.
enum State<K> {
    /// About to start over with a fresh list; `reset` when the server's
    /// versions went backwards.
    Empty { reset: bool },
    /// Paging through a list. `resource_version` is the last page's.
    Listing {
        continue_token: Option<String>,
        resource_version: Option<String>,
        items: VecDeque<MaybeDecoded<K>>,
    },
    /// A streaming list: the initial events of a watch.
    InitialWatch { lines: WatchLines<K> },
    /// Listed; a watch from `resource_version` is to be opened.
    Listed { resource_version: String },
    /// Watching. `failed` once the server sent an error on this watch.
    Watching {
        resource_version: String,
        lines: WatchLines<K>,
        failed: bool,
    },
}

type Output<K> = Option<Result<Step<K>, watcher::Error>>;

/// The informer's event stream over `source`, objects read with `decoder`:
/// it never ends, and recovers by itself after an error (apply a backoff
/// between errors).
pub(crate) fn list_watch<K>(
    source: Arc<dyn ListWatch<K>>,
    config: watcher::Config,
    shard: ShardQuery,
    decoder: Decoder<K>,
) -> impl Stream<Item = Result<Step<K>, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
{
    futures::stream::unfold(
        (source, config, shard, State::Empty { reset: false }),
        move |(source, config, shard, mut state)| async move {
            loop {
                let (output, next) = step(&*source, &config, &shard, decoder, state).await;
                state = next;
                if let Some(output) = output {
                    return Some((output, (source, config, shard, state)));
                }
            }
        },
    )
}

/// [`list_watch`] (with kube's default backoff between errors) with the
/// shard selector `selector` holds, started over with a fresh list each
/// time the selector changes, and each time another informer sharing
/// `versions` finds the server's versions gone backwards (at once, even
/// in the middle of a backoff). When this one finds out, it tells them.
pub(crate) fn selected_list_watch<K>(
    source: Arc<dyn ListWatch<K>>,
    config: watcher::Config,
    decoder: Decoder<K>,
    selector: tokio::sync::watch::Receiver<(u64, Narrowing)>,
    versions: ServerVersions,
) -> impl Stream<Item = Result<Step<K>, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
{
    type Steps<K> = BoxStream<'static, Result<Step<K>, watcher::Error>>;
    enum Next<K> {
        Item(Option<Result<Step<K>, watcher::Error>>),
        Changed,
        Closed,
        Told,
    }
    /// What the loop keeps between items (moved, not cloned, per item).
    struct Loop<K> {
        selector: tokio::sync::watch::Receiver<(u64, Narrowing)>,
        /// Whether the selector's sender is still there.
        open: bool,
        current: Option<Steps<K>>,
        resets: tokio::sync::watch::Receiver<u64>,
        versions: ServerVersions,
        start: Box<dyn Fn(ShardQuery, Narrowing) -> Steps<K> + Send + Sync>,
    }
    let state = Loop {
        selector,
        open: true,
        current: None,
        resets: versions.subscribe(),
        versions,
        start: Box::new(move |shard: ShardQuery, narrowing: Narrowing| -> Steps<K> {
            list_watch(
                Arc::clone(&source),
                narrowed(&config, &narrowing),
                shard,
                decoder,
            )
            .default_backoff()
            .boxed()
        }),
    };
    futures::stream::unfold(state, |mut s| async move {
        loop {
            let stream = match s.current.as_mut() {
                Some(stream) => stream,
                None => {
                    let (generation, narrowing) = s.selector.borrow_and_update().clone();
                    let shard = ShardQuery {
                        generation,
                        selector: narrowing.selector.clone(),
                    };
                    s.current.insert((s.start)(shard, narrowing))
                }
            };
            let next = tokio::select! {
                biased;
                changed = s.selector.changed(), if s.open => match changed {
                    Ok(()) => Next::Changed,
                    Err(_) => Next::Closed,
                },
                // `s.versions` holds the sender, so this never fails.
                Ok(()) = s.resets.changed() => Next::Told,
                item = stream.next() => Next::Item(item),
            };
            match next {
                Next::Item(item) => {
                    // Told before this stream's backoff, not after.
                    if let Some(Err(error)) = &item
                        && versions_went_back(error)
                    {
                        s.versions.reset();
                        // Relisting already: not told again.
                        s.resets.borrow_and_update();
                    }
                    return item.map(|i| (i, s));
                }
                Next::Changed => s.current = None,
                Next::Closed => s.open = false,
                Next::Told => {
                    s.resets.borrow_and_update();
                    s.current = None;
                    return Some((Ok(Step::VersionsReset { told: true }), s));
                }
            }
        }
    })
}

/// One transition; `None` output means "keep going".
async fn step<K>(
    source: &dyn ListWatch<K>,
    config: &watcher::Config,
    shard: &ShardQuery,
    decoder: Decoder<K>,
    state: State<K>,
) -> (Output<K>, State<K>)
where
    K: Resource + Send + 'static,
{
    match state {
        State::Empty { reset: true } => {
            let found = Step::VersionsReset { told: false };
            (Some(Ok(found)), State::Empty { reset: false })
        }
        State::Empty { reset: false } => match config.initial_list_strategy {
            InitialListStrategy::ListWatch => (
                Some(Ok(Step::event(Event::Init))),
                State::Listing {
                    continue_token: None,
                    resource_version: None,
                    items: VecDeque::new(),
                },
            ),
            InitialListStrategy::StreamingList => {
                match source
                    .watch(
                        &watch_params(config, true),
                        shard.selector.as_deref(),
                        "0",
                        decoder,
                    )
                    .await
                {
                    Ok(lines) => (
                        Some(Ok(Step::event(Event::Init))),
                        State::InitialWatch { lines },
                    ),
                    Err(error) => (
                        Some(Err(watcher::Error::WatchStartFailed(error))),
                        State::Empty { reset: false },
                    ),
                }
            }
        },
        State::Listing {
            continue_token,
            resource_version,
            mut items,
        } => {
            if let Some(item) = items.pop_front() {
                let next = State::Listing {
                    continue_token,
                    resource_version,
                    items,
                };
                return (Some(Ok(Step::event(Event::InitApply(item)))), next);
            }
            if continue_token.is_none()
                && let Some(resource_version) = resource_version
            {
                return (
                    Some(Ok(Step::ListDone {
                        generation: shard.generation,
                    })),
                    State::Listed { resource_version },
                );
            }
            let mut params = list_params(config);
            params.continue_token = continue_token;
            let first = params.continue_token.is_none();
            let selector = shard.selector.as_deref();
            match source.list(&params, selector, decoder).await {
                Ok(page) if page.resource_version.is_none() && page.continue_token.is_none() => (
                    Some(Err(watcher::Error::NoResourceVersion)),
                    State::Empty { reset: false },
                ),
                Ok(page) => (
                    Some(Ok(match selector.filter(|_| first) {
                        Some(sent) => Step::ShardAnswer {
                            sent: sent.to_owned(),
                            echoed: page.shard_selector.clone(),
                        },
                        None => Step::Alive,
                    })),
                    State::Listing {
                        continue_token: page.continue_token,
                        resource_version: page.resource_version.or(resource_version),
                        items: page.items.into(),
                    },
                ),
                Err(error) => {
                    let reset = api_status(&error).is_some_and(is_too_large_resource_version);
                    (
                        Some(Err(watcher::Error::InitialListFailed(error))),
                        State::Empty { reset },
                    )
                }
            }
        }
        State::InitialWatch { mut lines } => match next_line(&mut lines, config.timeout).await {
            Line::Event(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => (
                Some(Ok(Step::event(Event::InitApply(obj)))),
                State::InitialWatch { lines },
            ),
            Line::Event(WatchEvent::Deleted(_)) => {
                tracing::warn!("delete event in the initial events of a streaming list; ignored");
                (None, State::InitialWatch { lines })
            }
            Line::Event(WatchEvent::Bookmark(bookmark)) => {
                if bookmark
                    .metadata
                    .annotations
                    .contains_key("k8s.io/initial-events-end")
                {
                    let next = State::Watching {
                        resource_version: bookmark.metadata.resource_version,
                        lines,
                        failed: false,
                    };
                    let done = Step::ListDone {
                        generation: shard.generation,
                    };
                    (Some(Ok(done)), next)
                } else {
                    (Some(Ok(Step::Alive)), State::InitialWatch { lines })
                }
            }
            Line::Event(WatchEvent::Error(status)) => {
                let next = match restart_for(&status) {
                    Some(reset) => State::Empty { reset },
                    None => State::InitialWatch { lines },
                };
                (Some(Err(watcher::Error::WatchError(status))), next)
            }
            Line::Failed(error) => (
                Some(Err(watcher::Error::WatchFailed(error))),
                State::Empty { reset: false },
            ),
            // The initial events are incomplete: start over.
            Line::Ended | Line::IdleTimeout => (None, State::Empty { reset: false }),
        },
        State::Listed { resource_version } => {
            match source
                .watch(
                    &watch_params(config, false),
                    shard.selector.as_deref(),
                    &resource_version,
                    decoder,
                )
                .await
            {
                Ok(lines) => (
                    None,
                    State::Watching {
                        resource_version,
                        lines,
                        failed: false,
                    },
                ),
                Err(error) => {
                    let next = match api_status(&error).and_then(restart_for) {
                        Some(reset) => State::Empty { reset },
                        None => State::Listed { resource_version },
                    };
                    (Some(Err(watcher::Error::WatchStartFailed(error))), next)
                }
            }
        }
        State::Watching {
            resource_version,
            mut lines,
            failed,
        } => match next_line(&mut lines, config.timeout).await {
            Line::Event(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                watched(obj, Event::Apply, lines, failed)
            }
            Line::Event(WatchEvent::Deleted(obj)) => watched(obj, Event::Delete, lines, failed),
            Line::Event(WatchEvent::Bookmark(bookmark)) => {
                let resource_version = Some(bookmark.metadata.resource_version)
                    .filter(|rv| !rv.is_empty())
                    .unwrap_or(resource_version);
                let next = State::Watching {
                    resource_version,
                    lines,
                    failed,
                };
                (Some(Ok(Step::Alive)), next)
            }
            Line::Event(WatchEvent::Error(status)) => {
                let next = match restart_for(&status) {
                    Some(reset) => State::Empty { reset },
                    None => State::Watching {
                        resource_version,
                        lines,
                        failed: true,
                    },
                };
                (Some(Err(watcher::Error::WatchError(status))), next)
            }
            // Re-watch from the last version: the server sends the event
            // we could not read again (unless the line said the version is
            // unusable).
            Line::Failed(error) => {
                let next = match api_status(&error).and_then(restart_for) {
                    Some(reset) => State::Empty { reset },
                    None => State::Listed { resource_version },
                };
                (Some(Err(watcher::Error::WatchFailed(error))), next)
            }
            // The watch ran to its timeout: the server had nothing more to
            // say, which is a successful response too.
            Line::Ended if !failed => (Some(Ok(Step::Alive)), State::Listed { resource_version }),
            Line::Ended => (None, State::Listed { resource_version }),
            Line::IdleTimeout => {
                tracing::debug!("watch idle for longer than its timeout; reconnecting");
                (None, State::Listed { resource_version })
            }
        },
    }
}

/// An object event while watching: applied, and the watch resumes from its
/// resourceVersion (which every watched object must have).
fn watched<K: Resource>(
    obj: MaybeDecoded<K>,
    event: fn(MaybeDecoded<K>) -> Event<MaybeDecoded<K>>,
    lines: WatchLines<K>,
    failed: bool,
) -> (Output<K>, State<K>) {
    match obj
        .metadata()
        .resource_version
        .clone()
        .filter(|rv| !rv.is_empty())
    {
        Some(resource_version) => (
            Some(Ok(Step::event(event(obj)))),
            State::Watching {
                resource_version,
                lines,
                failed,
            },
        ),
        None => (
            Some(Err(watcher::Error::NoResourceVersion)),
            State::Empty { reset: false },
        ),
    }
}

/// What reading a watch gave.
enum Line<K> {
    Event(WatchEvent<MaybeDecoded<K>>),
    Failed(kube::Error),
    Ended,
    IdleTimeout,
}

/// The next watch event, giving up on a connection that stays silent for
/// longer than the watch timeout plus a margin (a `timeout` of 0 disables
/// this, as in kube's watcher).
async fn next_line<K>(lines: &mut WatchLines<K>, timeout: Option<u32>) -> Line<K> {
    let next = async {
        match lines.next().await {
            Some(Ok(event)) => Line::Event(event),
            Some(Err(error)) => Line::Failed(error),
            None => Line::Ended,
        }
    };
    if timeout == Some(0) {
        return next.await;
    }
    let server_timeout =
        timeout.map_or(DEFAULT_WATCH_TIMEOUT, |t| Duration::from_secs(u64::from(t)));
    tokio::time::timeout(server_timeout + WATCH_IDLE_MARGIN, next)
        .await
        .unwrap_or(Line::IdleTimeout)
}

/// A consistent (quorum) list of `source` with `config`'s selectors, page
/// by page, as a [`ConsistentRead`]: each object's UID and
/// resourceVersion, at the first page's resourceVersion (continue tokens
/// keep reading that snapshot).
pub(crate) async fn consistent_read<K: Resource + 'static>(
    source: &dyn ListWatch<K>,
    config: &watcher::Config,
    narrowing: &Narrowing,
    decoder: Decoder<K>,
) -> Result<ConsistentRead, kube::Error> {
    let shard = narrowing.selector.as_deref();
    let mut params = list_params(&narrowed(config, narrowing));
    params.resource_version = None;
    params.version_match = None;
    let mut read = ConsistentRead::default();
    let mut first = true;
    loop {
        let page = source.list(&params, shard, decoder).await?;
        if first {
            read.resource_version = page.resource_version.clone().unwrap_or_default();
            first = false;
        }
        // What the cache would keep of the list: the client filter's too.
        for item in page.items.iter().filter(|i| narrowing.keeps(i.metadata())) {
            read.insert(item.metadata());
        }
        match page.continue_token {
            Some(token) if !token.is_empty() => params.continue_token = Some(token),
            _ => return Ok(read),
        }
    }
}

/// `config` with the client filter's label selector (if any) joined to
/// its own, as every list and watch of the narrowed informer sends it.
fn narrowed(config: &watcher::Config, narrowing: &Narrowing) -> watcher::Config {
    let mut config = config.clone();
    config.label_selector = narrowing.label_selector(config.label_selector.as_deref());
    config
}

fn list_params(config: &watcher::Config) -> ListParams {
    let (resource_version, version_match) = match config.list_semantic {
        ListSemantic::Any => (Some("0".to_owned()), Some(VersionMatch::NotOlderThan)),
        ListSemantic::MostRecent => (None, None),
    };
    ListParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        limit: config.page_size,
        resource_version,
        version_match,
        ..ListParams::default()
    }
}

fn watch_params(config: &watcher::Config, initial_events: bool) -> WatchParams {
    WatchParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        timeout: config.timeout,
        bookmarks: config.bookmarks,
        send_initial_events: initial_events,
    }
}

fn api_status(error: &kube::Error) -> Option<&Status> {
    match error {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

/// Whether `error` says the server's versions went backwards.
fn versions_went_back(error: &watcher::Error) -> bool {
    let status = match error {
        watcher::Error::InitialListFailed(error)
        | watcher::Error::WatchStartFailed(error)
        | watcher::Error::WatchFailed(error) => api_status(error),
        watcher::Error::WatchError(status) => Some(&**status),
        _ => None,
    };
    status.is_some_and(is_too_large_resource_version)
}

/// Whether `status` means the watch cannot resume and a fresh list is
/// needed: `Some(true)` when the server's versions went backwards
/// ("Too large resource version"), `Some(false)` for 410 Gone (the version
/// is too old), `None` otherwise.
fn restart_for(status: &Status) -> Option<bool> {
    if is_too_large_resource_version(status) {
        Some(true)
    } else if status.code == 410 || status.reason == "Expired" || status.reason == "Gone" {
        Some(false)
    } else {
        None
    }
}

/// kube-apiserver's answer to a list or watch from a resourceVersion it
/// has not reached: 504 Timeout with the status cause
/// `ResourceVersionTooLarge` (since 1.18.6), earlier only the message "Too
/// large resource version" in a cause or the status. Matched as client-go's
/// reflector matches it.
pub(crate) fn is_too_large_resource_version(status: &Status) -> bool {
    const MESSAGE: &str = "Too large resource version";
    let causes = status.details.iter().flat_map(|d| d.causes.iter());
    if causes
        .clone()
        .any(|c| c.reason == "ResourceVersionTooLarge")
    {
        return true;
    }
    let timeout = status.code == 504 || status.reason == "Timeout";
    timeout && (causes.clone().any(|c| c.message == MESSAGE) || status.message.contains(MESSAGE))
}

#[cfg(test)]
mod tests {
    //! The loop against a scripted API server: list bodies and watch lines
    //! as JSON text, so the informer's own decoding runs.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::decode::UndecodableObject;
    use crate::{DeletedObject, EventHandler, Informer, Transform};
    use futures::future;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use parking_lot::Mutex;
    use tokio_util::sync::CancellationToken;

    /// One scripted watch request.
    enum WatchScript {
        /// The request fails.
        Fail(kube::Error),
        /// The server sends these lines (each after a delay), then keeps
        /// the connection open without a word.
        Lines(Vec<(Duration, String)>),
    }

    #[derive(Default)]
    struct Script {
        lists: Mutex<VecDeque<String>>,
        watches: Mutex<VecDeque<WatchScript>>,
        calls: Arc<Mutex<Vec<String>>>,
    }

    impl ListWatch<ReplicaSet> for Script {
        fn list(
            &self,
            params: &ListParams,
            _shard: Option<&str>,
            decoder: Decoder<ReplicaSet>,
        ) -> BoxFuture<'static, Result<Page<ReplicaSet>, kube::Error>> {
            self.calls.lock().push(format!(
                "list{}",
                params
                    .continue_token
                    .as_deref()
                    .map(|c| format!(" continue={c}"))
                    .unwrap_or_default()
            ));
            match self.lists.lock().pop_front() {
                Some(body) => {
                    Box::pin(async move { (decoder.list)(&body).map_err(kube::Error::SerdeError) })
                }
                None => Box::pin(future::pending()),
            }
        }

        fn watch(
            &self,
            _params: &WatchParams,
            _shard: Option<&str>,
            resource_version: &str,
            decoder: Decoder<ReplicaSet>,
        ) -> BoxFuture<'static, Result<WatchLines<ReplicaSet>, kube::Error>> {
            self.calls.lock().push(format!("watch {resource_version}"));
            match self.watches.lock().pop_front() {
                Some(WatchScript::Fail(error)) => Box::pin(async move { Err(error) }),
                Some(WatchScript::Lines(lines)) => Box::pin(async move {
                    let events =
                        futures::stream::iter(lines).then(move |(delay, line)| async move {
                            tokio::time::sleep(delay).await;
                            (decoder.watch_line)(&line)
                        });
                    let events = events.filter_map(|event| async move { event.transpose() });
                    Ok(events.chain(futures::stream::pending()).boxed())
                }),
                None => Box::pin(future::pending()),
            }
        }
    }

    fn rs(name: &str, rv: &str, replicas: &str) -> String {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{{"namespace":"ns","name":"{name}","uid":"u-{name}","resourceVersion":"{rv}"}},"spec":{{"replicas":{replicas},"selector":{{}}}}}}"#
        )
    }

    fn list(rv: &str, items: &[String]) -> String {
        format!(
            r#"{{"kind":"ReplicaSetList","apiVersion":"apps/v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
            items.join(",")
        )
    }

    fn event(kind: &str, object: &str) -> (Duration, String) {
        (
            Duration::ZERO,
            format!(r#"{{"type":"{kind}","object":{object}}}"#),
        )
    }

    fn error_event(status: &str) -> (Duration, String) {
        (
            Duration::ZERO,
            format!(r#"{{"type":"ERROR","object":{status}}}"#),
        )
    }

    /// kube-apiserver's answer to a watch from a version it has not
    /// reached (`storage.NewTooLargeResourceVersionError`).
    const TOO_LARGE: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too large resource version: 900, current: 6","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#;
    const GONE: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (3)","reason":"Expired","code":410}"#;

    /// Records what handlers are told, as short strings.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    fn desc(rs: &ReplicaSet) -> String {
        format!(
            "{}@{}",
            rs.metadata.name.as_deref().unwrap_or(""),
            rs.metadata.resource_version.as_deref().unwrap_or("")
        )
    }

    impl EventHandler<ReplicaSet> for Log {
        fn on_add(&self, obj: &Arc<ReplicaSet>, initial: bool) {
            self.0
                .lock()
                .push(format!("add {} initial={initial}", desc(obj)));
        }
        fn on_update(&self, old: &Arc<ReplicaSet>, new: &Arc<ReplicaSet>) {
            self.0
                .lock()
                .push(format!("update {} -> {}", desc(old), desc(new)));
        }
        fn on_delete(&self, obj: &DeletedObject<ReplicaSet>) {
            self.0.lock().push(format!(
                "delete {} tombstone={}",
                desc(obj.object()),
                obj.is_tombstone()
            ));
        }
        fn on_undecodable(&self, obj: &UndecodableObject) {
            self.0.lock().push(format!(
                "undecodable {}@{}",
                obj.key().unwrap(),
                obj.resource_version().unwrap_or("")
            ));
        }
    }

    impl Log {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock())
        }
    }

    fn running(
        script: Script,
        config: watcher::Config,
    ) -> (Informer<ReplicaSet>, Log, CancellationToken) {
        let log = Log::default();
        let informer = Informer::with_source(Arc::new(script), "replicasets.apps".into())
            .watcher_config(config)
            .handler(log.clone())
            .build();
        let cancel = CancellationToken::new();
        informer.start(cancel.clone()).unwrap();
        (informer, log, cancel)
    }

    /// Like [`running`], sharing `versions` and without a watch timeout.
    fn running_sharing(
        script: Script,
        versions: &ServerVersions,
    ) -> (Informer<ReplicaSet>, Log, CancellationToken) {
        let log = Log::default();
        let informer = Informer::with_source(Arc::new(script), "replicasets.apps".into())
            .watcher_config(watcher::Config::default().timeout(0))
            .server_versions(versions.clone())
            .handler(log.clone())
            .build();
        let cancel = CancellationToken::new();
        informer.start(cancel.clone()).unwrap();
        (informer, log, cancel)
    }

    /// The informer's versions start over with the new server's history:
    /// it last synced at 7 and does not count 8 as observed, although the
    /// old server's versions it saw were higher.
    fn assert_versions_start_over_at_7(informer: &Informer<ReplicaSet>) {
        assert_eq!(informer.last_sync_resource_version().as_deref(), Some("7"));
        assert_eq!(
            informer.store().has_observed_resource_version("8"),
            Ok(false)
        );
    }

    /// Lets the informer's task run until `done` holds (no clock moves).
    async fn until(what: &str, done: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never happened: {what}");
    }

    fn cached(informer: &Informer<ReplicaSet>) -> Vec<String> {
        let mut all: Vec<_> = informer.store().list().iter().map(|o| desc(o)).collect();
        all.sort();
        all
    }

    #[tokio::test(start_paused = true)]
    async fn undecodable_objects_are_skipped_reported_and_picked_up_when_decodable() {
        let script = Script::default();
        script.lists.lock().extend([
            list(
                "3",
                &[
                    rs("a", "1", "1"),
                    rs("big", "2", "2147483648"),
                    rs("c", "3", "1"),
                ],
            ),
            // The relist after 410: "a" is undecodable again, "c" is gone.
            list("9", &[rs("a", "5", "2147483648"), rs("big", "4", "2")]),
        ]);
        script.watches.lock().push_back(WatchScript::Lines(vec![
            event("MODIFIED", &rs("big", "4", "2")),
            event("MODIFIED", &rs("a", "5", "2147483648")),
            event("DELETED", &rs("c", "6", "2147483648")),
            error_event(GONE),
        ]));
        let calls = script.calls.clone();
        let (informer, log, _cancel) = running(script, watcher::Config::default().timeout(0));

        until("watch events applied", || {
            informer.stats().decode_errors == 3
        })
        .await;
        for _ in 0..3 {
            tokio::time::advance(Duration::from_secs(5)).await; // the backoff after the 410
            tokio::task::yield_now().await;
        }
        until("relist applied", || informer.stats().decode_errors == 4).await;
        let mut seen = log.take();
        seen[..3].sort(); // the order within one list is unspecified
        assert_eq!(
            seen,
            [
                // The list syncs without the object it cannot decode.
                "add a@1 initial=true",
                "add c@3 initial=true",
                "undecodable ns/big@2",
                // Decodable now: it enters the cache.
                "add big@4 initial=false",
                // An undecodable update keeps the last good version...
                "undecodable ns/a@5",
                // ...an undecodable delete still deletes.
                "undecodable ns/c@6",
                "delete c@3 tombstone=true",
                // The relist does not mistake "a" for a deleted object.
                "undecodable ns/a@5",
            ]
        );
        assert!(informer.has_synced());
        assert_eq!(cached(&informer), ["a@1", "big@4"]);
        assert_eq!(*calls.lock(), ["list", "watch 3", "list", "watch 9"]);
        assert_eq!(informer.stats().decode_errors, 4);
    }

    /// What the transform of the next test keeps of a ReplicaSet.
    #[derive(serde::Deserialize)]
    struct MetadataOnly {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    }

    impl From<MetadataOnly> for ReplicaSet {
        fn from(m: MetadataOnly) -> Self {
            ReplicaSet {
                metadata: m.metadata,
                ..ReplicaSet::default()
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_transform_with_a_shape_decodes_listed_and_watched_objects_as_that_shape() {
        let script = Script::default();
        // Replicas beyond an i32: undecodable as a whole ReplicaSet, but the
        // shape never reads the spec.
        script
            .lists
            .lock()
            .push_back(list("3", &[rs("a", "1", "2147483648"), rs("b", "2", "1")]));
        script.watches.lock().push_back(WatchScript::Lines(vec![
            event("MODIFIED", &rs("a", "4", "2147483648")),
            event("ADDED", &rs("c", "5", "3")),
            event("DELETED", &rs("b", "7", "1")),
        ]));
        let log = Log::default();
        let applied = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = applied.clone();
        let informer = Informer::with_source(Arc::new(script), "replicasets.apps".into())
            .watcher_config(watcher::Config::default().timeout(0))
            .transform(
                Transform::new(move |rs: &mut ReplicaSet| {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    rs.spec.min_ready_seconds = Some(42);
                })
                .decode_as::<MetadataOnly>(),
            )
            .handler(log.clone())
            .build();
        let cancel = CancellationToken::new();
        informer.start(cancel.clone()).unwrap();
        until("watch events applied", || {
            log.0.lock().iter().any(|l| l.starts_with("delete"))
        })
        .await;
        let mut seen = log.take();
        seen[..2].sort();
        assert_eq!(
            seen,
            [
                "add a@1 initial=true",
                "add b@2 initial=true",
                "update a@1 -> a@4",
                "add c@5 initial=false",
                "delete b@7 tombstone=false",
            ]
        );
        assert_eq!(cached(&informer), ["a@4", "c@5"]);
        assert_eq!(informer.stats().decode_errors, 0);
        // The transform still runs on every object the shape converts.
        assert_eq!(applied.load(std::sync::atomic::Ordering::Relaxed), 5);
        assert!(
            informer
                .store()
                .list()
                .iter()
                .all(|rs| rs.spec.min_ready_seconds == Some(42))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn too_large_resource_version_relists_from_scratch() {
        let too_large: Status = serde_json::from_str(TOO_LARGE).unwrap();
        let script = Script::default();
        script.lists.lock().extend([
            list("900", &[rs("x", "900", "1")]),
            // The server came back on fresh storage: lower versions.
            list("6", &[rs("x", "5", "1"), rs("y", "6", "1")]),
            list(
                "7",
                &[rs("x", "5", "1"), rs("y", "6", "1"), rs("z", "7", "1")],
            ),
        ]);
        script.watches.lock().extend([
            // Refused when the watch is opened...
            WatchScript::Fail(kube::Error::Api(too_large.boxed())),
            // ...or sent as an ERROR event on an open watch.
            WatchScript::Lines(vec![error_event(TOO_LARGE)]),
        ]);
        let calls = script.calls.clone();
        let (informer, log, _cancel) = running(script, watcher::Config::default().timeout(0));

        until("synced", || informer.has_synced()).await;
        assert_eq!(
            informer.last_sync_resource_version().as_deref(),
            Some("900")
        );
        for _ in 0..4 {
            tokio::time::advance(Duration::from_secs(5)).await; // backoffs
            tokio::task::yield_now().await;
        }
        until("relisted twice", || calls.lock().len() == 6).await;
        assert_eq!(
            *calls.lock(),
            ["list", "watch 900", "list", "watch 6", "list", "watch 7"]
        );
        let mut seen = log.take();
        seen[1..3].sort(); // the order within one list is unspecified
        assert_eq!(
            seen,
            [
                "add x@900 initial=true",
                "add y@6 initial=false",
                "update x@900 -> x@5",
                "add z@7 initial=false",
            ]
        );
        assert_eq!(cached(&informer), ["x@5", "y@6", "z@7"]);
        // The observed version starts over with the new server's history,
        // so read-own-writes checks do not trust versions from the old one.
        assert_versions_start_over_at_7(&informer);
    }

    /// One clock per server: an informer whose watch the new server
    /// accepted (blind to everything written below its version) relists
    /// as soon as another informer sharing its [`ServerVersions`] is told
    /// "Too large resource version", without waiting for any backoff. An
    /// informer that does not share them is not told.
    #[tokio::test(start_paused = true)]
    async fn informers_sharing_server_versions_relist_together() {
        let blind = || {
            let script = Script::default();
            script.lists.lock().extend([
                list("905", &[rs("b", "905", "1")]),
                list("7", &[rs("b", "2", "1"), rs("c", "7", "1")]),
            ]);
            // Accepted, and silent.
            script.watches.lock().push_back(WatchScript::Lines(vec![]));
            script
        };
        let versions = ServerVersions::new();
        let (script, other) = (blind(), blind());
        let calls = script.calls.clone();
        let other_calls = other.calls.clone();
        let (informer, log, _cancel) = running_sharing(script, &versions);
        let (apart, _, _cancel_apart) = running(other, watcher::Config::default().timeout(0));
        until("watching", || {
            calls.lock().len() == 2 && other_calls.lock().len() == 2
        })
        .await;

        let too_large: Status = serde_json::from_str(TOO_LARGE).unwrap();
        let finder = Script::default();
        finder
            .lists
            .lock()
            .push_back(list("900", &[rs("x", "900", "1")]));
        finder
            .watches
            .lock()
            .push_back(WatchScript::Fail(kube::Error::Api(too_large.boxed())));
        let finder_calls = finder.calls.clone();
        let (_finder, _, _cancel_finder) = running_sharing(finder, &versions);

        // No clock moves: only the told informer relists; the one that
        // found out waits for its backoff.
        until("relisted", || calls.lock().len() == 4).await;
        assert_eq!(*calls.lock(), ["list", "watch 905", "list", "watch 7"]);
        assert_eq!(*finder_calls.lock(), ["list", "watch 900"]);
        assert_eq!(*other_calls.lock(), ["list", "watch 905"]);
        assert_eq!(versions.resets(), 1);
        let mut seen = log.take();
        seen[1..].sort(); // the order within one list is unspecified
        assert_eq!(
            seen,
            [
                "add b@905 initial=true",
                "add c@7 initial=false",
                "update b@905 -> b@2",
            ]
        );
        assert_eq!(cached(&informer), ["b@2", "c@7"]);
        assert_versions_start_over_at_7(&informer);
        assert_eq!(cached(&apart), ["b@905"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_streaming_list_decodes_per_object_too() {
        let end = r#"{"kind":"ReplicaSet","apiVersion":"apps/v1","metadata":{"resourceVersion":"3","annotations":{"k8s.io/initial-events-end":"true"}}}"#;
        let script = Script::default();
        script.watches.lock().push_back(WatchScript::Lines(vec![
            event("ADDED", &rs("a", "1", "1")),
            event("ADDED", &rs("big", "2", "2147483648")),
            event("BOOKMARK", end),
            event("MODIFIED", &rs("a", "4", "2")),
        ]));
        let calls = script.calls.clone();
        let (informer, log, _cancel) = running(
            script,
            watcher::Config::default().timeout(0).streaming_lists(),
        );
        until("update applied", || {
            informer.last_sync_resource_version().as_deref() == Some("4")
        })
        .await;
        assert_eq!(
            log.take(),
            [
                // Reported on arrival; the list applies at its end.
                "undecodable ns/big@2",
                "add a@1 initial=true",
                "update a@1 -> a@4",
            ]
        );
        assert_eq!(*calls.lock(), ["watch 0"]);
        assert!(informer.has_synced());
    }

    #[test]
    fn too_large_resource_version_is_recognised_as_client_go_does() {
        let status: Status = serde_json::from_str(TOO_LARGE).unwrap();
        assert!(is_too_large_resource_version(&status));
        assert_eq!(restart_for(&status), Some(true));
        // Servers before 1.18.6: only the message says it.
        let mut old = status.clone();
        old.details = None;
        assert!(is_too_large_resource_version(&old));
        let gone: Status = serde_json::from_str(GONE).unwrap();
        assert!(!is_too_large_resource_version(&gone));
        assert_eq!(restart_for(&gone), Some(false));
        let mut other = status;
        other.details = None;
        other.message = "request timed out".into();
        assert_eq!(restart_for(&other), None);
    }

    #[tokio::test(start_paused = true)]
    async fn health_fails_after_the_bound_without_a_response_and_recovers_on_a_bookmark() {
        let bound = Duration::from_secs(60);
        let bookmark =
            r#"{"kind":"ReplicaSet","apiVersion":"apps/v1","metadata":{"resourceVersion":"3"}}"#;
        let script = Script::default();
        script
            .lists
            .lock()
            .push_back(list("3", &[rs("a", "1", "1")]));
        script.watches.lock().push_back(WatchScript::Lines(vec![(
            Duration::from_secs(100),
            format!(r#"{{"type":"BOOKMARK","object":{bookmark}}}"#),
        )]));
        let (informer, _log, cancel) = running(script, watcher::Config::default().timeout(0));
        until("synced", || informer.has_synced()).await;
        assert!(informer.health(bound).is_ok());

        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(informer.health(bound).is_ok(), "exactly at the bound");
        tokio::time::advance(Duration::from_secs(1)).await;
        let unhealthy = informer.health(bound).unwrap_err();
        assert_eq!(unhealthy.resource, "replicasets.apps");
        assert_eq!(unhealthy.silent_for, Duration::from_secs(61));

        // The bookmark 100 s into the watch is a response.
        tokio::time::advance(Duration::from_secs(39)).await;
        until("bookmark seen", || informer.health(bound).is_ok()).await;
        assert_eq!(informer.stats().silent_for, Some(Duration::ZERO));

        // A stopped informer is not unhealthy; it is stopped.
        cancel.cancel();
        until("stopped", || informer.stats().silent_for.is_none()).await;
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(informer.health(bound).is_ok());
    }
}
