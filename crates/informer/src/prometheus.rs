//! Exporting informer metrics to a prometheus-client registry.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::factory::SharedInformerFactory;

/// Name of the counter of objects an informer could not decode.
pub const DECODE_ERRORS_METRIC: &str = "informer_decode_errors_total";
/// Name of the gauge of seconds since an informer's last successful list or
/// watch response.
pub const SILENCE_METRIC: &str = "informer_seconds_since_last_response";

/// Exports the informers of a [`SharedInformerFactory`] on every scrape,
/// labelled `resource="<plural>.<group>"` (`pods` for the core group):
///
/// - `informer_decode_errors_total`: objects that could not be decoded
///   (each arrival counts, relists included);
/// - `informer_seconds_since_last_response`: seconds since the last
///   successful list or watch response (bookmarks included), or since the
///   start without one; only for running informers. Alert when it exceeds
///   [`DEFAULT_WATCH_HEALTH_BOUND`](crate::DEFAULT_WATCH_HEALTH_BOUND).
///
/// Informers sharing a resource (different namespaces or selectors) share
/// one series: their errors are summed, the longest silence is reported.
///
/// ```
/// use std::sync::Arc;
/// use ctrlkit_informer::{InformerCollector, SharedInformerFactory};
/// use k8s_openapi::api::core::v1::Pod;
/// use prometheus_client::registry::Registry;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse()?))?;
/// let factory = Arc::new(SharedInformerFactory::new(client));
/// let _pods = factory.all::<Pod>(Default::default());
/// let mut registry = Registry::default();
/// InformerCollector::register(factory, &mut registry);
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry)?;
/// assert!(text.contains(r#"informer_decode_errors_total{resource="pods"} 0"#), "{text}");
/// # Ok(())
/// # }
/// ```
pub struct InformerCollector {
    factory: Arc<SharedInformerFactory>,
}

impl fmt::Debug for InformerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerCollector").finish_non_exhaustive()
    }
}

impl InformerCollector {
    /// A collector of `factory`'s informers (those handed out by the time of
    /// each scrape).
    pub fn new(factory: Arc<SharedInformerFactory>) -> Self {
        Self { factory }
    }

    /// Registers a collector of `factory`'s informers in `registry`. Call
    /// it once per registry.
    pub fn register(factory: Arc<SharedInformerFactory>, registry: &mut Registry) {
        registry.register_collector(Box::new(Self::new(factory)));
    }
}

#[derive(Default)]
struct Series {
    decode_errors: u64,
    silent_secs: Option<f64>,
}

impl Collector for InformerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut by_resource: BTreeMap<String, Series> = BTreeMap::new();
        for stats in self.factory.stats() {
            let series = by_resource.entry(stats.resource).or_default();
            series.decode_errors += stats.decode_errors;
            if let Some(silent) = stats.silent_for {
                let secs = silent.as_secs_f64();
                series.silent_secs = Some(series.silent_secs.map_or(secs, |s| s.max(secs)));
            }
        }

        let mut family = encoder.encode_descriptor(
            // prometheus-client appends `_total` to counters.
            DECODE_ERRORS_METRIC.trim_end_matches("_total"),
            "Objects an informer received but could not decode (skipped, reported)",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (resource, series) in &by_resource {
            let labels = [("resource", resource.as_str())];
            ConstCounter::new(series.decode_errors).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            SILENCE_METRIC,
            "Seconds since an informer's last successful list or watch response (events and bookmarks count)",
            None,
            ConstGauge::new(0.0f64).metric_type(),
        )?;
        for (resource, series) in &by_resource {
            if let Some(secs) = series.silent_secs {
                let labels = [("resource", resource.as_str())];
                ConstGauge::new(secs).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
