//! Spans batched per thread: each worker appends its finished spans, as `ScopeSpans.spans`
//! fields, to one buffer of its own, and hands that buffer to the exporter's queue once it holds
//! `export.batch` spans, or `export.interval` after its first span (a timer task on the worker's
//! runtime, armed once per batch), or when the node stops ([`flush_local`]). A span costs a copy
//! into the buffer; the queue's `try_send`, the exporter's wake-up and the cross-thread free
//! happen once per batch, and the buffers come back to the workers through [`Shared::spare`].
//!
//! A batch belongs to one tracer's queue. A span of another tracer (after a reload changed
//! `tracing`) first hands the batch to its own queue, so no span goes to an exporter other than
//! its tracer's.

use crate::export::TraceStats;
use crate::proto;
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::error::TrySendError;

/// Spans of one thread, encoded, on their way to the exporter.
#[derive(Debug)]
pub(crate) struct Batch {
    /// `ScopeSpans.spans` fields, one per span.
    pub bytes: Vec<u8>,
    /// How many.
    pub spans: usize,
}

/// What the exporter shares with the threads that hand it batches.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Wakes the exporter: a batch was queued.
    pub ready: tokio::sync::Notify,
    /// Batch buffers the exporter is done with, for the workers' next batches.
    pub spare: Mutex<Vec<Vec<u8>>>,
}

/// Buffers kept for reuse, at most.
pub(crate) const SPARE_BUFFERS: usize = 16;
/// A span buffer larger than this (a span with a very long attribute) is not kept.
const SPAN_BUFFER_MAX: usize = 16 << 10;

/// One tracer's queue to its exporter.
#[derive(Debug)]
pub(crate) struct Queue {
    pub tx: tokio::sync::mpsc::Sender<Batch>,
    pub shared: Arc<Shared>,
    pub stats: Arc<TraceStats>,
}

impl Queue {
    /// Queues `batch`; a full or closed queue drops it (counted), and its buffer is kept.
    fn send(&self, batch: Batch) -> Option<Vec<u8>> {
        match self.tx.try_send(batch) {
            Ok(()) => {
                self.shared.ready.notify_one();
                None
            }
            Err(TrySendError::Full(b) | TrySendError::Closed(b)) => {
                self.stats.dropped.fetch_add(b.spans as u64, Relaxed);
                Some(b.bytes)
            }
        }
    }

    /// A buffer for a new batch: one the exporter gave back, else a new one.
    fn buffer(&self) -> Vec<u8> {
        self.shared.spare.lock().ok().and_then(|mut s| s.pop()).unwrap_or_default()
    }
}

/// This thread's batch being filled.
#[derive(Debug)]
struct Pending {
    bytes: Vec<u8>,
    spans: usize,
    /// The queue it goes to; `None` when empty.
    to: Option<Arc<Queue>>,
    /// A timer task will hand the batch over.
    armed: bool,
}

impl Pending {
    /// Hands what is pending to its queue.
    fn hand_over(&mut self) {
        let Some(to) = self.to.take() else { return };
        if self.spans == 0 {
            return;
        }
        let bytes = std::mem::take(&mut self.bytes);
        let spans = std::mem::replace(&mut self.spans, 0);
        if let Some(mut kept) = to.send(Batch { bytes, spans }) {
            kept.clear();
            self.bytes = kept;
        }
    }
}

impl Drop for Pending {
    /// A worker thread ending hands over what it holds.
    fn drop(&mut self) {
        self.hand_over();
    }
}

thread_local! {
    static PENDING: RefCell<Pending> =
        const { RefCell::new(Pending { bytes: Vec::new(), spans: 0, to: None, armed: false }) };
    /// The buffer the next span on this thread is written into.
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A buffer for a span: the thread's spare one, else a new one.
#[inline]
pub(crate) fn spare() -> Vec<u8> {
    let buf = SPARE.with(|s| s.take());
    match buf.capacity() {
        0 => Vec::with_capacity(768),
        _ => buf,
    }
}

/// A span's buffer back as the thread's spare one.
#[inline]
pub(crate) fn give_back(mut buf: Vec<u8>) {
    if buf.capacity() != 0 && buf.capacity() <= SPAN_BUFFER_MAX {
        buf.clear();
        SPARE.with(|s| s.set(buf));
    }
}

/// Appends the encoded `span` to this thread's batch for `queue`.
#[inline]
pub(crate) fn add(queue: &Arc<Queue>, span: &[u8], batch: usize, interval: Duration) {
    PENDING.with(|p| {
        let Ok(mut p) = p.try_borrow_mut() else {
            // Only a span finished while this thread hands over could get here: none does.
            queue.stats.dropped.fetch_add(1, Relaxed);
            return;
        };
        let same = p.to.as_ref().is_some_and(|to| Arc::ptr_eq(to, queue));
        if !same {
            // A batch of the tracer before a reload goes to that tracer's exporter.
            p.hand_over();
            p.to = Some(queue.clone());
        }
        if p.spans == 0 && p.bytes.capacity() == 0 {
            p.bytes = queue.buffer();
        }
        proto::bytes(&mut p.bytes, proto::SCOPE_SPANS_SPANS, span);
        p.spans += 1;
        // Full, it goes now; else the timer (one per batch) hands it over within `interval`.
        if p.spans >= batch {
            p.hand_over();
        } else if !p.armed {
            p.armed = arm(interval);
            if !p.armed {
                // No runtime of this thread's own to wait on: the span goes now.
                p.hand_over();
            }
        }
    });
}

/// Starts a task on this thread's runtime that hands the batch over after `interval`; false
/// when the thread has no current-thread runtime (only the workers' runtimes record spans).
#[cold]
fn arm(interval: Duration) -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::CurrentThread => {
            h.spawn(async move {
                tokio::time::sleep(interval).await;
                PENDING.with(|p| {
                    if let Ok(mut p) = p.try_borrow_mut() {
                        p.armed = false;
                        p.hand_over();
                    }
                });
            });
            true
        }
        _ => false,
    }
}

/// Hands this thread's batch to the exporter, however few spans it holds: each worker, when the
/// node stops.
pub fn flush_local() {
    PENDING.with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            p.hand_over();
        }
    });
}
