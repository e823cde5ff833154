//! Target `body_framing`: an HTTP/1.1 message body as bytes arrive, through the framing state
//! machine shared by the upstream client (response bodies) and the client-side server (request
//! bodies). How the bytes are split into reads must never change what is decoded: the body
//! decoded from the whole input at once and the body decoded from reads of a few bytes each must
//! be the same bytes and trailer lines, end in the same state, fail alike, and leave the same
//! bytes after a finished body (a pipelined message). A length-delimited body never yields more
//! than its length, and only a chunked body has trailer lines.
//!
//! The input: one byte choosing the framing (chunked, a length from the next two bytes, until
//! close), one giving the size of each read (1 to 256), then the bytes as they arrive.

use bytes::BytesMut;
use gatehouse_http1::framing::{Chunk, Framing, Piece, Trailers};

/// What decoding a body came to.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    body: Vec<u8>,
    /// Every trailer line, and the fields kept of them.
    trailer_lines: Vec<Vec<u8>>,
    trailers: Option<http::HeaderMap>,
    framing: Framing,
    failed: bool,
    /// The bytes left in the buffer once the body is finished (none compared otherwise: a body
    /// still waiting holds its partial line there).
    rest: Option<Vec<u8>>,
}

/// Decodes `data` fed in reads of `step` bytes (all at once when `step` is at least its length).
fn decode(data: &[u8], framing: Framing, step: usize) -> Outcome {
    let mut framing = framing;
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let (mut trailer_lines, mut kept) = (Vec::new(), Trailers::default());
    let mut failed = false;
    'reads: for read in data.chunks(step.max(1)) {
        buf.extend_from_slice(read);
        loop {
            match framing.decode_piece(&mut buf) {
                Ok(Some(Piece::Data(piece))) => {
                    assert!(!piece.is_empty(), "an empty piece of body: {framing:?}");
                    body.extend_from_slice(&piece);
                }
                Ok(Some(Piece::Trailer(line))) => {
                    assert!(!line.is_empty() && !line.contains(&b'\n'), "a trailer line {line:?}");
                    kept.push(&line);
                    trailer_lines.push(line.to_vec());
                }
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break 'reads;
                }
            }
        }
    }
    let rest = (!failed && framing.finished()).then(|| buf.to_vec());
    Outcome { body, trailer_lines, trailers: kept.take(), framing, failed, rest }
}

/// Decodes the body the input describes whole and in small reads, and compares.
pub fn check(data: &[u8]) {
    let [kind, step, rest @ ..] = data else {
        return;
    };
    let (framing, bytes) = match kind % 3 {
        0 => (Framing::Chunked(Chunk::Size), rest),
        1 => match rest {
            [hi, lo, bytes @ ..] => (Framing::Length(u64::from(u16::from_be_bytes([*hi, *lo]))), bytes),
            _ => return,
        },
        _ => (Framing::Close, rest),
    };
    let whole = decode(bytes, framing, bytes.len());
    let split = decode(bytes, framing, usize::from(*step) + 1);
    assert_eq!(
        whole,
        split,
        "the reads' sizes changed the decoded body ({framing:?}, reads of {})",
        *step as usize + 1
    );
    if let Framing::Length(n) = framing {
        assert!(whole.body.len() as u64 <= n, "a body of length {n} yielded {} bytes", whole.body.len());
    }
    if framing == Framing::Close {
        assert_eq!(whole.body, bytes, "a body delimited by close is every byte");
    }
    if !matches!(framing, Framing::Chunked(_)) {
        assert!(whole.trailer_lines.is_empty(), "trailer lines in a {framing:?} body");
    }
}
