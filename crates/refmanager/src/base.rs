//! The claim decision table, shared by every dependent type.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::OnceCell;

use crate::dependent::{self, Dependent, controller_ref};
use crate::{
    AlwaysAdopt, ApiErrorClass, CanAdopt, CanAdoptError, ClaimAction, ClaimError, OwnerMeta,
    Selector,
};

/// What a claim pass does with one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Already controlled by the owner and still matching: claimed, no write.
    Keep,
    /// An orphan that matches: add our controller reference.
    Adopt,
    /// Controlled by the owner but no longer matching: remove our reference.
    Release,
    /// Not ours and not to become ours.
    Skip(SkipReason),
}

/// Why an object is [`Decision::Skip`]ped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Another controller (another UID) controls it.
    OwnedByOther,
    /// The owner is being deleted: it neither adopts nor releases.
    OwnerBeingDeleted,
    /// An orphan that does not match the selector and filters.
    NotMatching,
    /// An orphan that is itself being deleted.
    DependentBeingDeleted,
    /// An orphan in another namespace than the (namespaced) owner.
    OtherNamespace,
}

/// The owner-independent core of a ref manager: who claims (the owner),
/// what it claims (the selector) and whether it may adopt right now (a
/// [`CanAdopt`] check run at most once).
///
/// Create one per sync pass: the adoption verdict is cached for the life of
/// the manager, so a long-lived manager would keep a stale verdict.
#[derive(Debug)]
pub struct BaseRefManager<A = AlwaysAdopt> {
    owner: OwnerMeta,
    selector: Selector,
    can_adopt: A,
    verdict: OnceCell<Result<(), Arc<CanAdoptError>>>,
}

impl<A: CanAdopt> BaseRefManager<A> {
    /// A manager claiming for `owner` the objects `selector` matches, asking
    /// `can_adopt` before the first adoption.
    pub fn new(owner: OwnerMeta, selector: Selector, can_adopt: A) -> Self {
        BaseRefManager {
            owner,
            selector,
            can_adopt,
            verdict: OnceCell::new(),
        }
    }

    /// The owner.
    pub fn owner(&self) -> &OwnerMeta {
        &self.owner
    }

    /// The selector.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Decides what to do with `obj`, without writing anything.
    ///
    /// `matches` is the full match predicate (usually selector and filters);
    /// it is only called when the answer matters. In order:
    ///
    /// 1. Controlled by someone (first owner reference with `controller: true`):
    ///    - by another UID → [`SkipReason::OwnedByOther`];
    ///    - by us and matching → [`Decision::Keep`], even if the owner is
    ///      being deleted (keeping needs no write);
    ///    - by us, not matching, owner being deleted →
    ///      [`SkipReason::OwnerBeingDeleted`];
    ///    - by us, not matching → [`Decision::Release`].
    /// 2. An orphan:
    ///    - owner being deleted → [`SkipReason::OwnerBeingDeleted`];
    ///    - not matching → [`SkipReason::NotMatching`];
    ///    - the object being deleted → [`SkipReason::DependentBeingDeleted`];
    ///    - namespaced owner, other namespace → [`SkipReason::OtherNamespace`]
    ///      (a cluster-scoped owner adopts in any namespace);
    ///    - otherwise → [`Decision::Adopt`].
    pub fn decide<D: Dependent + ?Sized>(
        &self,
        obj: &D,
        matches: impl FnOnce(&D) -> bool,
    ) -> Decision {
        let meta = obj.object_meta();
        if let Some(cref) = controller_ref(meta) {
            if cref.uid != self.owner.uid() {
                return Decision::Skip(SkipReason::OwnedByOther);
            }
            if matches(obj) {
                return Decision::Keep;
            }
            if self.owner.is_being_deleted() {
                return Decision::Skip(SkipReason::OwnerBeingDeleted);
            }
            return Decision::Release;
        }
        if self.owner.is_being_deleted() {
            return Decision::Skip(SkipReason::OwnerBeingDeleted);
        }
        if !matches(obj) {
            return Decision::Skip(SkipReason::NotMatching);
        }
        if meta.deletion_timestamp.is_some() {
            return Decision::Skip(SkipReason::DependentBeingDeleted);
        }
        if let Some(ns) = self.owner.namespace()
            && ns != dependent::namespace(meta)
        {
            return Decision::Skip(SkipReason::OtherNamespace);
        }
        Decision::Adopt
    }

