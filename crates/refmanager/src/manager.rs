//! The ready-to-use ref manager: decisions from [`BaseRefManager`], writes
//! through a [`DependentControl`].

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;

use crate::base::{finish, require_uid};
use crate::dependent::{self, Dependent};
use crate::{
    AlwaysAdopt, ApiErrorClass, BaseRefManager, CanAdopt, ClaimAction, ClaimError, ClaimOutcome,
    Decision, DependentControl, OwnerMeta, Selector, adoption_patch, release_patch,
};

/// An extra condition a dependent must meet to be claimed, on top of the
/// selector (e.g. "is active"). Checked only for objects the selector
/// matches.
pub type Filter<'a, D> = &'a (dyn Fn(&D) -> bool + Sync);

/// Claims dependents of type `D` for one owner: adopts matching orphans,
/// releases owned objects that no longer match, and leaves everything else
/// alone, writing through `C`.
///
/// Build one per sync pass (the adoption recheck is cached per manager).
///
/// - `D`: the dependent type (`Pod`, `ReplicaSet`, any [`Dependent`]).
/// - `C`: the writer, held as `Arc<C>`; `C` may be unsized, e.g.
///   `dyn PodControl`.
/// - `A`: the [`CanAdopt`] check (default [`AlwaysAdopt`]).
pub struct ControllerRefManager<D, C: ?Sized, A = AlwaysAdopt> {
    base: BaseRefManager<A>,
    control: Arc<C>,
    finalizers: Vec<String>,
    _dependent: PhantomData<fn(&D)>,
}

/// A [`ControllerRefManager`] for pods, as used by ReplicaSet-like
/// controllers; any [`PodControl`](ctrlkit_podcontrol::PodControl) can
/// patch.
pub type PodControllerRefManager<C, A = AlwaysAdopt> = ControllerRefManager<Pod, C, A>;

/// A [`ControllerRefManager`] for ReplicaSets, as used by Deployment-like
/// controllers; patch through [`ApiPatcher`](crate::ApiPatcher) or your own
/// [`DependentControl`].
pub type ReplicaSetControllerRefManager<C, A = AlwaysAdopt> =
    ControllerRefManager<ReplicaSet, C, A>;

impl<D, C, A> fmt::Debug for ControllerRefManager<D, C, A>
where
    C: ?Sized,
    A: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerRefManager")
            .field("base", &self.base)
            .field("finalizers", &self.finalizers)
            .finish_non_exhaustive()
    }
}

