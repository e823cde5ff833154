//! Response compression (a site's, route's or service's `compression`): the coding is chosen
//! from the request's `Accept-Encoding` when the request is routed, and applied to an endpoint's
//! answer whose head allows it, frame by frame as the body streams (async-compression's codecs:
//! zlib-rs for gzip, the brotli crate, libzstd).

use bytes::Bytes;
use compression_codecs::core::util::{PartialBuffer, WriteBuffer};
use compression_codecs::core::Level;
use compression_codecs::{DecodeV2, EncodeV2};
use gatehouse_config::{Coding, Compression};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode, Version};

/// A compiled `compression` setting.
#[derive(Debug)]
pub struct Policy {
    /// Offered, in the gateway's order of preference.
    codings: Vec<Coding>,
    levels: gatehouse_config::Levels,
    types: Vec<TypePattern>,
    min_size: u64,
    /// Answers are compressed (`enabled`).
    respond: bool,
    /// Request bodies are decoded (`decompress_requests`).
    pub(crate) decompress_requests: bool,
}

/// A media type pattern of `types`, lower-cased.
#[derive(Debug)]
enum TypePattern {
    /// `type/subtype`.
    Exact(String),
    /// `type/*`: the `type/` prefix (never `text/event-stream`).
    Type(String),
    /// `type/*+suffix`: the `type/` prefix and the `+suffix`.
    Suffix(String, String),
}

impl TypePattern {
    fn of(pattern: &str) -> TypePattern {
        let p = pattern.to_ascii_lowercase();
        match p.split_once("/*") {
            Some((ty, "")) => TypePattern::Type(format!("{ty}/")),
            Some((ty, suffix)) => TypePattern::Suffix(format!("{ty}/"), suffix.to_string()),
            None => TypePattern::Exact(p),
        }
    }

    /// Whether `essence` (a lower-cased `type/subtype`) matches.
    fn matches(&self, essence: &str) -> bool {
        match self {
            TypePattern::Exact(t) => t == essence,
            // An event stream is sent event by event: compressed only when listed as itself.
            TypePattern::Type(prefix) => essence.starts_with(prefix.as_str()) && essence != "text/event-stream",
            TypePattern::Suffix(prefix, suffix) => {
                essence.len() > prefix.len() + suffix.len()
                    && essence.starts_with(prefix.as_str())
                    && essence.ends_with(suffix.as_str())
            }
        }
    }
}

/// What the request allows (decided when it is routed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The answer varies by `Accept-Encoding`, and is sent in this coding (`None`: as it is,
    /// the client takes none the gateway offers).
    Vary(Option<Coding>),
}

impl Policy {
    /// The policy of `c`; `None` when it neither compresses answers nor decodes requests.
    pub fn new(c: &Compression) -> Option<Policy> {
        let respond = c.enabled && !c.algorithms.is_empty();
        if !respond && !c.decompress_requests {
            return None;
        }
        Some(Policy {
            codings: c.algorithms.clone(),
            levels: c.levels,
            types: c.types.iter().map(|t| TypePattern::of(t)).collect(),
            min_size: c.min_size.0,
            respond,
            decompress_requests: c.decompress_requests,
        })
    }

    /// What the request allows: nothing for a HEAD (its answer describes the uncompressed
    /// representation, as nginx's) or an HTTP/1.0 client (no chunked coding to end a body of
    /// unknown length with), else the coding `Accept-Encoding` prefers.
    pub(crate) fn negotiate(&self, method: &Method, version: Version, headers: &HeaderMap) -> Option<Choice> {
        if !self.respond || method == Method::HEAD || version < Version::HTTP_11 {
            return None;
        }
        Some(Choice::Vary(self.preferred(headers)))
    }

