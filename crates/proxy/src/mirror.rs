//! Mirroring: a copy of a route's requests (all, or a share) sent to a shadow upstream, its
//! answer read and discarded. The copy is the request as the route's upstream gets it (target,
//! headers, body); it goes from a task of its own, so the client's request never waits for it
//! or fails with it. A body is copied as it passes to the route's upstream, up to `max_body`,
//! and the copy sent once it is whole; copies under way are bounded (`max_in_flight`).

use bytes::{Bytes, BytesMut};
use gatehouse_config::HostHeader;
use gatehouse_telemetry::{RouteStats, Tally};
use gatehouse_upstream::{BoxError, Lease, Origin, RequestBody, SelectKey, Upstream};
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{HeaderMap, Method, Request, Uri};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;

/// 2⁶⁴ divided by the golden ratio: the step of the sequence that picks the share copied
/// (as the split's draw, `crate::split`).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A compiled `mirror`.
#[derive(Debug)]
pub struct Mirror {
    upstream: Arc<Upstream>,
    /// A request is copied when its place in the sequence falls below this (`None`: every one).
    below: Option<u64>,
    seen: AtomicU64,
    max_body: u64,
    timeout: Duration,
    in_flight: AtomicUsize,
    max_in_flight: usize,
    /// `host_header: upstream` on the route: the copy names the mirror's endpoint.
    upstream_host: bool,
    tally: Arc<Tally>,
}

impl Mirror {
    /// The route's `mirror` to `upstream`, counted in `stats`.
    pub fn new(m: &gatehouse_config::Mirror, upstream: Arc<Upstream>, host: &HostHeader, stats: &RouteStats) -> Mirror {
        let below = match m.percent {
            p if p >= 100.0 => None,
            // 2⁶⁴ · p / 100, in integers to keep it exact for whole percents.
            p => Some(((u128::from(u64::MAX) + 1) * ((p * 1e6) as u128) / 100_000_000) as u64),
        };
        Mirror {
            tally: stats.tally(&format!("mirror:{}", m.upstream)),
            upstream,
            below,
            seen: AtomicU64::new(0),
            max_body: m.max_body.0,
            timeout: m.timeout.0,
            in_flight: AtomicUsize::new(0),
            max_in_flight: m.max_in_flight as usize,
            upstream_host: *host == HostHeader::Upstream,
        }
    }

    /// The upstream copies go to and their counters, for the metrics.
    pub fn tally(&self) -> (&str, &Tally) {
        (&self.upstream.name, &self.tally)
    }

    fn chosen(&self) -> bool {
        match self.below {
            None => true,
            Some(below) => self.seen.fetch_add(1, Relaxed).wrapping_mul(GOLDEN) < below,
        }
    }
}

/// The request's body, copied for `mirror` when this request is one it copies: the copy is
/// sent from a task of its own with the head in `parts` (as the route's upstream gets it),
/// at once for a request without a body, else once the body has passed whole.
#[inline(never)] // only on routes that mirror
pub fn copy(mirror: &Arc<Mirror>, parts: &Parts, body: RequestBody, origin: Origin) -> RequestBody {
    if !mirror.chosen() {
        return body;
    }
    if mirror.in_flight.fetch_add(1, Relaxed) >= mirror.max_in_flight {
        mirror.in_flight.fetch_sub(1, Relaxed);
        mirror.tally.skipped.inc();
        return body;
    }
    let slot = Slot(mirror.clone());
    let head = (parts.method.clone(), parts.uri.clone(), parts.headers.clone());
    if body.is_empty() {
        tokio::spawn(send(slot, head, Bytes::new(), origin));
        return body;
    }
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        match rx.await {
            Ok(bytes) => send(slot, head, bytes, origin).await,
            // Longer than `max_body`, failed, or never read to its end.
            Err(_) => slot.0.tally.incomplete.inc(),
        }
    });
    let tee = Tee { inner: body, copy: BytesMut::new(), limit: mirror.max_body, done: Some(tx) };
    RequestBody::streaming(tee, u64::MAX, Duration::MAX)
}

/// A copy's place among those under way, given back when it ends however it ends.
struct Slot(Arc<Mirror>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

/// Sends one copy and reads its answer to the end, within the mirror's `timeout`.
async fn send(slot: Slot, (method, uri, headers): (Method, Uri, HeaderMap), body: Bytes, origin: Origin) {
    let m = &slot.0;
    let len = body.len() as u64;
    match tokio::time::timeout(m.timeout, exchange(m, method, uri, headers, body, origin)).await {
        Ok(true) => m.tally.requests.inc(),
        _ => m.tally.failed.inc(),
    }
    m.tally.bytes.add(len);
}

/// One exchange with an endpoint of the mirror's upstream: whether it answered (any status).
async fn exchange(m: &Mirror, method: Method, uri: Uri, mut headers: HeaderMap, body: Bytes, origin: Origin) -> bool {
    let upstream = &m.upstream;
    let settings = &upstream.settings;
    let members = upstream.members_full();
    let key = SelectKey {
        client_ip: origin.client.ip(),
        uri: uri.path_and_query().map_or("/", |p| p.as_str()),
        headers: &headers,
    };
    let Some(idx) = upstream.select(&members, &key, &[]) else {
        return false;
    };
    let ep = members.endpoints[idx].state.clone();
    if m.upstream_host {
        if let Ok(v) = HeaderValue::try_from(&*ep.authority) {
            headers.insert(header::HOST, v);
        }
    }
    if !body.is_empty() {
        // The copy's length is known: it goes with `Content-Length`, whatever the original's
        // framing was.
        headers.remove(header::TRANSFER_ENCODING);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    let lease = match Lease::pooled(&ep, settings, false, origin) {
        Some(lease) => lease,
        None => match Lease::open(&ep, settings, false, origin).await {
            Ok(lease) => lease,
            Err(_) => {
                upstream.record_failure(&members, idx);
                return false;
            }
        },
    };
    let mut request = Request::new(RequestBody::streaming(Whole(Some(body)), u64::MAX, Duration::MAX));
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    let resp = match lease.send(request, settings.read_timeout).await {
        Ok(resp) => resp,
        Err(_) => {
            upstream.record_failure(&members, idx);
            return false;
        }
    };
    upstream.record_outcome(&members, idx, resp.status().is_server_error());
    // Read to the end, so the connection goes back to the pool.
    let mut body = std::pin::pin!(resp.into_body());
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        if frame.is_err() {
            return true;
        }
    }
    true
}

/// A body in one piece.
struct Whole(Option<Bytes>);

impl Body for Whole {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// The request body on its way to the route's upstream, copied up to `limit` bytes; the copy
/// handed over when the body has ended (dropped unsent when it is longer, fails, or is left
/// unread).
struct Tee {
    inner: RequestBody,
    copy: BytesMut,
    limit: u64,
    done: Option<oneshot::Sender<Bytes>>,
}

impl Body for Tee {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(_)) = (frame.data_ref(), &this.done) {
                    if (this.copy.len() + data.len()) as u64 > this.limit {
                        this.done = None;
                        this.copy = BytesMut::new();
                    } else {
                        this.copy.extend_from_slice(data);
                    }
                }
                // A body of known length may not be polled past its last part.
                if this.inner.is_end_stream() {
                    if let Some(done) = this.done.take() {
                        let _ = done.send(std::mem::take(&mut this.copy).freeze());
                    }
                }
            }
            Poll::Ready(None) => {
                if let Some(done) = this.done.take() {
                    let _ = done.send(std::mem::take(&mut this.copy).freeze());
                }
            }
            Poll::Ready(Some(Err(_))) => this.done = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
