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
//!   same resourceVersion for ever and stays blind;
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
use kube::runtime::watcher::{self, Event, InitialListStrategy, ListSemantic};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::decode::{MaybeDecoded, Page, decode_list, decode_watch_line};
use crate::health::{DEFAULT_WATCH_TIMEOUT, WATCH_IDLE_MARGIN};

/// What the loop hands to the informer.
#[derive(Debug)]
pub(crate) enum Step<K> {
    /// A change to apply (or the markers of a list).
    Event(Event<MaybeDecoded<K>>),
    /// A successful response with nothing to apply: a list page, a
    /// bookmark, a watch that ran to its end.
    Alive,
    /// The server's resourceVersions went backwards: the list that follows
    /// starts a new version history.
    VersionsReset,
}

pub(crate) type WatchLines<K> =
    BoxStream<'static, Result<WatchEvent<MaybeDecoded<K>>, kube::Error>>;

/// Where the loop lists and watches: the API server, or a script in tests.
pub(crate) trait ListWatch<K>: Send + Sync + 'static {
    fn list(&self, params: &ListParams) -> BoxFuture<'static, Result<Page<K>, kube::Error>>;
    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'static, Result<WatchLines<K>, kube::Error>>;
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
    K: DeserializeOwned + Send + 'static,
{
    fn list(&self, params: &ListParams) -> BoxFuture<'static, Result<Page<K>, kube::Error>> {
        let request = match self.metadata_api {
            true => self.request.list_metadata(params),
            false => self.request.list(params),
        };
        let client = self.client.clone();
        Box::pin(async move {
            let mut request = request.map_err(kube::Error::BuildRequest)?;
            request.extensions_mut().insert("list");
            let body = client.request_text(request).await?;
            decode_list::<K>(&body).map_err(kube::Error::SerdeError)
        })
    }

    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'static, Result<WatchLines<K>, kube::Error>> {
        let request = match self.metadata_api {
            true => self.request.watch_metadata(params, resource_version),
            false => self.request.watch(params, resource_version),
        };
        let client = self.client.clone();
        Box::pin(async move {
            let mut request = request.map_err(kube::Error::BuildRequest)?;
            request.extensions_mut().insert("watch");
            // As kube's own watch requests: its decompression layer cannot
            // read the multi-member gzip of newer servers' watch streams.
            request
                .headers_mut()
                .entry(ACCEPT_ENCODING)
                .or_insert(HeaderValue::from_static("identity"));
            let body = client.request_stream(request).await?;
            let lines = Box::pin(body).lines().filter_map(|line| async move {
                match line {
                    Ok(line) => decode_watch_line::<K>(&line).transpose(),
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

/// The informer's event stream over `source`: it never ends, and recovers
/// by itself after an error (apply a backoff between errors).
pub(crate) fn list_watch<K>(
    source: Arc<dyn ListWatch<K>>,
    config: watcher::Config,
) -> impl Stream<Item = Result<Step<K>, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
{
    futures::stream::unfold(
        (source, config, State::Empty { reset: false }),
        |(source, config, mut state)| async move {
            loop {
                let (output, next) = step(&*source, &config, state).await;
                state = next;
                if let Some(output) = output {
                    return Some((output, (source, config, state)));
                }
            }
        },
    )
}

/// One transition; `None` output means "keep going".
async fn step<K>(
    source: &dyn ListWatch<K>,
    config: &watcher::Config,
    state: State<K>,
) -> (Output<K>, State<K>)
where
    K: Resource + Send + 'static,
{
    match state {
        State::Empty { reset: true } => (
            Some(Ok(Step::VersionsReset)),
            State::Empty { reset: false },
        ),
        State::Empty { reset: false } => match config.initial_list_strategy {
            InitialListStrategy::ListWatch => (
                Some(Ok(Step::Event(Event::Init))),
                State::Listing {
                    continue_token: None,
                    resource_version: None,
                    items: VecDeque::new(),
                },
            ),
            InitialListStrategy::StreamingList => {
                match source.watch(&watch_params(config, true), "0").await {
                    Ok(lines) => (
                        Some(Ok(Step::Event(Event::Init))),
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
                return (Some(Ok(Step::Event(Event::InitApply(item)))), next);
            }
            if continue_token.is_none()
                && let Some(resource_version) = resource_version
            {
                return (
                    Some(Ok(Step::Event(Event::InitDone))),
                    State::Listed { resource_version },
                );
            }
            let mut params = list_params(config);
            params.continue_token = continue_token;
            match source.list(&params).await {
                Ok(page) if page.resource_version.is_none() && page.continue_token.is_none() => (
                    Some(Err(watcher::Error::NoResourceVersion)),
                    State::Empty { reset: false },
                ),
                Ok(page) => (
                    Some(Ok(Step::Alive)),
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
                Some(Ok(Step::Event(Event::InitApply(obj)))),
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
                    (Some(Ok(Step::Event(Event::InitDone))), next)
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
                .watch(&watch_params(config, false), &resource_version)
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
            // we could not read again.
            Line::Failed(error) => (
                Some(Err(watcher::Error::WatchFailed(error))),
                State::Listed { resource_version },
            ),
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
    match obj.metadata().resource_version.clone().filter(|rv| !rv.is_empty()) {
        Some(resource_version) => (
            Some(Ok(Step::Event(event(obj)))),
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
    let server_timeout = timeout.map_or(DEFAULT_WATCH_TIMEOUT, |t| {
        Duration::from_secs(u64::from(t))
    });
    tokio::time::timeout(server_timeout + WATCH_IDLE_MARGIN, next)
        .await
        .unwrap_or(Line::IdleTimeout)
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
    if causes.clone().any(|c| c.reason == "ResourceVersionTooLarge") {
        return true;
    }
    let timeout = status.code == 504 || status.reason == "Timeout";
    timeout && (causes.clone().any(|c| c.message == MESSAGE) || status.message.contains(MESSAGE))
}
