//! How long the coordinator has been waiting on the brokers in a commit or an abort. While it
//! waits its loop does not run, and that loop keeps readiness and the metrics: a broker that
//! stops answering (its connections open, nothing answered) held `/readyz` at 200 for minutes. A
//! watchdog of its own says the processor not ready once the wait outlasts the Kafka timeout, and
//! says why in the log, until the wait ends.

use crate::http::HttpState;
use crate::metrics::Metrics;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A commit or abort under way, until dropped.
pub(crate) struct Waiting(Arc<HttpState>);

impl Waiting {
    pub fn begin(http: &Arc<HttpState>) -> Waiting {
        http.waits.begin();
        Waiting(http.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waits.end();
    }
}

/// Holds `toolcalls_ready` at 0 while the processor is stalled (the coordinator sets it again
/// once its wait ends) and says the stall once, until the processor stops.
pub(crate) async fn watch(http: Arc<HttpState>, metrics: Metrics) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut said = false;
    while http.alive.load(Ordering::Acquire) {
        tick.tick().await;
        match http.waits.stalled(http.stall_after) {
            Some(waited) => {
                metrics.ready.set(0);
                if !said {
                    said = true;
                    tracing::warn!(
                        waited_s = waited.as_secs(),
                        "a commit or abort has waited on the brokers for longer than the Kafka timeout; not ready until it completes (is a broker hung?)"
                    );
                }
            }
            None if said => {
                said = false;
                tracing::info!("the wait on the brokers ended");
            }
            None => {}
        }
    }
}