    /// The offered coding with the highest q-value in the request's `Accept-Encoding`
    /// (RFC 9110 §12.5.3), the gateway's order breaking ties; none without the header.
    fn preferred(&self, headers: &HeaderMap) -> Option<Coding> {
        let mut q = [None::<u16>; 3];
        let mut star = None::<u16>;
        for value in headers.get_all(header::ACCEPT_ENCODING) {
            let Ok(value) = value.to_str() else { continue };
            for element in value.split(',') {
                let mut parts = element.split(';');
                let name = parts.next().unwrap_or("").trim();
                let Some(weight) = parts.find_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("q").then(|| qvalue(v.trim()))
                }) else {
                    // No q parameter: 1.
                    record(name, 1000, &mut q, &mut star);
                    continue;
                };
                // A malformed q-value makes the element unusable.
                if let Some(w) = weight {
                    record(name, w, &mut q, &mut star);
                }
            }
        }
        let mut best: Option<(Coding, u16)> = None;
        for &c in &self.codings {
            let w = q[slot(c)].or(star).unwrap_or(0);
            if w > 0 && best.is_none_or(|(_, b)| w > b) {
                best = Some((c, w));
            }
        }
        best.map(|(c, _)| c)
    }

    /// Applies the policy to an endpoint's answer head: `None` when the answer is sent as it
    /// is, else the encoder for its body (the head then says the coding, varies by
    /// `Accept-Encoding`, has no length, a weak ETag and no `Accept-Ranges`).
    pub(crate) fn apply(&self, status: StatusCode, headers: &mut HeaderMap, choice: Choice) -> Option<Encoder> {
        let Choice::Vary(coding) = choice;
        if !self.eligible(status, headers) {
            return None;
        }
        vary(headers);
        let coding = coding?;
        let length = headers.remove(header::CONTENT_LENGTH);
        let size_hint = length.and_then(|l| l.to_str().ok()?.parse::<usize>().ok());
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
        headers.remove(header::ACCEPT_RANGES);
        if let Some(etag) = headers.get_mut(header::ETAG) {
            if etag.as_bytes().first() == Some(&b'"') {
                let mut weak = Vec::with_capacity(etag.len() + 2);
                weak.extend_from_slice(b"W/");
                weak.extend_from_slice(etag.as_bytes());
                if let Ok(v) = HeaderValue::from_bytes(&weak) {
                    *etag = v;
                }
            }
        }
        Some(Encoder::new(coding, &self.levels, size_hint))
    }

    /// Whether the answer is one the policy compresses, whatever the client takes: one with a
    /// body, not a range, not encoded already, not `no-transform`, of a listed type and not
    /// known to be under `min_size`.
    fn eligible(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        if status.is_informational()
            || matches!(
                status,
                StatusCode::NO_CONTENT
                    | StatusCode::RESET_CONTENT
                    | StatusCode::PARTIAL_CONTENT
                    | StatusCode::NOT_MODIFIED
            )
        {
            return false;
        }
        if headers.contains_key(header::CONTENT_ENCODING) || headers.contains_key(header::CONTENT_RANGE) {
            return false;
        }
        let Some(essence) = headers.get(header::CONTENT_TYPE).and_then(|v| essence(v.as_bytes())) else {
            return false;
        };
        if !self.types.iter().any(|t| t.matches(&essence)) {
            return false;
        }
        let no_transform = headers
            .get_all(header::CACHE_CONTROL)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|d| d.trim().eq_ignore_ascii_case("no-transform"))));
        if no_transform {
            return false;
        }
        let length = headers.get(header::CONTENT_LENGTH).and_then(|l| l.to_str().ok()?.parse::<u64>().ok());
        length.is_none_or(|l| l >= self.min_size)
    }
}

/// A q-value (RFC 9110 §12.4.2) in thousandths; `None` when malformed.
fn qvalue(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths =
        frac.bytes().chain(std::iter::repeat(b'0')).take(3).fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

fn slot(c: Coding) -> usize {
    match c {
        Coding::Zstd => 0,
        Coding::Brotli => 1,
        Coding::Gzip => 2,
    }
}

/// Notes weight `w` for coding `name` (`x-gzip` is gzip, RFC 9110 §8.4.1.3); the highest of
/// repeated mentions wins.
fn record(name: &str, w: u16, q: &mut [Option<u16>; 3], star: &mut Option<u16>) {
    let target = if name == "*" {
        star
    } else if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
        &mut q[2]
    } else if name.eq_ignore_ascii_case("br") {
        &mut q[1]
    } else if name.eq_ignore_ascii_case("zstd") {
        &mut q[0]
    } else {
        return;
    };
    *target = Some(target.map_or(w, |t| t.max(w)));
}

/// The lower-cased `type/subtype` of a `Content-Type`.
fn essence(v: &[u8]) -> Option<String> {
    let v = std::str::from_utf8(v).ok()?;
    let t = v.split(';').next()?.trim();
    t.contains('/').then(|| t.to_ascii_lowercase())
}

