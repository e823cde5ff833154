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

/// 2⁶⁴ times the fractional part of √2: the step of the sequence that picks the share copied.
/// Not the split's step (the golden ratio's, `crate::split`): the two counters of a route that
/// splits and mirrors advance together, and with one step the copies would all come from the
/// first upstream of the split; 1, φ and √2 being independent over the rationals, the two
/// sequences are equidistributed together.
const SQRT2: u64 = 0x6A09_E667_F3BC_C908;

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
            Some(below) => self.seen.fetch_add(1, Relaxed).wrapping_mul(SQRT2) < below,
        }
    }
}

/// The request's body, copied for `mirror` when this request is one it copies: the copy is
/// sent from a task of its own with the head in `parts` (as the route's upstream gets it), at
/// once for a request without a body, else once the body has passed whole.
#[inline(never)] // only on routes that mirror
pub fn copy(mirror: &Arc<Mirror>, parts: &Parts, body: RequestBody, origin: Origin) -> RequestBody {
    if !mirror.chosen() {
        return body;
    }
    let copy = Pending {
        mirror: mirror.clone(),
        head: (parts.method.clone(), parts.uri.clone(), parts.headers.clone()),
        origin,
    };
    if body.is_empty() {
        copy.start(Bytes::new());
        return body;
    }
    let tee = Tee { inner: body, copy: BytesMut::new(), limit: mirror.max_body, pending: Some(copy) };
    RequestBody::streaming(tee, u64::MAX, Duration::MAX)
}

/// A copy waiting for its body.
struct Pending {
    mirror: Arc<Mirror>,
    head: (Method, Uri, HeaderMap),
    origin: Origin,
}

impl Pending {
    /// Sends the copy with `body` from a task of its own, if fewer than `max_in_flight` copies
    /// are under way; else counts it skipped.
    fn start(self, body: Bytes) {
        let m = &self.mirror;
        if m.in_flight.fetch_add(1, Relaxed) >= m.max_in_flight {
            m.in_flight.fetch_sub(1, Relaxed);
            m.tally.skipped.inc();
            return;
        }
        tokio::spawn(send(Slot(self.mirror), self.head, body, self.origin));
    }
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
    match exchange(m, method, uri, headers, body, origin).await {
        true => m.tally.requests.inc(),
        false => m.tally.failed.inc(),
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
    let body = match body.is_empty() {
        true => RequestBody::empty(),
        false => RequestBody::streaming(Whole(Some(body)), u64::MAX, Duration::MAX),
    };
    let mut request = Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    let exchanged = async {
        let lease = match Lease::pooled(&ep, settings, false, origin) {
            Some(lease) => lease,
            None => Lease::open(&ep, settings, false, origin).await.map_err(drop)?,
        };
        let resp = lease.send(request, settings.read_timeout).await.map_err(drop)?;
        upstream.record_outcome(&members, idx, resp.status().is_server_error());
        // Read to the end, so the connection goes back to the pool.
        let mut body = std::pin::pin!(resp.into_body());
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            if frame.is_err() {
                break;
            }
        }
        Ok::<bool, ()>(true)
    };
    match tokio::time::timeout(m.timeout, exchanged).await {
        Ok(Ok(answered)) => answered,
        // Refused, broken, or silent for the mirror's `timeout`: the endpoint's failure, for its
        // passive health.
        Ok(Err(())) | Err(_) => {
            upstream.record_failure(&members, idx);
            false
        }
    }
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
/// sent when the body has ended (counted `incomplete` when it is longer, fails, or is left
/// unread).
struct Tee {
    inner: RequestBody,
    copy: BytesMut,
    limit: u64,
    pending: Option<Pending>,
}

impl Tee {
    fn complete(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.start(std::mem::take(&mut self.copy).freeze());
        }
    }

    fn abandon(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.mirror.tally.incomplete.inc();
        }
        self.copy = BytesMut::new();
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        self.abandon();
    }
}

impl Body for Tee {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(_)) = (frame.data_ref(), &this.pending) {
                    if (this.copy.len() + data.len()) as u64 > this.limit {
                        this.abandon();
                    } else {
                        this.copy.extend_from_slice(data);
                    }
                }
                // A body of known length may not be polled past its last part.
                if this.inner.is_end_stream() {
                    this.complete();
                }
            }
            Poll::Ready(None) => this.complete(),
            Poll::Ready(Some(Err(_))) => this.abandon(),
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