    /// Runs the [`CanAdopt`] check the first time it is called and returns
    /// the cached verdict afterwards, so a pass adopting many objects reads
    /// the owner once, and a pass adopting none never reads it.
    ///
    /// # Errors
    /// The (shared) reason adoption is refused.
    pub async fn can_adopt(&self) -> Result<(), Arc<CanAdoptError>> {
        self.verdict
            .get_or_init(|| async {
                let verdict = self.can_adopt.can_adopt(&self.owner).await;
                if let Err(e) = &verdict {
                    tracing::debug!(owner = self.owner.name(), error = %e, "adoption refused");
                }
                verdict.map_err(Arc::new)
            })
            .await
            .clone()
    }

    /// Claims one object with caller-supplied writes, following
    /// [`BaseRefManager::decide`]: `Ok(true)` if the owner controls it
    /// afterwards.
    ///
    /// Before calling `adopt` it checks that the object has a UID and that
    /// [`BaseRefManager::can_adopt`] allows it. A `NotFound` from `adopt` or
    /// `release` means the object is gone and gives `Ok(false)`; any other
    /// error is returned, wrapped in [`ClaimError`].
    ///
    /// # Errors
    /// [`ClaimError`] if adoption was refused, the object has no UID, or a
    /// write failed with anything but `NotFound`.
    pub async fn claim_object<D, E>(
        &self,
        obj: &D,
        matches: impl FnOnce(&D) -> bool,
        adopt: impl AsyncFnOnce(&D) -> Result<(), E>,
        release: impl AsyncFnOnce(&D) -> Result<(), E>,
    ) -> Result<bool, ClaimError<E>>
    where
        D: Dependent + ?Sized,
        E: ApiErrorClass,
    {
        match self.decide(obj, matches) {
            Decision::Keep => Ok(true),
            Decision::Skip(_) => Ok(false),
            Decision::Adopt => {
                self.prepare_adoption(obj.object_meta()).await?;
                let result = adopt(obj).await;
                finish(obj, ClaimAction::Adopt, result)
            }
            Decision::Release => {
                require_uid(obj.object_meta(), ClaimAction::Release)?;
                let result = release(obj).await;
                finish(obj, ClaimAction::Release, result)
            }
        }
    }

    /// The checks that precede every adoption write: the object has a UID
    /// (for the patch precondition) and the owner may adopt.
    /// Returns the UID.
    pub(crate) async fn prepare_adoption<'m, E>(
        &self,
        meta: &'m ObjectMeta,
    ) -> Result<&'m str, ClaimError<E>> {
        let uid = require_uid(meta, ClaimAction::Adopt)?;
        self.can_adopt()
            .await
            .map_err(|source| ClaimError::CannotAdopt {
                namespace: dependent::namespace(meta).to_owned(),
                name: dependent::name(meta).to_owned(),
                uid: uid.to_owned(),
                source,
            })?;
        Ok(uid)
    }
}

/// The dependent's UID, or the error saying it has none.
pub(crate) fn require_uid<E>(
    meta: &ObjectMeta,
    action: ClaimAction,
) -> Result<&str, ClaimError<E>> {
    dependent::uid(meta).ok_or_else(|| ClaimError::MissingUid {
        action,
        namespace: dependent::namespace(meta).to_owned(),
        name: dependent::name(meta).to_owned(),
    })
}

/// Turns a write's result into the claim verdict: success means the owner
/// controls it iff it was adopted; NotFound means it is gone.
pub(crate) fn finish<D: Dependent + ?Sized, E: ApiErrorClass>(
    obj: &D,
    action: ClaimAction,
    result: Result<(), E>,
) -> Result<bool, ClaimError<E>> {
    match result {
        Ok(()) => Ok(action == ClaimAction::Adopt),
        Err(e) if e.is_not_found() => Ok(false),
        Err(source) => {
            let meta = obj.object_meta();
            let namespace = dependent::namespace(meta).to_owned();
            let name = dependent::name(meta).to_owned();
            Err(match action {
                ClaimAction::Adopt => ClaimError::Adopt {
                    namespace,
                    name,
                    source,
                },
                ClaimAction::Release => ClaimError::Release {
                    namespace,
                    name,
                    source,
                },
            })
        }
    }
}
