//! The informer's error type.

/// Errors returned by informers, stores and the factory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InformerError {
    /// A query named an index that was never registered.
    #[error("no index named {name:?} is registered on this store")]
    UnknownIndex {
        /// The requested index name.
        name: String,
    },
    /// [`Informer::add_index`](crate::Informer::add_index) was given a name
    /// that is already registered.
    #[error("an index named {name:?} is already registered on this store")]
    IndexExists {
        /// The conflicting index name.
        name: String,
    },
    /// The informer is already running: one informer runs one watch.
    #[error("the informer has already been started")]
    AlreadyStarted,
    /// The informer was built with [`Informer::manual`](crate::Informer::manual)
    /// and has no API to watch; feed it with
    /// [`Informer::apply_event`](crate::Informer::apply_event) or
    /// [`Informer::run_stream`](crate::Informer::run_stream) instead.
    #[error("the informer has no API to watch (it was built with Informer::manual)")]
    NoSource,
    /// [`Informer::set_transform`](crate::Informer::set_transform) on an
    /// informer that already has a different transform. A shared informer
    /// has one transform: controllers that need different ones must use
    /// different informers (for example different selectors).
    #[error("the informer already has a different transform")]
    TransformConflict,
    /// [`Informer::set_transform`](crate::Informer::set_transform) on an
    /// informer that has been started or has received events, whose cached
    /// objects were therefore not transformed. Set transforms before
    /// starting the informer (or the factory).
    #[error("a transform must be set before the informer starts or receives events")]
    TransformAfterStart,
    /// The informer stopped (cancelled or its event stream ended) before its
    /// first complete list, so its cache will never sync.
    #[error("the informer stopped before its cache synced")]
    StoppedBeforeSync,
}
