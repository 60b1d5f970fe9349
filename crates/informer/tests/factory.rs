//! The sharing factory hands out one informer per resource, scope and
//! selectors, and starts and stops their watches.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_informer::{Informer, InformerError, SharedInformerFactory};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::runtime::watcher;

/// A client pointing at a port nothing listens on: building informers needs
/// one, and the watches started here only ever fail to connect.
fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn same_key_same_informer_different_key_different_informer() {
    let factory = SharedInformerFactory::new(offline_client())
        .with_default_resync(Some(Duration::from_secs(60)));
    let a = factory.namespaced::<Pod>("ns", watcher::Config::default());
    let b = factory.namespaced::<Pod>("ns", watcher::Config::default());
    assert!(Informer::ptr_eq(&a, &b));
    // Other config fields do not split the key; selectors do.
    let paged = factory.namespaced::<Pod>("ns", watcher::Config::default().page_size(10));
    assert!(Informer::ptr_eq(&a, &paged));

    let distinct = [
        factory.namespaced::<Pod>("other", watcher::Config::default()),
        factory.all::<Pod>(watcher::Config::default()),
        factory.namespaced::<Pod>("ns", watcher::Config::default().labels("app=web")),
        factory.namespaced::<Pod>("ns", watcher::Config::default().fields("spec.nodeName=n1")),
    ];
    for d in &distinct {
        assert!(!Informer::ptr_eq(&a, d));
    }
    let _cm = factory.namespaced::<ConfigMap>("ns", watcher::Config::default());
    let _nodes = factory.all::<Node>(watcher::Config::default());
    assert_eq!(factory.len(), 7);
    assert_eq!(a.resync_period(), Some(Duration::from_secs(60)));

    // Handlers added through either handle land on the one informer.
    a.add_event_handler(ctrlkit_informer::HandlerFns::new());
    b.add_event_handler(ctrlkit_informer::HandlerFns::new());
    assert!(format!("{a:?}").contains("handlers: 2"), "{a:?}");
}

#[tokio::test]
async fn start_is_idempotent_and_shutdown_stops_the_watches() {
    let factory = SharedInformerFactory::new(offline_client());
    let pods = factory.namespaced::<Pod>("ns", watcher::Config::default());
    assert!(!pods.is_started());
    factory.start();
    assert!(pods.is_started());
    factory.start();
    // Informers requested later are started by the next call.
    let cms = factory.namespaced::<ConfigMap>("ns", watcher::Config::default());
    assert!(!cms.is_started());
    factory.start();
    assert!(cms.is_started());
    assert!(!factory.has_synced());

    let waiter = tokio::spawn({
        let pods = pods.clone();
        async move { pods.wait_for_cache_sync().await }
    });
    // Deadlock guard only: shutdown cancels watches that are retrying.
    tokio::time::timeout(Duration::from_secs(60), factory.shutdown())
        .await
        .unwrap();
    assert_eq!(waiter.await.unwrap(), Err(InformerError::StoppedBeforeSync));
    assert_eq!(
        factory.wait_for_cache_sync().await,
        Err(InformerError::StoppedBeforeSync)
    );
    assert!(factory.cancellation_token().is_cancelled());
}

#[tokio::test]
async fn a_parent_token_stops_the_factory() {
    let parent = tokio_util::sync::CancellationToken::new();
    let factory = SharedInformerFactory::new(offline_client()).with_parent_token(&parent);
    let pods = factory.all::<Pod>(watcher::Config::default());
    factory.start();
    parent.cancel();
    let synced = tokio::time::timeout(Duration::from_secs(60), pods.wait_for_cache_sync())
        .await
        .unwrap();
    assert_eq!(synced, Err(InformerError::StoppedBeforeSync));
}

/// A value attached to a factory is found by type by whoever builds on the
/// same factory, and by nobody else; a second value of a type replaces the
/// first.
#[tokio::test]
async fn extensions_are_found_by_type_on_their_own_factory() {
    #[derive(Clone, Debug, PartialEq)]
    struct Ring(&'static str);
    let factory = SharedInformerFactory::new(offline_client());
    let other = SharedInformerFactory::new(offline_client());
    assert_eq!(factory.extension::<Ring>(), None);
    factory.insert_extension(Ring("a"));
    factory.insert_extension(7u32);
    assert_eq!(factory.extension::<Ring>(), Some(Ring("a")));
    assert_eq!(factory.extension::<u32>(), Some(7));
    assert_eq!(other.extension::<Ring>(), None);
    factory.insert_extension(Ring("b"));
    assert_eq!(factory.extension::<Ring>(), Some(Ring("b")));
}
