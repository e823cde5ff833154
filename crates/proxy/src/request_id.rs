//! Serve stage, before routing: the id a request carries to its upstream, back to the client and
//! into the access log. A well-formed id from the client is kept when trusted; otherwise a new one
//! is made, 32 lowercase hex digits as nginx's `$request_id`.
//!
//! Generation costs no lock, no system call and one allocation per 128 ids (a thread's slab of
//! shared bytes, so cloning an id allocates nothing either): each thread steps a counter of its
//! own and mixes it with a key of its own. The process seed is read from the OS once, and each
//! thread's key once, on the thread's first id.

use bytes::BytesMut;
use data_encoding::HEXLOWER;
use gatehouse_config::RequestId;
use gatehouse_plugins::EditHeaders;
use http::header::{HeaderMap, HeaderName, HeaderValue, InvalidHeaderName};
use std::cell::{Cell, RefCell};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// Longest id accepted from a client: room for a UUID or a trace id with a prefix, while a log
/// line stays short whatever clients send.
pub const MAX_LEN: usize = 128;

/// Why the `forwarding.request_id` settings do not compile.
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestIdError {
    /// The header is not a header name (validation refuses it first).
    HeaderName {
        /// The name as configured.
        header: String,
        /// Why.
        source: InvalidHeaderName,
    },
}

impl std::fmt::Display for RequestIdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestIdError::HeaderName { header, .. } => {
                write!(f, "forwarding.request_id.header: `{header}` is not a header name")
            }
        }
    }
}

impl std::error::Error for RequestIdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestIdError::HeaderName { source, .. } => Some(source),
        }
    }
}

/// The compiled `forwarding.request_id` settings.
#[derive(Debug, Clone)]
pub struct RequestIds {
    header: HeaderName,
    trust_incoming: bool,
    echo: bool,
}

impl RequestIds {
    /// Compiles validated settings; fails only on a header name validation let through.
    pub fn build(cfg: &RequestId) -> Result<Self, RequestIdError> {
        let header = HeaderName::from_bytes(cfg.header.as_bytes())
            .map_err(|source| RequestIdError::HeaderName { header: cfg.header.clone(), source })?;
        Ok(RequestIds { header, trust_incoming: cfg.trust_incoming, echo: cfg.echo })
    }

    /// The request's id: the client's when trusted and well formed (exactly one value), else a new
    /// one. Whatever the client sent under the header is replaced by it.
    pub(crate) fn assign(&self, headers: &mut HeaderMap) -> HeaderValue {
        let incoming =
            if self.trust_incoming { single(headers, &self.header).filter(|v| well_formed(v)) } else { None };
        if let Some(id) = incoming {
            // One value already and it stays: the request needs no change.
            return id.clone();
        }
        let id = generate();
        headers.insert(&self.header, id.clone());
        id
    }

    /// Puts `id` on the client's response, replacing any the upstream sent, when `echo` is on.
    pub(crate) fn echo<H: EditHeaders + ?Sized>(&self, headers: &mut H, mut id: HeaderValue) {
        if self.echo {
            // Unique per response: HPACK must not index it. In the dynamic table it would never
            // be used again, and each new one would push out entries that repeat (HTTP/2 clients
            // then get those re-sent in full, and the encoder compares against every stale id).
            id.set_sensitive(true);
            headers.insert(&self.header, id);
        }
    }
}

/// The only value of `name`, if it has exactly one.
fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    let mut all = headers.get_all(name).iter();
    match (all.next(), all.next()) {
        (Some(v), None) => Some(v),
        _ => None,
    }
}

/// 1 to [`MAX_LEN`] visible ASCII characters: no space, no control byte, nothing beyond ASCII, so
/// the id is one token in a log line whatever the format.
pub fn well_formed(id: &HeaderValue) -> bool {
    let b = id.as_bytes();
    (1..=MAX_LEN).contains(&b.len()) && b.iter().all(|c| (0x21..=0x7e).contains(c))
}

/// A new id: 32 lowercase hex digits, unique within the process and random-looking across processes.
pub fn generate() -> HeaderValue {
    let (a, b) = next_pair();
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&a.to_be_bytes());
    raw[8..].copy_from_slice(&b.to_be_bytes());
    let mut hex = [0u8; 32];
    HEXLOWER.encode_mut(&raw, &mut hex);
    // From the thread's slab: a slice of shared bytes, so neither making the value nor cloning
    // it (for the upstream, the response and the log) allocates.
    let bytes = SLAB.with_borrow_mut(|slab| {
        if slab.capacity() < hex.len() {
            *slab = BytesMut::with_capacity(SLAB_IDS * hex.len());
        }
        slab.extend_from_slice(&hex);
        slab.split().freeze()
    });
    let mut id = HeaderValue::from_maybe_shared(bytes).expect("hex digits are a valid header value");
    // Unique: not for an HTTP/2 upstream's HPACK table either (see `echo`).
    id.set_sensitive(true);
    id
}

/// Ids carved from one allocation: a slab is freed once the last of its ids is dropped.
const SLAB_IDS: usize = 128;