impl<D, C, A> ControllerRefManager<D, C, A>
where
    D: Dependent + Sync,
    C: DependentControl<D> + ?Sized,
    A: CanAdopt,
{
    /// A manager claiming for `owner` the dependents `selector` matches,
    /// patching through `control` and asking `can_adopt` before the first
    /// adoption.
    pub fn new(control: Arc<C>, owner: OwnerMeta, selector: Selector, can_adopt: A) -> Self {
        ControllerRefManager {
            base: BaseRefManager::new(owner, selector, can_adopt),
            control,
            finalizers: Vec::new(),
            _dependent: PhantomData,
        }
    }

    /// Also adds these finalizers on adoption and removes them on release.
    #[must_use]
    pub fn with_finalizers<S: Into<String>>(
        mut self,
        finalizers: impl IntoIterator<Item = S>,
    ) -> Self {
        self.finalizers = finalizers.into_iter().map(Into::into).collect();
        self
    }

    /// The decision logic and adoption check this manager uses.
    pub fn base(&self) -> &BaseRefManager<A> {
        &self.base
    }

    /// Whether `obj` matches: the selector first (so filters only see
    /// candidates), then every filter.
    pub fn matches(&self, obj: &D, filters: &[Filter<'_, D>]) -> bool {
        self.base.selector().matches_meta(obj.object_meta()) && filters.iter().all(|f| f(obj))
    }

    /// One claim pass over `objects` (upstream's `ClaimPods`/`ClaimObject`
    /// loop); see [`BaseRefManager::decide`] for the rules.
    ///
    /// Items may be owned (`Pod`), borrowed (`&Pod`) or shared
    /// (`Arc<Pod>`); the claimed ones are returned as given, in input order.
    /// An object whose write fails is left out of `claimed` and its error
    /// recorded; the pass goes on with the next one. The [`CanAdopt`] check
    /// runs at most once, and only if some object is to be adopted.
    pub async fn claim<P, I>(
        &self,
        objects: I,
        filters: &[Filter<'_, D>],
    ) -> ClaimOutcome<P, C::Error>
    where
        P: Borrow<D>,
        I: IntoIterator<Item = P>,
    {
        let mut outcome = ClaimOutcome {
            claimed: Vec::new(),
            errors: Vec::new(),
        };
        for item in objects {
            let obj: &D = item.borrow();
            let result = match self.base.decide(obj, |o| self.matches(o, filters)) {
                Decision::Keep => Ok(true),
                Decision::Skip(_) => Ok(false),
                Decision::Adopt => match self.adopt(obj).await {
                    Err(e) if e.is_not_found() => Ok(false),
                    other => other.map(|()| true),
                },
                Decision::Release => self.release(obj).await.map(|()| false),
            };
            match result {
                Ok(true) => outcome.claimed.push(item),
                Ok(false) => {}
                Err(e) => outcome.errors.push(e),
            }
        }
        outcome
    }

    /// Makes the owner the controller of `obj` (upstream's `AdoptPod`):
    /// checks the object has a UID and runs the (once-only) [`CanAdopt`]
    /// check, then sends [`adoption_patch`]. Does not look at the selector.
    ///
    /// # Errors
    /// [`ClaimError::MissingUid`], [`ClaimError::CannotAdopt`] (no patch
    /// sent), or [`ClaimError::Adopt`] with the patch error, NotFound
    /// included.
    pub async fn adopt(&self, obj: &D) -> Result<(), ClaimError<C::Error>> {
        let meta = obj.object_meta();
        let uid = self.base.prepare_adoption(meta).await?;
        tracing::debug!(
            namespace = dependent::namespace(meta),
            name = dependent::name(meta),
            owner = self.base.owner().name(),
            "patching dependent to add our controller reference"
        );
        let patch = adoption_patch(self.base.owner(), uid, &self.finalizers);
        let result = self
            .control
            .patch_dependent(dependent::namespace(meta), dependent::name(meta), &patch)
            .await;
        match result {
            Ok(()) => Ok(()),
            Err(source) => Err(ClaimError::Adopt {
                namespace: dependent::namespace(meta).to_owned(),
                name: dependent::name(meta).to_owned(),
                source,
            }),
        }
    }

    /// Removes the owner's reference (only ours) from `obj` (upstream's
    /// `ReleasePod`) with [`release_patch`]. Does not look at the selector.
    ///
    /// NotFound (the object is gone) and Invalid (422: the object has no
    /// owner references left, or it was deleted and re-created so the UID
    /// precondition failed) mean there is nothing to release and return
    /// `Ok(())`.
    ///
    /// # Errors
    /// [`ClaimError::MissingUid`] or [`ClaimError::Release`] with any other
    /// patch error.
    pub async fn release(&self, obj: &D) -> Result<(), ClaimError<C::Error>> {
        let meta = obj.object_meta();
        let uid = require_uid(meta, ClaimAction::Release)?;
        tracing::debug!(
            namespace = dependent::namespace(meta),
            name = dependent::name(meta),
            owner = self.base.owner().name(),
            "patching dependent to remove its controller reference"
        );
        let patch = release_patch(uid, &[self.base.owner().uid()], &self.finalizers);
        let result = self
            .control
            .patch_dependent(dependent::namespace(meta), dependent::name(meta), &patch)
            .await;
        match result {
            Err(e) if e.is_invalid() => Ok(()),
            other => finish(obj, ClaimAction::Release, other).map(drop),
        }
    }
}

impl<C, A> ControllerRefManager<Pod, C, A>
where
    C: DependentControl<Pod> + ?Sized,
    A: CanAdopt,
{
    /// [`ControllerRefManager::claim`] under upstream's name for pods.
    pub async fn claim_pods<P, I>(
        &self,
        pods: I,
        filters: &[Filter<'_, Pod>],
    ) -> ClaimOutcome<P, C::Error>
    where
        P: Borrow<Pod>,
        I: IntoIterator<Item = P>,
    {
        self.claim(pods, filters).await
    }
}

impl<C, A> ControllerRefManager<ReplicaSet, C, A>
where
    C: DependentControl<ReplicaSet> + ?Sized,
    A: CanAdopt,
{
    /// [`ControllerRefManager::claim`] under upstream's name for
    /// ReplicaSets.
    pub async fn claim_replica_sets<P, I>(
        &self,
        replica_sets: I,
        filters: &[Filter<'_, ReplicaSet>],
    ) -> ClaimOutcome<P, C::Error>
    where
        P: Borrow<ReplicaSet>,
        I: IntoIterator<Item = P>,
    {
        self.claim(replica_sets, filters).await
    }
}
