//! The RESP2 codec: encoding, every reply type, replies split at every byte, and sizes beyond
//! the limits rejected before anything is allocated for them.

use bytes::{Bytes, BytesMut};
use gatehouse_redis::resp::{encode_command, Limits, Parser};
use gatehouse_redis::{Error, Value};

/// Replies as comparable data: `Err` holds an error reply's message.
type Reply = Result<Value, String>;

/// Parses every complete reply in `buf`, panicking on a protocol error.
fn drain(parser: &mut Parser, buf: &mut BytesMut, out: &mut Vec<Reply>) {
    loop {
        match parser.parse(buf) {
            Ok(Some(v)) => out.push(Ok(v)),
            Ok(None) => return,
            Err(Error::Server(msg)) => out.push(Err(msg)),
            Err(e) => panic!("unexpected protocol error: {e}"),
        }
    }
}

fn parse_all(input: &[u8]) -> Vec<Reply> {
    let mut out = Vec::new();
    drain(&mut Parser::default(), &mut BytesMut::from(input), &mut out);
    out
}

fn bulk(s: &[u8]) -> Value {
    Value::Bulk(Bytes::copy_from_slice(s))
}

/// Every reply type, nesting, an error inside an array, and a bulk string big enough to be
/// shared rather than copied out of the read buffer.
fn sample_stream() -> (Vec<u8>, Vec<Reply>) {
    let big = vec![b'x'; 5000];
    let mut input = Vec::new();
    input.extend_from_slice(b"+OK\r\n-ERR wrong type\r\n:-42\r\n:0\r\n$5\r\nhe\r\no\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n");
    input.extend_from_slice(b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n+\r\n*1\r\n*0\r\n");
    input.extend_from_slice(b"*3\r\n:1\r\n-NOSCRIPT inner\r\n$1\r\nz\r\n");
    input.extend_from_slice(b"$5000\r\n");
    input.extend_from_slice(&big);
    input.extend_from_slice(b"\r\n:9223372036854775807\r\n:-9223372036854775808\r\n");
    let expected = vec![
        Ok(Value::Simple("OK".into())),
        Err("ERR wrong type".into()),
        Ok(Value::Int(-42)),
        Ok(Value::Int(0)),
        Ok(bulk(b"he\r\no")),
        Ok(bulk(b"")),
        Ok(Value::Nil),
        Ok(Value::Nil),
        Ok(Value::Array(vec![])),
        Ok(Value::Array(vec![
            Value::Int(1),
            Value::Array(vec![bulk(b"a"), Value::Simple(String::new())]),
            Value::Array(vec![Value::Array(vec![])]),
        ])),
        Err("NOSCRIPT inner".into()),
        Ok(bulk(&big)),
        Ok(Value::Int(i64::MAX)),
        Ok(Value::Int(i64::MIN)),
    ];
    (input, expected)
}

#[test]
fn encodes_commands_as_arrays_of_bulk_strings() {
    let mut buf = BytesMut::new();
    encode_command(&mut buf, &[b"SET".as_slice(), b"k", b""]);
    encode_command(&mut buf, &["PING"]);
    assert_eq!(&buf[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n");
}

#[test]
fn parses_every_reply_type() {
    let (input, expected) = sample_stream();
    assert_eq!(parse_all(&input), expected);
}

#[test]
fn parses_input_split_at_every_byte_offset() {
    let (input, expected) = sample_stream();
    for split in 0..=input.len() {
        let mut parser = Parser::default();
        let mut buf = BytesMut::from(&input[..split]);
        let mut out = Vec::new();
        drain(&mut parser, &mut buf, &mut out);
        buf.extend_from_slice(&input[split..]);
        drain(&mut parser, &mut buf, &mut out);
        assert_eq!(out, expected, "split at byte {split}");
        assert!(buf.is_empty(), "split at byte {split}: {} bytes left over", buf.len());
    }
}

#[test]
fn parses_input_fed_one_byte_at_a_time() {
    let (input, expected) = sample_stream();
    let mut parser = Parser::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for &byte in &input {
        buf.extend_from_slice(&[byte]);
        drain(&mut parser, &mut buf, &mut out);
    }
    assert_eq!(out, expected);
}

fn protocol_error(limits: Limits, input: &[u8]) -> String {
    let mut parser = Parser::new(limits);
    let mut buf = BytesMut::from(input);
    loop {
        match parser.parse(&mut buf) {
            Ok(Some(_)) => continue,
            Ok(None) => {
                panic!("{:?}: wanted a protocol error, parser wants more input", String::from_utf8_lossy(input))
            }
            Err(Error::Protocol(msg)) => return msg,
            Err(e) => panic!("{:?}: wanted a protocol error, got {e}", String::from_utf8_lossy(input)),
        }
    }
}

#[test]
fn rejects_sizes_over_the_limits() {
    let defaults = Limits::default();
    assert!(protocol_error(defaults, b"$536870913\r\n").contains("exceeds"));
    assert!(protocol_error(defaults, b"*1048577\r\n").contains("exceeds"));
    assert!(protocol_error(defaults, b"$99999999999999999999\r\n").contains("invalid integer"));
    let small = Limits { max_bulk_len: 10, max_array_len: 3, max_depth: 4 };
    assert!(protocol_error(small, b"$11\r\n").contains("exceeds"));
    assert!(protocol_error(small, b"*4\r\n").contains("exceeds"));
    assert!(protocol_error(small, b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n").contains("nested"));
    // At the limits exactly, all is well.
    let ok = parse_all(b"*3\r\n$10\r\n0123456789\r\n:1\r\n:2\r\n");
    assert_eq!(ok.len(), 1);
    // A line that never ends is garbage, not a reason to buffer forever.
    let mut endless = b"+".to_vec();
    endless.extend(std::iter::repeat_n(b'a', 70_000));
    assert!(protocol_error(defaults, &endless).contains("longer than"));
}

#[test]
fn a_declared_size_alone_does_not_allocate_it() {
    let mut parser = Parser::default();
    let mut buf = BytesMut::from(&b"$400000000\r\nabc"[..]);
    assert!(parser.parse(&mut buf).unwrap().is_none());
    assert!(buf.capacity() < 4 * 1024 * 1024, "reserved {} bytes ahead", buf.capacity());
    let mut buf = BytesMut::from(&b"*1000000\r\n:1\r\n"[..]);
    assert!(parser.parse(&mut buf).unwrap().is_none());
}

#[test]
fn rejects_malformed_input() {
    let d = Limits::default();
    for input in [
        &b"$-2\r\n"[..],
        b"*-5\r\n",
        b":12a\r\n",
        b":\r\n",
        b":+1\r\n",
        b":- 1\r\n",
        b"$3\r\nabcXY",
        b"%1\r\n",
        b"\r\n",
        b"$ 3\r\nabc\r\n",
    ] {
        protocol_error(d, input);
    }
}

#[test]
fn value_accessors() {
    assert_eq!(Value::Int(7).as_int(), Some(7));
    assert_eq!(bulk(b"-12").as_int(), Some(-12));
    assert_eq!(bulk(b"x").as_int(), None);
    assert_eq!(Value::Simple("OK".into()).as_bytes(), Some(&b"OK"[..]));
    assert_eq!(Value::Nil.as_bytes(), None);
    assert!(Value::Nil.is_nil());
}
