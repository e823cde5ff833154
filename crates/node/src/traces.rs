//! The node's tracer: started from `tracing:`, kept while a reload or release leaves `tracing`
//! as it was (its exporter and queue go on), replaced when it changes (the old exporter sends
//! what it has queued once the last request holding it is done), flushed when the node stops.

use crate::error::NodeError;
use gatehouse_config::Config;
use gatehouse_otel::{TraceStats, Tracer};
use std::sync::Arc;
use std::time::Duration;

/// How long a stopping node waits for the spans it queued to be exported.
const FLUSH_ON_STOP: Duration = Duration::from_secs(5);

/// The running tracer and the counters every tracer of this process adds to.
#[derive(Default)]
pub(crate) struct Traces {
    tracer: Option<Arc<Tracer>>,
    pub(crate) stats: Arc<TraceStats>,
}

impl Traces {
    /// The tracer for `config`: the running one when `tracing` did not change, a new one when it
    /// did, none when it is off. The running one stays until the caller installs the result.
    pub(crate) fn for_config(&self, config: &Config) -> Result<Option<Arc<Tracer>>, NodeError> {
        let Some(settings) = &config.tracing else { return Ok(None) };
        if let Some(t) = self.tracer.as_ref().filter(|t| t.settings() == settings) {
            return Ok(Some(t.clone()));
        }
        let node_id = config.node.id.clone().unwrap_or_else(crate::follow::hostname);
        let tracer = Tracer::start(settings, &node_id, self.stats.clone()).map_err(NodeError::Tracing)?;
        tracing::info!(
            endpoint = settings.otlp.endpoint,
            protocol = ?settings.otlp.protocol,
            ratio = settings.sampler.ratio,
            "traces exported over OTLP"
        );
        Ok(Some(Arc::new(tracer)))
    }

    /// Makes `tracer` the running one.
    pub(crate) fn install(&mut self, tracer: Option<Arc<Tracer>>) {
        if self.tracer.is_some() && tracer.is_none() {
            tracing::info!("traces off");
        }
        self.tracer = tracer;
    }

    /// Exports what is queued, at most [`FLUSH_ON_STOP`].
    pub(crate) fn flush(&self) {
        if let Some(t) = &self.tracer {
            t.shutdown(FLUSH_ON_STOP);
        }
    }
}
