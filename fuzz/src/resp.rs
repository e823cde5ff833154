//! Target `resp`: the bytes a Redis server (or something posing as one) answers with, read by the
//! client's incremental RESP2 parser. The replies must come out the same whether the bytes arrive
//! at once or in reads of 1 to 256 bytes (the parser keeps half-read arrays between calls); a
//! broken stream must be reported broken either way; the read buffer never grows beyond twice
//! what arrived plus the one read-ahead the parser allows (a declared length is not an allocation); every reply, written back in RESP2, parses
//! to itself. The input's tail is also sent through `encode_command`, whose output must parse as
//! the array of its arguments.
//!
//! The input: one byte choosing the limits (longest bulk string 2^(b % 21) bytes, longest array
//! 2^((b >> 2) % 11) elements, depth 1 to 8 by b >> 5), one giving the read size (1 to 256), then
//! the bytes as the server sent them.

use bytes::{BufMut, BytesMut};
use gatehouse_redis::resp::{encode_command, Limits, Parser};
use gatehouse_redis::{Error, Value};

/// Most the parser reserves ahead for a bulk string still arriving (its `MAX_RESERVE_AHEAD`).
const RESERVE_AHEAD: usize = 1024 * 1024;

/// One call's outcome, comparable across read sizes.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Value(Value),
    Server(String),
}

/// The replies taken off a stream, and whether it ended broken.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    replies: Vec<Reply>,
    broken: bool,
}

/// Feeds `bytes` to one parser in reads of `read` bytes, taking every reply after each read.
fn run(bytes: &[u8], read: usize, limits: Limits) -> Outcome {
    let mut parser = Parser::new(limits);
    let mut buf = BytesMut::new();
    let mut replies = Vec::new();
    let mut arrived = 0;
    for piece in bytes.chunks(read) {
        buf.put_slice(piece);
        arrived += piece.len();
        loop {
            let result = parser.parse(&mut buf);
            assert!(
                buf.capacity() <= 2 * (arrived + RESERVE_AHEAD) + 64,
                "buffer of {} bytes for {arrived} received",
                buf.capacity()
            );
            match result {
                Ok(Some(v)) => replies.push(Reply::Value(v)),
                Ok(None) => break,
                Err(Error::Server(msg)) => replies.push(Reply::Server(msg)),
                Err(_) => return Outcome { replies, broken: true },
            }
        }
    }
    Outcome { replies, broken: false }
}

/// `v` written back in RESP2.
fn encode(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Nil => out.extend_from_slice(b"$-1\r\n"),
        Value::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Value::Simple(s) => {
            out.push(b'+');
            out.extend_from_slice(s.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Value::Bulk(b) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Value::Array(items) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for item in items {
                encode(item, out);
            }
        }
    }
}

/// Parses and checks one input.
pub fn check(data: &[u8]) {
    let [limits, read, bytes @ ..] = data else {
        return;
    };
    let limits = Limits {
        max_bulk_len: 1 << (limits % 21),
        max_array_len: 1 << ((limits >> 2) % 11),
        max_depth: 1 + usize::from(limits >> 5),
    };
    let whole = run(bytes, bytes.len().max(1), limits);
    let split = run(bytes, usize::from(*read) + 1, limits);
    assert_eq!(split, whole, "reads of {} bytes parsed otherwise than the whole", usize::from(*read) + 1);

    // Every reply, written back, parses to itself (a Simple string with a lone CR, LF or an
    // invalid UTF-8 byte was read up to the CRLF and stays what it became).
    for reply in &whole.replies {
        if let Reply::Value(v) = reply {
            let mut wire = Vec::new();
            encode(v, &mut wire);
            let again = run(&wire, wire.len(), Limits::default());
            assert_eq!(again.replies, [Reply::Value(v.clone())], "{v:?} written back as {wire:?}");
            assert!(!again.broken);
        }
    }

    // A command of the input's words parses as the array of its arguments.
    let args: Vec<&[u8]> = bytes.split(|&b| b == b' ').take(64).collect();
    let mut wire = BytesMut::new();
    encode_command(&mut wire, &args);
    let parsed = run(&wire, wire.len(), Limits::default());
    let expected = Value::Array(args.iter().map(|a| Value::Bulk(bytes::Bytes::copy_from_slice(a))).collect());
    assert_eq!(parsed.replies, [Reply::Value(expected)], "encode_command of {args:?}");
}