/// Adds `Accept-Encoding` to the answer's `Vary`, unless it is there or the answer varies by
/// everything.
fn vary(headers: &mut HeaderMap) {
    let present = headers.get_all(header::VARY).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.split(',').any(|f| f.trim() == "*" || f.trim().eq_ignore_ascii_case("accept-encoding")))
    });
    if !present {
        headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// Scratch space the codec writes into, per answer.
const SCRATCH: usize = 16 * 1024;

/// The longest answer (by its `Content-Length`) gzip compresses in one piece, with libdeflate:
/// at this size it comes in one or two reads anyway, and libdeflate compresses it in about 0.6
/// of zlib-rs's time (docs/architecture.md, "Departures at a glance").
pub(crate) const WHOLE_MAX: usize = 64 * 1024;

/// How an answer's bytes are coded.
enum Codec {
    /// Frame by frame, as they come.
    Stream(Box<dyn EncodeV2 + Send + Sync>),
    /// gzip of a short answer of known length: gathered, then coded in one piece at its end.
    Whole { level: i32, data: Vec<u8> },
}

thread_local! {
    /// libdeflate's compressors by level, kept by each worker thread (one is made, with its
    /// tables, once per level, not per answer).
    static DEFLATERS: std::cell::RefCell<Vec<(i32, libdeflater::Compressor)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `data` as one gzip member at `level`, by this thread's libdeflate compressor for the level.
fn deflate_whole(level: i32, data: &[u8]) -> std::io::Result<Bytes> {
    DEFLATERS.with_borrow_mut(|kept| {
        let i = match kept.iter().position(|(l, _)| *l == level) {
            Some(i) => i,
            None => {
                let lvl = libdeflater::CompressionLvl::new(level)
                    .map_err(|_| std::io::Error::other(format!("{level} is not a gzip level")))?;
                kept.push((level, libdeflater::Compressor::new(lvl)));
                kept.len() - 1
            }
        };
        let c = &mut kept[i].1;
        let mut out = vec![0; c.gzip_compress_bound(data.len())];
        let n = c.gzip_compress(data, &mut out).map_err(|e| std::io::Error::other(e.to_string()))?;
        out.truncate(n);
        Ok(Bytes::from(out))
    })
}

/// A body's encoder: data in, compressed data out as soon as the codec gives it.
pub(crate) struct Encoder {
    codec: Codec,
    scratch: Box<[u8]>,
    /// Data taken since the codec's last flush.
    pub(crate) unflushed: bool,
    /// The stream's end is written.
    pub(crate) finished: bool,
    /// The endpoint's trailers, sent after the stream's end.
    pub(crate) trailers: Option<HeaderMap>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").field("unflushed", &self.unflushed).field("finished", &self.finished).finish()
    }
}

/// A streaming encoder of `coding`.
fn stream_codec(
    coding: Coding,
    levels: &gatehouse_config::Levels,
    size_hint: Option<usize>,
) -> Box<dyn EncodeV2 + Send + Sync> {
    match coding {
        Coding::Gzip => Box::new(compression_codecs::GzipEncoder::new(Level::Precise(levels.gzip as i32).into())),
        Coding::Brotli => {
            // A 1 MiB window: what a web answer needs, at a quarter of the default's memory.
            let mut params = compression_codecs::brotli::params::EncoderParams::default()
                .quality(Level::Precise(levels.br as i32))
                .window_size(20);
            if let Some(n) = size_hint {
                params = params.size_hint(n);
            }
            Box::new(compression_codecs::BrotliEncoder::new(params))
        }
        // Browsers decode zstd with at most an 8 MiB window (RFC 9659 §3); 1 MiB keeps
        // each answer's memory small at every level.
        Coding::Zstd => Box::new(compression_codecs::ZstdEncoder::new_with_params(
            levels.zstd as i32,
            &[compression_codecs::zstd::params::CParameter::window_log(20)],
        )),
    }
}

/// What the codec is asked to do.
enum Step<'a> {
    Encode(&'a [u8]),
    Flush,
    Finish,
}

impl Encoder {
    fn new(coding: Coding, levels: &gatehouse_config::Levels, size_hint: Option<usize>) -> Encoder {
        if let (Coding::Gzip, Some(n)) = (coding, size_hint) {
            if n <= WHOLE_MAX {
                let codec = Codec::Whole { level: levels.gzip as i32, data: Vec::with_capacity(n) };
                return Encoder { codec, scratch: Box::default(), unflushed: false, finished: false, trailers: None };
            }
        }
        Encoder {
            codec: Codec::Stream(stream_codec(coding, levels, size_hint)),
            scratch: vec![0; SCRATCH].into_boxed_slice(),
            unflushed: false,
            finished: false,
            trailers: None,
        }
    }

    /// Compresses `data`; what the codec has written so far (often nothing: it keeps data to
    /// find matches in).
    pub(crate) fn encode(&mut self, data: &[u8]) -> std::io::Result<Bytes> {
        match &mut self.codec {
            Codec::Whole { data: kept, .. } if kept.len() + data.len() <= WHOLE_MAX => {
                kept.extend_from_slice(data);
                Ok(Bytes::new())
            }
            Codec::Whole { level, data: kept } => {
                // More than the length said (an HTTP/2 endpoint's length is only a hint): a
                // stream after all, from what was gathered.
                let levels = gatehouse_config::Levels { gzip: *level as u32, ..Default::default() };
                let kept = std::mem::take(kept);
                self.codec = Codec::Stream(stream_codec(Coding::Gzip, &levels, None));
                self.scratch = vec![0; SCRATCH].into_boxed_slice();
                let mut out = self.encode(&kept)?.to_vec();
                out.extend_from_slice(&self.encode(data)?);
                Ok(Bytes::from(out))
            }
            Codec::Stream(_) => {
                self.unflushed = true;
                self.run(Step::Encode(data))
            }
        }
    }

    /// Compresses the body's last data and ends the stream.
    pub(crate) fn encode_last(&mut self, data: &[u8]) -> std::io::Result<Bytes> {
        let head = self.encode(data)?;
        let end = self.finish()?;
        if head.is_empty() {
            return Ok(end);
        }
        let mut out = Vec::with_capacity(head.len() + end.len());
        out.extend_from_slice(&head);
        out.extend_from_slice(&end);
        Ok(Bytes::from(out))
    }

    /// Everything taken so far, written out (the endpoint paused: what it sent is not held
    /// back while it thinks).
    pub(crate) fn flush(&mut self) -> std::io::Result<Bytes> {
        self.unflushed = false;
        match self.codec {
            Codec::Whole { .. } => Ok(Bytes::new()),
            Codec::Stream(_) => self.run(Step::Flush),
        }
    }

    /// The stream's end.
    pub(crate) fn finish(&mut self) -> std::io::Result<Bytes> {
        self.finished = true;
        self.unflushed = false;
        match &mut self.codec {
            Codec::Whole { level, data } => deflate_whole(*level, &std::mem::take(data)),
            Codec::Stream(_) => self.run(Step::Finish),
        }
    }

    fn run(&mut self, step: Step<'_>) -> std::io::Result<Bytes> {
        let Codec::Stream(codec) = &mut self.codec else { return Ok(Bytes::new()) };
        let mut out: Vec<u8> = Vec::new();
        let mut input = PartialBuffer::new(match step {
            Step::Encode(d) => d,
            _ => &[][..],
        });
        loop {
            let mut w = WriteBuffer::new_initialized(&mut self.scratch);
            let before = input.written_len();
            let done = match step {
                Step::Encode(_) => {
                    codec.encode(&mut input, &mut w)?;
                    input.unwritten().is_empty()
                }
                Step::Flush => codec.flush(&mut w)?,
                Step::Finish => codec.finish(&mut w)?,
            };
            let written = w.written();
            let full = written.len() == SCRATCH;
            if out.is_empty() && (done && !full) {
                return Ok(Bytes::copy_from_slice(written));
            }
            out.extend_from_slice(written);
            if done && !full {
                return Ok(Bytes::from(out));
            }
            if written.is_empty() && input.written_len() == before {
                return Err(std::io::Error::other("the compressor made no progress"));
            }
        }
    }
}

/// The most decoded data one poll of a [`Decoded`] body gives (a small body may decode to a great
/// deal: the rest waits for the next poll, and `max_body` cuts it off).
const DECODED_PER_POLL: usize = 64 * 1024;

/// A request body sent with a content coding, decoded on the way to the endpoint.
pub(crate) struct Decoded<B> {
    inner: std::pin::Pin<Box<B>>,
    codec: Box<dyn DecodeV2 + Send + Sync>,
    scratch: Box<[u8]>,
    /// Input not decoded yet (its output would have gone over [`DECODED_PER_POLL`]).
    pending: Bytes,
    /// The coded stream's end was read (data after it starts another member).
    ended: bool,
    /// The decoder holds output the last step did not give out (it stopped at
    /// [`DECODED_PER_POLL`]).
    draining: bool,
    /// The client's body has ended.
    done: bool,
    /// The client's trailers, sent after the decoded body's end.
    trailers: Option<HeaderMap>,
}

/// A request body that is not what its `Content-Encoding` says.
#[derive(Debug)]
pub(crate) struct BadCoding(String);

impl std::fmt::Display for BadCoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request body cannot be decoded: {}", self.0)
    }
}

