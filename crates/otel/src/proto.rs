//! OTLP's protobuf messages (`opentelemetry/proto/trace/v1/trace.proto` and the collector's
//! `ExportTraceServiceRequest`), written field by field straight from the request path's values.
//!
//! Written by hand rather than through the SDK and prost: building the SDK's `SpanData`, then
//! prost's structs, then encoding them and freeing both was 53 % of the instructions of a traced
//! request (callgrind, `bench/tracing.sh`); writing the bytes once is a fraction of that. Only
//! the few messages OTLP traces need are here, and the tests decode them with the
//! `opentelemetry-proto` crate's generated types.

/// Wire type of varints.
pub(crate) const VARINT: u32 = 0;
/// Wire type of 64-bit fixed numbers.
pub(crate) const FIXED64: u32 = 1;
/// Wire type of length-delimited fields (strings, bytes, messages).
pub(crate) const LEN: u32 = 2;
/// Wire type of 32-bit fixed numbers.
pub(crate) const FIXED32: u32 = 5;

/// Span fields (`Span` in trace.proto).
pub(crate) mod span {
    pub const TRACE_ID: u32 = 1;
    pub const SPAN_ID: u32 = 2;
    pub const PARENT_SPAN_ID: u32 = 4;
    pub const NAME: u32 = 5;
    pub const KIND: u32 = 6;
    pub const START: u32 = 7;
    pub const END: u32 = 8;
    pub const ATTRIBUTES: u32 = 9;
    pub const STATUS: u32 = 15;
    pub const FLAGS: u32 = 16;
    /// `SPAN_KIND_SERVER`.
    pub const KIND_SERVER: u64 = 2;
    /// `SPAN_KIND_CLIENT`.
    pub const KIND_CLIENT: u64 = 3;
    /// `SpanFlags`: the trace flags' sampled bit, and whether the parent is known to be remote.
    pub const FLAG_SAMPLED: u32 = 0x01;
    pub const FLAG_HAS_IS_REMOTE: u32 = 0x100;
    pub const FLAG_IS_REMOTE: u32 = 0x200;
    /// `Status.message`, `Status.code` and `STATUS_CODE_ERROR`.
    pub const STATUS_MESSAGE: u32 = 2;
    pub const STATUS_CODE: u32 = 3;
    pub const STATUS_ERROR: u64 = 2;
}

/// Appends `v` as a varint.
#[inline]
pub(crate) fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Bytes of `v` as a varint.
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn tag(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

/// Bytes of a length-delimited field of `n` bytes (tag, length, content).
#[inline]
pub(crate) fn field_len(field: u32, n: usize) -> usize {
    varint_len(u64::from(field << 3)) + varint_len(n as u64) + n
}

/// A length-delimited field's tag and length; its `n` bytes follow.
#[inline]
pub(crate) fn len_prefix(buf: &mut Vec<u8>, field: u32, n: usize) {
    tag(buf, field, LEN);
    varint(buf, n as u64);
}

/// A string, bytes or an encoded message.
#[inline]
pub(crate) fn bytes(buf: &mut Vec<u8>, field: u32, data: &[u8]) {
    len_prefix(buf, field, data.len());
    buf.extend_from_slice(data);
}

/// A varint field (enums, bools, uint32, int64 as two's complement).
#[inline]
pub(crate) fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
    tag(buf, field, VARINT);
    varint(buf, v);
}

/// A `fixed64` field (timestamps).
#[inline]
pub(crate) fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
    tag(buf, field, FIXED64);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// An attribute's value (`AnyValue`'s cases used here).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Any<'a> {
    Str(&'a [u8]),
    Bool(bool),
    Int(i64),
}

impl Any<'_> {
    /// The encoded `AnyValue`'s length.
    #[inline]
    fn len(&self) -> usize {
        match self {
            Any::Str(s) => field_len(1, s.len()),
            Any::Bool(_) => 2,
            Any::Int(i) => 1 + varint_len(*i as u64),
        }
    }
}

/// A `KeyValue` as field `field` (attributes: 9 in `Span`, 1 in `Resource`).
#[inline]
pub(crate) fn key_value(buf: &mut Vec<u8>, field: u32, key: &str, value: Any<'_>) {
    let any = value.len();
    len_prefix(buf, field, field_len(1, key.len()) + field_len(2, any));
    bytes(buf, 1, key.as_bytes());
    len_prefix(buf, 2, any);
    match value {
        Any::Str(s) => bytes(buf, 1, s),
        Any::Bool(b) => uint(buf, 2, u64::from(b)),
        Any::Int(i) => uint(buf, 3, i as u64),
    }
}

/// Longest attribute key a [`Key`] holds.
const KEY_MAX: usize = 45;

/// An attribute key encoded once, at compile time: `KeyValue.key`'s tag, length and bytes, then
/// the tag of `KeyValue.value`. Written as one fixed-size copy (no call to `memcpy`, no varint),
/// since the request path writes about twenty per traced request.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    bytes: [u8; KEY_MAX + 3],
    len: u8,
}

impl Key {
    /// Encodes `key` (at most 45 bytes: a longer one fails the build where it is a constant).
    pub const fn new(key: &str) -> Key {
        let k = key.as_bytes();
        assert!(k.len() <= KEY_MAX, "an attribute key is longer than a Key holds");
        let mut bytes = [0u8; KEY_MAX + 3];
        bytes[0] = (1 << 3 | LEN) as u8;
        bytes[1] = k.len() as u8;
        let mut i = 0;
        while i < k.len() {
            bytes[2 + i] = k[i];
            i += 1;
        }
        bytes[2 + k.len()] = (2 << 3 | LEN) as u8;
        Key { bytes, len: (k.len() + 3) as u8 }
    }
}