thread_local! {
    static SLAB: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// Weyl increment (2^64 / golden ratio, odd): stepping a counter by it visits every value once
/// before repeating.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

thread_local! {
    /// This thread's counter and key; `None` until its first id.
    static STATE: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// Two 64-bit halves of an id. Within a thread the first half never repeats (a bijection of the
/// counter); two threads that happen to produce the same first half differ in the second, since
/// their keys differ and the mixer is a bijection. So ids are unique within the process for 2^64
/// ids per thread, and another process starts from another seed.
fn next_pair() -> (u64, u64) {
    STATE.with(|state| {
        let (counter, key) = state.get().unwrap_or_else(seed_thread);
        let counter = counter.wrapping_add(GOLDEN);
        state.set(Some((counter, key)));
        let a = mix(counter);
        (a, mix(a ^ key))
    })
}

/// A thread's starting counter and its key, distinct from every other thread's key.
fn seed_thread() -> (u64, u64) {
    static SEED: OnceLock<[u64; 2]> = OnceLock::new();
    static THREADS: AtomicU64 = AtomicU64::new(0);
    let seed = SEED.get_or_init(|| {
        // std seeds RandomState from the OS; no extra dependency for 128 random bits.
        let s = std::collections::hash_map::RandomState::new();
        [s.hash_one(0x5eed_u64), s.hash_one(!0x5eed_u64)]
    });
    let n = THREADS.fetch_add(1, Relaxed);
    (mix(seed[0] ^ n.wrapping_mul(GOLDEN)), mix(seed[1] ^ n))
}

/// The splitmix64 finalizer: a bijection on u64 that spreads every input bit over the output.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn ids(trust_incoming: bool, echo: bool) -> RequestIds {
        RequestIds::build(&RequestId { header: "X-Request-Id".into(), trust_incoming, echo }).expect("valid")
    }

    #[test]
    fn a_header_that_is_no_name_is_refused_with_its_path() {
        let e = RequestIds::build(&RequestId { header: "X Id".into(), trust_incoming: true, echo: true })
            .expect_err("a space");
        assert_eq!(e.to_string(), "forwarding.request_id.header: `X Id` is not a header name");
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn generated_ids_are_32_lowercase_hex_and_distinct() {
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            let id = generate();
            let s = id.to_str().expect("ascii");
            assert_eq!(s.len(), 32, "{s}");
            assert!(s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{s}");
            assert!(well_formed(&id));
            assert!(seen.insert(s.to_string()), "repeated id {s}");
        }
    }

    #[test]
    fn ids_carved_from_one_slab_keep_their_bytes() {
        // Past two slabs: no id is written over by a later one.
        let ids: Vec<(HeaderValue, String)> = (0..3 * SLAB_IDS + 7)
            .map(|_| {
                let id = generate();
                let text = id.to_str().expect("ascii").to_string();
                (id, text)
            })
            .collect();
        for (id, text) in &ids {
            assert_eq!(id.to_str().ok(), Some(text.as_str()));
        }
        assert_eq!(ids.iter().map(|(_, t)| t).collect::<HashSet<_>>().len(), ids.len());
    }

    #[test]
    fn threads_make_distinct_ids() {
        let batches: Vec<Vec<String>> = (0..4)
            .map(|_| std::thread::spawn(|| (0..1000).map(|_| generate().to_str().unwrap_or("").to_string()).collect()))
            .map(|t| t.join().expect("thread"))
            .collect();
        let all: HashSet<&String> = batches.iter().flatten().collect();
        assert_eq!(all.len(), 4000);
        // Each thread starts somewhere else: the first ids of two threads share nothing.
        assert_ne!(batches[0][0][..16], batches[1][0][..16]);
    }

    #[test]
    fn well_formed_ids() {
        let ok = |s: &[u8]| HeaderValue::from_bytes(s).map(|v| well_formed(&v)).unwrap_or(false);
        assert!(ok(b"a"));
        assert!(ok(b"req-42:abc/DEF_~!"));
        assert!(ok("x".repeat(MAX_LEN).as_bytes()));
        assert!(!ok(b""));
        assert!(!ok("x".repeat(MAX_LEN + 1).as_bytes()));
        assert!(!ok(b"two words"));
        assert!(!ok(b"tab\there"));
        assert!(!ok("caf\u{e9}".as_bytes()));
        assert!(!ok(b"del\x7f"));
    }

    #[test]
    fn a_trusted_well_formed_id_is_kept() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("client-1"));
        assert_eq!(ids(true, true).assign(&mut h), "client-1");
        assert_eq!(h.get_all("x-request-id").iter().collect::<Vec<_>>(), ["client-1"]);
    }

    #[test]
    fn malformed_repeated_or_untrusted_ids_are_replaced() {
        let cases: [(&[&'static str], bool); 4] =
            [(&["has space"], true), (&["a", "b"], true), (&["client-1"], false), (&[], true)];
        for (sent, trust) in cases {
            let mut h = HeaderMap::new();
            for v in sent {
                h.append("x-request-id", HeaderValue::from_static(v));
            }
            let id = ids(trust, true).assign(&mut h);
            assert_eq!(id.len(), 32, "{sent:?} trust={trust}");
            assert_eq!(h.get_all("x-request-id").iter().collect::<Vec<_>>(), [&id], "{sent:?} trust={trust}");
        }
    }

    #[test]
    fn echo_replaces_the_upstream_id_or_stays_away() {
        let id = HeaderValue::from_static("ours");
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("theirs"));
        ids(true, true).echo(&mut h, id.clone());
        assert_eq!(h.get_all("x-request-id").iter().collect::<Vec<_>>(), ["ours"]);
        // Marked so that HTTP/2's HPACK never indexes it: unique per response.
        assert!(h.get("x-request-id").is_some_and(HeaderValue::is_sensitive));
        assert!(generate().is_sensitive());
        let mut h = HeaderMap::new();
        ids(true, false).echo(&mut h, id);
        assert!(h.is_empty());
    }
}