impl std::error::Error for BadCoding {}

/// The coding of a request's `Content-Encoding` that the gateway decodes: one of gzip (or
/// x-gzip), br, zstd, alone.
pub(crate) fn request_coding(headers: &HeaderMap) -> Option<Coding> {
    let mut values = headers.get_all(header::CONTENT_ENCODING).iter();
    let v = values.next()?.to_str().ok()?.trim();
    if values.next().is_some() {
        return None;
    }
    match v.to_ascii_lowercase().as_str() {
        "gzip" | "x-gzip" => Some(Coding::Gzip),
        "br" => Some(Coding::Brotli),
        "zstd" => Some(Coding::Zstd),
        _ => None,
    }
}

impl<B> Decoded<B> {
    pub(crate) fn new(inner: B, coding: Coding) -> Decoded<B> {
        let codec: Box<dyn DecodeV2 + Send + Sync> = match coding {
            Coding::Gzip => Box::new(compression_codecs::GzipDecoder::new()),
            Coding::Brotli => Box::new(compression_codecs::BrotliDecoder::new()),
            // At most the 8 MiB window RFC 9659 §3 lets an HTTP zstd encoder use (libzstd would
            // take 128 MiB: a few header bytes would make it set that much aside).
            Coding::Zstd => Box::new(compression_codecs::ZstdDecoder::new_with_params(&[
                compression_codecs::zstd::params::DParameter::window_log_max(23),
            ])),
        };
        Decoded {
            inner: Box::pin(inner),
            codec,
            scratch: vec![0; SCRATCH].into_boxed_slice(),
            pending: Bytes::new(),
            ended: false,
            draining: false,
            done: false,
            trailers: None,
        }
    }

