//! What can go wrong building and running a controller.

use ctrlkit_informer::InformerError;

/// Why [`ControllerBuilder::build`](crate::ControllerBuilder::build)
/// refused: every misuse of the builder is one of these, never a panic.
///
/// The builder checks everything it can before it touches a shared
/// informer; only the [`Informer`](Self::Informer) case can leave an
/// informer requested from the factory (unused, but watched once the
/// factory starts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The controller's name is empty. It names the queue, the metrics'
    /// `controller` label and the tracing spans, so it must say something.
    #[error("the controller name must not be empty")]
    EmptyName,
    /// Another controller with this name records into the same
    /// [`ControllerMetrics`](crate::ControllerMetrics): their metrics would
    /// be indistinguishable.
    #[error("a controller named {name:?} already records into these metrics")]
    DuplicateName {
        /// The name used twice.
        name: String,
    },
    /// `workers(0)`: a controller without workers would never reconcile.
    #[error("a controller needs at least one worker")]
    ZeroWorkers,
    /// `timeout(Duration::ZERO)`: every reconcile would time out at once.
    #[error("the reconcile timeout must be greater than zero")]
    ZeroTimeout,
    /// `namespace("")`: to watch every namespace, do not set one.
    #[error("the namespace must not be empty (leave it unset to watch every namespace)")]
    EmptyNamespace,
    /// An index with an empty name.
    #[error("an index name on the {kind} informer is empty")]
    EmptyIndexName {
        /// The kind whose informer the index was for.
        kind: String,
    },
    /// Two indexes with the same name on one informer of this controller.
    #[error("the index {name:?} is registered twice on the {kind} informer")]
    DuplicateIndex {
        /// The kind whose informer the index was for.
        kind: String,
        /// The name registered twice.
        name: String,
    },
    /// `owns::<C>()` twice for the same kind.
    #[error("{kind} is owned twice by this controller")]
    DuplicateOwns {
        /// The kind given twice.
        kind: String,
    },
    /// A cluster-scoped kind owned by a namespaced owner: Kubernetes only
    /// lets cluster-scoped objects name cluster-scoped owners (the garbage
    /// collector refuses such references), so no such child can exist.
    #[error(
        "cluster-scoped {child} cannot be owned by namespaced {owner}: cluster-scoped objects \
         may only have cluster-scoped owners"
    )]
    ClusterScopedChild {
        /// The child kind.
        child: String,
        /// The owner kind.
        owner: String,
    },
    /// The builder has no factory to take the informer of this kind from,
    /// and none was given (built with
    /// [`Controller::builder_with`](crate::Controller::builder_with)).
    #[error(
        "no informer for {kind}: give one with Owns::informer / Watches::informer, or build \
         the controller from a SharedInformerFactory"
    )]
    NoInformer {
        /// The kind without an informer.
        kind: String,
    },
    /// A [`Watches::with_owners`](crate::Watches::with_owners) mapper
    /// written for another owner kind than the controller's.
    #[error(
        "the mapper of watched {watched} reads the cache of {mapper_owner}, but the controller's \
         owner kind is {owner}"
    )]
    WatchOwnerMismatch {
        /// The watched kind.
        watched: String,
        /// The owner kind the mapper was written for.
        mapper_owner: String,
        /// The controller's owner kind.
        owner: String,
    },
    /// [`Controller::cache`](crate::Controller::cache) of a kind the
    /// controller neither owns nor watches.
    #[error("the controller has no cache of {kind}: declare it with owns or watches")]
    NotCached {
        /// The kind asked for.
        kind: String,
    },
    /// An informer refused what the controller needs of it, e.g. a
    /// transform when a shared informer already has a different one or has
    /// started.
    #[error("the {kind} informer: {source}")]
    Informer {
        /// The kind of that informer.
        kind: String,
        /// What the informer said.
        #[source]
        source: InformerError,
    },
}

/// Why [`Controller::run`](crate::Controller::run) stopped with an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// An informer stopped before its cache synced, so the controller could
    /// never see its objects.
    #[error("an informer stopped before its cache synced")]
    CacheSync(#[source] InformerError),
}
