//! Work in progress.

mod error;
mod factory;
mod handler;
mod index;
mod informer;
mod key;
mod resource_version;
mod store;

pub use error::InformerError;
pub use factory::SharedInformerFactory;
pub use handler::{DeletedFinalStateUnknown, DeletedObject, EventHandler, HandlerFns, HandlerId};
pub use index::{
    BY_CONTROLLER_UID, BY_NAMESPACE, IndexFn, controller_index_key, index_by_controller_uid,
    index_by_namespace, orphan_index_key,
};
pub use informer::{Informer, InformerBuilder};
pub use key::{ObjectKey, ParseKeyError};
pub use resource_version::{CompareError, compare_resource_versions};
pub use store::Store;