/// A `KeyValue` with a pre-encoded key as field `field` (below 16: a tag of one byte). About
/// twenty run per traced request, nearly all shorter than 128 bytes: their lengths are one byte
/// each, written without the varint loop. Inlined into each attribute's call: a call of its own
/// (the registers saved and restored, the value's case passed and matched again) was a fifth of
/// its cost.
#[inline(always)]
pub(crate) fn key_value_pre(buf: &mut Vec<u8>, field: u32, key: &Key, value: Any<'_>) {
    let n = usize::from(key.len);
    if let Any::Str(s) = value {
        // KeyValue: the key's n bytes, AnyValue's length (1), its tag and length (2), the string.
        let kv = n + 3 + s.len();
        if kv < 0x80 {
            buf.reserve(2 + KEY_MAX + 3 + 3 + s.len());
            buf.extend_from_slice(&[(field << 3 | LEN) as u8, kv as u8]);
            // The whole fixed-size array (a few vector moves), then the bytes past the key cut off.
            let at = buf.len();
            buf.extend_from_slice(&key.bytes);
            buf.truncate(at + n);
            buf.extend_from_slice(&[(s.len() + 2) as u8, (1 << 3 | LEN) as u8, s.len() as u8]);
            buf.extend_from_slice(s);
            return;
        }
    }
    let any = value.len();
    len_prefix(buf, field, n + varint_len(any as u64) + any);
    let at = buf.len();
    buf.extend_from_slice(&key.bytes);
    buf.truncate(at + n);
    varint(buf, any as u64);
    match value {
        Any::Str(s) => bytes(buf, 1, s),
        Any::Bool(b) => uint(buf, 2, u64::from(b)),
        Any::Int(i) => uint(buf, 3, i as u64),
    }
}

/// Top-level fields of the messages around spans.
const REQUEST_RESOURCE_SPANS: u32 = 1;
const RESOURCE_SPANS_RESOURCE: u32 = 1;
const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
const SCOPE_SPANS_SCOPE: u32 = 1;
pub(crate) const SCOPE_SPANS_SPANS: u32 = 2;

/// What every export request of one exporter starts with: its `Resource` and
/// `InstrumentationScope`, encoded once.
#[derive(Debug)]
pub(crate) struct Envelope {
    resource: Vec<u8>,
    scope: Vec<u8>,
}

impl Envelope {
    /// The resource's attributes (`service.name` and the others) and the scope's name and version.
    pub(crate) fn new(resource: &[(&str, &str)], scope: (&str, &str)) -> Envelope {
        let mut r = Vec::new();
        for (k, v) in resource {
            key_value(&mut r, 1, k, Any::Str(v.as_bytes()));
        }
        let mut s = Vec::new();
        bytes(&mut s, 1, scope.0.as_bytes());
        bytes(&mut s, 2, scope.1.as_bytes());
        Envelope { resource: r, scope: s }
    }

    /// The start of an `ExportTraceServiceRequest` whose spans are `spans_len` bytes of encoded
    /// `ScopeSpans.spans` fields (threads' batches), which follow it as they are: the batches
    /// are sent after it without being copied into one buffer. `prefix` bytes are left free at
    /// the front (gRPC's message header).
    pub(crate) fn head(&self, prefix: usize, spans_len: usize) -> (Vec<u8>, usize) {
        let scope_spans = field_len(SCOPE_SPANS_SCOPE, self.scope.len()) + spans_len;
        let resource_spans = field_len(RESOURCE_SPANS_RESOURCE, self.resource.len())
            + field_len(RESOURCE_SPANS_SCOPE_SPANS, scope_spans);
        let total = field_len(REQUEST_RESOURCE_SPANS, resource_spans);
        let mut buf = Vec::with_capacity(prefix + total - spans_len);
        buf.resize(prefix, 0);
        len_prefix(&mut buf, REQUEST_RESOURCE_SPANS, resource_spans);
        bytes(&mut buf, RESOURCE_SPANS_RESOURCE, &self.resource);
        len_prefix(&mut buf, RESOURCE_SPANS_SCOPE_SPANS, scope_spans);
        bytes(&mut buf, SCOPE_SPANS_SCOPE, &self.scope);
        (buf, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_encoded_keys_write_what_key_value_writes() {
        for (key, value) in [
            ("http.request.method", Any::Str(b"GET")),
            ("gatehouse.upstream", Any::Str(&[b'x'; 300])),
            ("http.response.status_code", Any::Int(503)),
            ("tls.resumed", Any::Bool(true)),
            ("", Any::Int(-1)),
            // Either side of the one-byte lengths' path: a KeyValue of 127 bytes, and of 128.
            ("http.request.method", Any::Str(&[b'y'; 102])),
            ("http.request.method", Any::Str(&[b'y'; 103])),
        ] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            key_value(&mut a, 9, key, value);
            key_value_pre(&mut b, 9, &Key::new(key), value);
            assert_eq!(a, b, "{key}");
        }
    }

    #[test]
    fn varint_lengths_match_what_is_written() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX, -1i64 as u64] {
            let mut b = Vec::new();
            varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
        let mut b = Vec::new();
        varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
    }
}