    /// Decodes `pending` until it is used up or [`DECODED_PER_POLL`] is reached, then writes out
    /// what the decoder holds.
    fn decode(&mut self) -> Result<Bytes, BadCoding> {
        let bad = |e: std::io::Error| BadCoding(e.to_string());
        let mut out = Vec::new();
        let mut input = PartialBuffer::new(&self.pending[..]);
        while !input.unwritten().is_empty() && out.len() < DECODED_PER_POLL {
            if self.ended {
                // Another member (gzip) or frame (zstd) follows.
                self.codec.reinit().map_err(bad)?;
                self.ended = false;
            }
            let mut w = WriteBuffer::new_initialized(&mut self.scratch);
            let before = input.written_len();
            self.ended = self.codec.decode(&mut input, &mut w).map_err(bad)?;
            out.extend_from_slice(w.written());
            if w.written_len() == 0 && input.written_len() == before && !self.ended {
                return Err(BadCoding("the decoder made no progress".into()));
            }
        }
        let used = input.written_len();
        self.pending = self.pending.slice(used..);
        if self.pending.is_empty() {
            // What the decoder holds (a brotli copy may be 16 MiB from a few bytes), given out
            // within the same bound.
            self.draining = true;
            while out.len() < DECODED_PER_POLL {
                let mut w = WriteBuffer::new_initialized(&mut self.scratch);
                let flushed = self.codec.flush(&mut w).map_err(bad)?;
                out.extend_from_slice(w.written());
                if flushed {
                    self.draining = false;
                    break;
                }
            }
        }
        Ok(Bytes::from(out))
    }
}

impl<B> Decoded<B> {
    /// The client's body has ended: what the decoder still holds, if its coding has ended too.
    fn finish(&mut self) -> Result<Bytes, BadCoding> {
        let mut out = Vec::new();
        loop {
            let mut w = WriteBuffer::new_initialized(&mut self.scratch);
            let finished = self.codec.finish(&mut w).map_err(|_| BadCoding("it ends before its coding does".into()))?;
            out.extend_from_slice(w.written());
            if finished {
                return Ok(Bytes::from(out));
            }
            if w.written_len() == 0 || out.len() > DECODED_PER_POLL {
                return Err(BadCoding("it ends before its coding does".into()));
            }
        }
    }
}

