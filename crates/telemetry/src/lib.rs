//! Record stage: lock-free counters and histograms read by the `/metrics` endpoint, and an access
//! log that formats lines into a per-worker buffer and hands whole buffers to a writer thread, so a
//! slow disk never blocks a worker.

#![forbid(unsafe_code)]

mod accept;
pub mod access_log;
mod ip_text;
mod log_every;
mod metrics;
pub mod process_log;
mod time;

pub use accept::AcceptBackoff;
pub use ip_text::{ip_text, IP_TEXT_MAX};
pub use log_every::LogEvery;
pub use metrics::{
    Counter, Gauge, H2Offence, Histogram, ProcessStats, ProxyRefusal, RouteStats, Tally, LATENCY_BUCKETS,
};
pub use time::{clf_time, http_date, iso_date, rfc3339_time};

/// An error and its causes on one line, for a log (hyper's own says little: "client error
/// (Connect)").
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