impl<B> http_body::Body for Decoded<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<gatehouse_upstream::BoxError>,
{
    type Data = Bytes;
    type Error = gatehouse_upstream::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        loop {
            if !this.pending.is_empty() || this.draining {
                match this.decode() {
                    Ok(out) if out.is_empty() => continue,
                    Ok(out) => return Poll::Ready(Some(Ok(http_body::Frame::data(out)))),
                    Err(e) => return Poll::Ready(Some(Err(Box::new(e)))),
                }
            }
            if this.done {
                return Poll::Ready(this.trailers.take().map(|t| Ok(http_body::Frame::trailers(t))));
            }
            match this.inner.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.pending = data,
                    // The body's end: its coding must have ended too, before the trailers go.
                    Err(frame) => {
                        this.trailers = frame.into_trailers().ok();
                        this.done = true;
                        match this.finish() {
                            Ok(out) if out.is_empty() => continue,
                            Ok(out) => return Poll::Ready(Some(Ok(http_body::Frame::data(out)))),
                            Err(e) => return Poll::Ready(Some(Err(Box::new(e)))),
                        }
                    }
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(None) => {
                    this.done = true;
                    return match this.finish() {
                        Ok(out) if out.is_empty() => Poll::Ready(None),
                        Ok(out) => Poll::Ready(Some(Ok(http_body::Frame::data(out)))),
                        Err(e) => Poll::Ready(Some(Err(Box::new(e)))),
                    };
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.pending.is_empty() && !self.draining && self.trailers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> Policy {
        let c: Compression = serde_yaml::from_str(yaml).expect("parses");
        Policy::new(&c).expect("on")
    }

    fn accept(p: &Policy, value: &str) -> Option<Coding> {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(value).expect("value"));
        p.preferred(&h)
    }

    #[test]
    fn negotiation_follows_q_values_then_the_gateways_order() {
        let p = policy("{}");
        assert_eq!(accept(&p, "gzip, deflate, br, zstd"), Some(Coding::Zstd));
        assert_eq!(accept(&p, "gzip, deflate, br"), Some(Coding::Brotli));
        assert_eq!(accept(&p, "gzip;q=1.0, br;q=0.5"), Some(Coding::Gzip));
        assert_eq!(accept(&p, "GZIP"), Some(Coding::Gzip));
        assert_eq!(accept(&p, "x-gzip"), Some(Coding::Gzip));
        assert_eq!(accept(&p, "*"), Some(Coding::Zstd));
        assert_eq!(accept(&p, "*;q=0.5, zstd;q=0"), Some(Coding::Brotli));
        assert_eq!(accept(&p, "br;q=0, gzip;q=0"), None);
        assert_eq!(accept(&p, "identity"), None);
        assert_eq!(accept(&p, ""), None);
        assert_eq!(accept(&p, "gzip;q=2"), None, "a malformed q-value");
        assert_eq!(accept(&p, "gzip;q=0.0001"), None);
        assert_eq!(accept(&p, "gzip;q=0.001"), Some(Coding::Gzip));
        assert_eq!(accept(&p, "br ; q=0.8 , gzip ; q=0.9"), Some(Coding::Gzip));
        assert_eq!(p.preferred(&HeaderMap::new()), None, "no header: as it is");
        let gzip_first = policy("{algorithms: [gzip, br]}");
        assert_eq!(accept(&gzip_first, "br, gzip, zstd"), Some(Coding::Gzip));
        assert_eq!(accept(&gzip_first, "zstd"), None);
    }

    #[test]
    fn head_and_http10_are_left_alone() {
        let p = policy("{}");
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        assert_eq!(p.negotiate(&Method::HEAD, Version::HTTP_11, &h), None);
        assert_eq!(p.negotiate(&Method::GET, Version::HTTP_10, &h), None);
        assert_eq!(p.negotiate(&Method::GET, Version::HTTP_2, &h), Some(Choice::Vary(Some(Coding::Gzip))));
    }

    fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn which_answers_are_compressed() {
        let p = policy("{min_size: 100}");
        let gzip = Choice::Vary(Some(Coding::Gzip));
        let ok = StatusCode::OK;
        type Case<'a> = (StatusCode, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case<'_>] = &[
            (ok, &[("content-type", "application/json")], true),
            (ok, &[("content-type", "Text/HTML; charset=utf-8")], true),
            (ok, &[("content-type", "application/problem+json")], true),
            (ok, &[("content-type", "image/png")], false),
            (ok, &[], false),
            (ok, &[("content-type", "text/event-stream")], false),
            (ok, &[("content-type", "text/plain"), ("content-encoding", "br")], false),
            (ok, &[("content-type", "text/plain"), ("cache-control", "public, No-Transform")], false),
            (ok, &[("content-type", "text/plain"), ("content-length", "99")], false),
            (ok, &[("content-type", "text/plain"), ("content-length", "100")], true),
            (StatusCode::PARTIAL_CONTENT, &[("content-type", "text/plain")], false),
            (ok, &[("content-type", "text/plain"), ("content-range", "bytes 0-9/100")], false),
            (StatusCode::NO_CONTENT, &[("content-type", "text/plain")], false),
            (StatusCode::RESET_CONTENT, &[("content-type", "text/plain")], false),
            (StatusCode::NOT_MODIFIED, &[("content-type", "text/plain")], false),
            (StatusCode::NOT_FOUND, &[("content-type", "text/html")], true),
        ];
        for (status, pairs, want) in cases {
            let mut h = HeaderMap::new();
            for (k, v) in *pairs {
                h.append(http::HeaderName::from_static(k), HeaderValue::from_static(v));
            }
            assert_eq!(p.apply(*status, &mut h, gzip).is_some(), *want, "{status} {pairs:?}");
        }
        let sse = policy("{types: [text/event-stream]}");
        assert!(sse.apply(ok, &mut head(&[("content-type", "text/event-stream")]), gzip).is_some());
    }

    #[test]
    fn the_head_says_what_was_done() {
        let p = policy("{}");
        let mut h = head(&[
            ("content-type", "text/plain"),
            ("content-length", "5000"),
            ("etag", "\"abc\""),
            ("accept-ranges", "bytes"),
            ("vary", "Origin"),
        ]);
        assert!(p.apply(StatusCode::OK, &mut h, Choice::Vary(Some(Coding::Brotli))).is_some());
        assert_eq!(h.get("content-encoding").expect("content-encoding"), "br");
        assert!(h.get("content-length").is_none() && h.get("accept-ranges").is_none());
        assert_eq!(h.get("etag").expect("etag"), "W/\"abc\"");
        let vary: Vec<_> = h.get_all("vary").iter().collect();
        assert_eq!(vary, ["Origin", "Accept-Encoding"]);
        // A client that takes no offered coding: the same answer varies, and is left as it is.
        let mut h = head(&[("content-type", "text/plain"), ("etag", "W/\"x\""), ("vary", "accept-encoding")]);
        assert!(p.apply(StatusCode::OK, &mut h, Choice::Vary(None)).is_none());
        assert_eq!((h.get_all("vary").iter().count(), h.get("etag").expect("etag").as_bytes()), (1, &b"W/\"x\""[..]));
        let mut h = head(&[("content-type", "text/plain")]);
        assert!(p.apply(StatusCode::OK, &mut h, Choice::Vary(None)).is_none());
        assert_eq!(h.get("vary").expect("vary"), "Accept-Encoding");
    }

    fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => flate2::read::GzDecoder::new(data).read_to_end(&mut out).map(|_| ()),
            Coding::Brotli => brotli::Decompressor::new(data, 4096).read_to_end(&mut out).map(|_| ()),
            Coding::Zstd => zstd::stream::copy_decode(data, &mut out),
        }
        .expect("decodes");
        out
    }

    /// Every coding, fed in pieces with a flush between some (as when the endpoint pauses):
    /// the flushed part decodes on its own, and the whole equals the input.
    #[test]
    fn streams_decode_to_what_went_in() {
        let levels = gatehouse_config::Levels::default();
        let text: Vec<u8> =
            (0..4000).flat_map(|i| format!("{{\"id\":{i},\"name\":\"item {}\"}},", i % 7).into_bytes()).collect();
        for coding in [Coding::Gzip, Coding::Brotli, Coding::Zstd] {
            let mut e = Encoder::new(coding, &levels, None);
            let mut sent = Vec::new();
            let (first, rest) = text.split_at(1000);
            sent.extend_from_slice(&e.encode(first).expect("encode"));
            sent.extend_from_slice(&e.flush().expect("flush"));
            assert!(!e.unflushed);
            // What was flushed decodes to the first piece (a streaming decoder's view).
            if coding == Coding::Gzip {
                let mut d = flate2::write::GzDecoder::new(Vec::new());
                std::io::Write::write_all(&mut d, &sent).expect("decode the flushed part");
                std::io::Write::flush(&mut d).expect("flush");
                assert_eq!(d.get_ref().as_slice(), first);
            }
            for piece in rest.chunks(7000) {
                sent.extend_from_slice(&e.encode(piece).expect("encode"));
            }
            sent.extend_from_slice(&e.finish().expect("finish"));
            assert!(sent.len() < text.len() / 4, "{coding:?}: {} of {}", sent.len(), text.len());
            assert_eq!(decode(coding, &sent), text, "{coding:?}");
        }
        // An empty body is still a whole stream.
        for coding in [Coding::Gzip, Coding::Brotli, Coding::Zstd] {
            let mut e = Encoder::new(coding, &levels, Some(0));
            let end = e.finish().expect("finish");
            assert_eq!(decode(coding, &end), b"", "{coding:?}");
        }
    }

    /// gzip of an answer of known length, gathered and coded in one piece; one longer than it
    /// said turns into a stream; both decode to what went in.
    #[test]
    fn short_gzip_answers_are_coded_in_one_piece() {
        let levels = gatehouse_config::Levels::default();
        let text: Vec<u8> = (0..3000).flat_map(|i| format!("{{\"n\":{i}}},").into_bytes()).collect();
        assert!(text.len() <= WHOLE_MAX);
        let mut e = Encoder::new(Coding::Gzip, &levels, Some(text.len()));
        assert!(matches!(e.codec, Codec::Whole { .. }));
        let mut sent = Vec::new();
        for piece in text.chunks(5000) {
            sent.extend_from_slice(&e.encode(piece).expect("encode"));
            assert!(e.flush().expect("flush").is_empty(), "nothing before the end");
        }
        assert!(sent.is_empty());
        sent.extend_from_slice(&e.finish().expect("finish"));
        assert_eq!(decode(Coding::Gzip, &sent), text);
        // Said 100 bytes, sent the whole text and more.
        let long: Vec<u8> = text.iter().chain(text.iter()).chain(text.iter()).copied().collect();
        let mut e = Encoder::new(Coding::Gzip, &levels, Some(100));
        let mut sent = Vec::new();
        for piece in long.chunks(20_000) {
            sent.extend_from_slice(&e.encode(piece).expect("encode"));
        }
        assert!(matches!(e.codec, Codec::Stream(_)));
        sent.extend_from_slice(&e.finish().expect("finish"));
        assert_eq!(decode(Coding::Gzip, &sent), long);
        // Over WHOLE_MAX by its length: a stream from the start.
        assert!(matches!(Encoder::new(Coding::Gzip, &levels, Some(WHOLE_MAX + 1)).codec, Codec::Stream(_)));
        assert!(matches!(Encoder::new(Coding::Zstd, &levels, Some(10)).codec, Codec::Stream(_)));
    }

    fn encoded(coding: Coding, data: &[u8]) -> Vec<u8> {
        let mut e = Encoder::new(coding, &gatehouse_config::Levels::default(), None);
        let mut out = e.encode(data).expect("encode").to_vec();
        out.extend_from_slice(&e.finish().expect("finish"));
        out
    }

    /// Polls `body` to its end: the data frames' sizes, or the error.
    fn drain<B: http_body::Body<Data = Bytes> + Unpin>(mut body: B) -> Result<Vec<Bytes>, String>
    where
        B::Error: std::fmt::Display,
    {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        rt.block_on(async {
            let mut frames = Vec::new();
            while let Some(f) = body.frame().await {
                match f {
                    Ok(f) => frames.extend(f.into_data().ok()),
                    Err(e) => return Err(e.to_string()),
                }
            }
            Ok(frames)
        })
    }

    /// A body of data frames, then maybe trailers.
    struct Chunks(std::collections::VecDeque<Bytes>, Option<HeaderMap>);

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            let frame = match self.0.pop_front() {
                Some(b) => Some(http_body::Frame::data(b)),
                None => self.1.take().map(http_body::Frame::trailers),
            };
            std::task::Poll::Ready(frame.map(Ok))
        }
    }

    /// Bodies that end in trailers are judged whole before the trailers go; a brotli bomb is
    /// given out in bounded pieces too.
    #[test]
    fn trailers_and_brotli_bombs() {
        let text: Vec<u8> = (0..20_000u32).flat_map(|i| format!("{i},").into_bytes()).collect();
        let coded = encoded(Coding::Gzip, &text);
        let mut t = HeaderMap::new();
        t.insert("x-sum", HeaderValue::from_static("1"));
        let whole = Chunks([Bytes::from(coded.clone())].into(), Some(t.clone()));
        let got = drain(Decoded::new(whole, Coding::Gzip)).expect("decodes");
        assert_eq!(got.concat(), text);
        // Cut short, then trailers: the error comes before the trailers (a sender that stops at
        // trailers, as the HTTP/2 upstream's does, must not take the body as whole).
        let cut = Chunks([Bytes::copy_from_slice(&coded[..coded.len() / 2])].into(), Some(t));
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let first_end = rt.block_on(async {
            use http_body_util::BodyExt;
            let mut body = Decoded::new(cut, Coding::Gzip);
            while let Some(f) = body.frame().await {
                match f {
                    Err(_) => return "error",
                    Ok(f) if f.is_trailers() => return "trailers",
                    Ok(_) => {}
                }
            }
            "end"
        });
        assert_eq!(first_end, "error");
        let zeros = vec![0u8; 10_000_000];
        let bomb = encoded(Coding::Brotli, &zeros);
        assert!(bomb.len() < 20_000, "{}", bomb.len());
        let got = drain(Decoded::new(http_body_util::Full::new(Bytes::from(bomb)), Coding::Brotli)).expect("decodes");
        assert!(got.iter().all(|f| f.len() <= DECODED_PER_POLL + SCRATCH), "{:?}", got.iter().map(Bytes::len).max());
        assert_eq!(got.iter().map(Bytes::len).sum::<usize>(), zeros.len());
    }

    #[test]
    fn request_bodies_are_decoded_in_bounded_pieces() {
        let text: Vec<u8> = (0..50_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        for coding in [Coding::Gzip, Coding::Brotli, Coding::Zstd] {
            let coded = encoded(coding, &text);
            // Sent in 1000-byte frames.
            let body = Chunks(coded.chunks(1000).map(Bytes::copy_from_slice).collect(), None);
            let got = drain(Decoded::new(body, coding)).expect("decodes");
            assert_eq!(got.concat(), text, "{coding:?}");
            // Cut short: an error, not a shorter body passed as whole.
            let cut = http_body_util::Full::new(Bytes::copy_from_slice(&coded[..coded.len() / 2]));
            let e = drain(Decoded::new(cut, coding)).expect_err("truncated");
            assert!(e.contains("cannot be decoded"), "{e}");
        }
        // A bomb: 10 MB of zeros in a few KB, given out 64 KiB at a time.
        let zeros = vec![0u8; 10_000_000];
        let bomb = encoded(Coding::Gzip, &zeros);
        assert!(bomb.len() < 20_000, "{}", bomb.len());
        let got = drain(Decoded::new(http_body_util::Full::new(Bytes::from(bomb)), Coding::Gzip)).expect("decodes");
        assert!(got.iter().all(|f| f.len() <= DECODED_PER_POLL + SCRATCH), "{:?}", got.iter().map(Bytes::len).max());
        assert_eq!(got.iter().map(Bytes::len).sum::<usize>(), zeros.len());
        // Two gzip members, one after the other (RFC 1952 §2.2), and not gzip at all.
        let mut two = encoded(Coding::Gzip, b"one ");
        two.extend(encoded(Coding::Gzip, b"two"));
        let got = drain(Decoded::new(http_body_util::Full::new(Bytes::from(two)), Coding::Gzip)).expect("decodes");
        assert_eq!(got.concat(), b"one two");
        let e = drain(Decoded::new(http_body_util::Full::new(Bytes::from_static(b"plain text")), Coding::Gzip));
        assert!(e.is_err());
        let mut h = HeaderMap::new();
        for (v, want) in [
            ("gzip", Some(Coding::Gzip)),
            ("X-GZIP", Some(Coding::Gzip)),
            ("br", Some(Coding::Brotli)),
            ("zstd", Some(Coding::Zstd)),
            ("deflate", None),
            ("gzip, br", None),
        ] {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(v));
            assert_eq!(request_coding(&h), want, "{v}");
        }
        h.append(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        assert_eq!(request_coding(&h), None, "two fields");
    }

    #[test]
    fn q_values() {
        assert_eq!(qvalue("1"), Some(1000));
        assert_eq!(qvalue("1.000"), Some(1000));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("0"), Some(0));
        assert_eq!(qvalue("0.25"), Some(250));
        for bad in ["1.5", "2", "", "0.", "a", "0.1234", "-1", "0.x"] {
            assert!(bad == "0." || qvalue(bad).is_none(), "{bad}");
        }
    }
}
