//! `record_need` and `reassemble`: framing, fragmentation, sniffing and limits.

use std::borrow::Cow;

use gatehouse_hello::{
    parse, reassemble, record_need, Need, ParseError, DEFAULT_MAX_HELLO_BYTES as MAX, MAX_FRAGMENT_LEN, MAX_RECORDS,
};

use crate::builder::{fragment, handshake, record, Hello};

/// Every prefix answers `More(n)` with a hint that never reads past the hello, then `Complete`.
fn assert_hints_are_lower_bounds(records: &[u8]) {
    for cut in 0..records.len() {
        match record_need(&records[..cut], MAX) {
            Ok(Need::More(n)) => assert!(n >= 1 && cut + n <= records.len(), "cut {cut}: More({n})"),
            other => panic!("cut {cut} of {}: {other:?}", records.len()),
        }
    }
    assert_eq!(record_need(records, MAX), Ok(Need::Complete(records.len())));
}

/// A caller that reads exactly the hinted number of bytes each time lands exactly on the end.
fn read_by_hints(records: &[u8]) -> usize {
    let mut have = 0;
    let mut reads = 0;
    loop {
        match record_need(&records[..have], MAX).unwrap() {
            Need::More(n) => have += n,
            Need::Complete(len) => {
                assert_eq!(len, records.len());
                return reads;
            }
            Need::NotTls => panic!("NotTls"),
        }
        reads += 1;
    }
}

#[test]
fn single_record_hello_is_borrowed() {
    let records = Hello::tls13().record();
    assert_hints_are_lower_bounds(&records);
    assert_eq!(read_by_hints(&records), 2, "both headers, then the rest");
    let message = reassemble(&records).unwrap();
    assert!(matches!(message, Cow::Borrowed(_)));
    assert_eq!(&*message, &Hello::tls13().message()[..]);
}

#[test]
fn fragmented_hellos_are_joined() {
    let message = Hello::tls13().message();
    for sizes in [vec![1], vec![1, 1, 1], vec![2, 1], vec![3, 5, 200], vec![4], vec![100], vec![7; 100]] {
        let records = fragment(&message, &sizes);
        assert_hints_are_lower_bounds(&records);
        read_by_hints(&records);
        let joined = reassemble(&records).unwrap();
        assert!(matches!(joined, Cow::Owned(_)), "{sizes:?}");
        assert_eq!(&*joined, &message[..]);
        assert_eq!(parse(&joined).unwrap().server_name, Some("example.com"));
    }
}

#[test]
fn bytes_after_the_hello_records_are_left_alone() {
    let mut records = Hello::tls13().record();
    let hello_len = records.len();
    records.extend(record(20, 0x0303, &[1]));
    records.extend(record(23, 0x0303, &[0xee; 40]));
    assert_eq!(record_need(&records, MAX), Ok(Need::Complete(hello_len)));
    assert_eq!(&*reassemble(&records).unwrap(), &Hello::tls13().message()[..]);
}

#[test]
fn other_protocols_are_not_tls() {
    let sslv2_hello = [0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15];
    let server_hello = record(22, 0x0303, &handshake(2, &[0; 40]));
    let ccs = record(20, 0x0303, &[1]);
    let inputs: [&[u8]; 9] = [
        b"GET / HTTP/1.1\r\n",
        b"PRI * HTTP/2.0\r\n",
        b"G",
        &sslv2_hello,
        &server_hello,
        &ccs,
        &[0x16, 0x02],
        &[0x16, 0x03, 0x05],
        &[0x16, 0x03, 0x01, 0x00, 0x10, 0x02],
    ];
    for input in inputs {
        assert_eq!(record_need(input, MAX), Ok(Need::NotTls), "{input:?}");
        assert_eq!(reassemble(input).unwrap_err(), ParseError::NotTls, "{input:?}");
    }
    assert_eq!(record_need(b"", MAX), Ok(Need::More(9)), "record and handshake headers");
    assert_eq!(record_need(&[0x16], MAX), Ok(Need::More(8)));
    assert_eq!(record_need(&[0x16, 0x03, 0x00], MAX), Ok(Need::More(6)), "SSLv3 record version is still TLS");
}

#[test]
fn broken_records_are_errors() {
    let message = Hello::tls13().message();
    let mut empty_first = record(22, 0x0301, &[]);
    empty_first.extend(Hello::tls13().record());
    assert_eq!(record_need(&empty_first, MAX), Err(ParseError::EmptyRecord));

    let mut empty_later = record(22, 0x0301, &message[..10]);
    empty_later.extend(record(22, 0x0301, &[]));
    assert_eq!(record_need(&empty_later, MAX), Err(ParseError::EmptyRecord));

    let oversized = [0x16, 0x03, 0x01, 0x40, 0x01, 0x01];
    assert_eq!(record_need(&oversized, MAX), Err(ParseError::RecordOverflow { len: MAX_FRAGMENT_LEN + 1 }));

    let mut interleaved = record(22, 0x0301, &message[..10]);
    interleaved.extend(record(21, 0x0301, &[2, 40]));
    assert_eq!(record_need(&interleaved, MAX), Err(ParseError::UnexpectedContentType { content_type: 21 }));
    assert_eq!(record_need(&interleaved[..interleaved.len() - 7], MAX), Ok(Need::More(5 + message.len() - 10)));
    assert_eq!(
        record_need(&interleaved[..interleaved.len() - 6], MAX),
        Err(ParseError::UnexpectedContentType { content_type: 21 }),
        "judged on the first byte of the header"
    );

    let mut bad_version = record(22, 0x0301, &message[..10]);
    bad_version.extend(record(22, 0x0203, &message[10..]));
    assert_eq!(record_need(&bad_version, MAX), Err(ParseError::BadRecordVersion { version: 0x0203 }));

    let mut trailing = message.clone();
    trailing.extend(handshake(2, &[]));
    assert_eq!(record_need(&record(22, 0x0301, &trailing), MAX), Err(ParseError::DataAfterClientHello));
    // Caught from the record header alone, before the payload arrives.
    let early = fragment(&trailing, &[4]);
    assert_eq!(record_need(&early[..14], MAX), Err(ParseError::DataAfterClientHello));
}

#[test]
fn limits_apply_as_early_as_possible() {
    let records = Hello::tls13().record();
    assert_eq!(record_need(&records, records.len()), Ok(Need::Complete(records.len())));
    assert_eq!(record_need(&records, records.len() - 1), Err(ParseError::RecordLimit { max: records.len() - 1 }));
    // A header announcing a 1 MiB hello fails on its first 9 bytes.
    let huge = [0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x10, 0x00, 0x00];
    assert_eq!(record_need(&huge, MAX), Err(ParseError::RecordLimit { max: MAX }));
    assert_eq!(record_need(&huge[..5], 100), Err(ParseError::RecordLimit { max: 100 }), "record alone too big");
    assert_eq!(record_need(b"", 3), Err(ParseError::RecordLimit { max: 3 }));

    // Padded so that one-byte records can outnumber the limit.
    let message = Hello::tls13().ext(21, vec![0; 400]).message();
    let within = fragment(&message, &vec![1; MAX_RECORDS - 1]);
    assert_eq!(record_need(&within, MAX), Ok(Need::Complete(within.len())));
    let beyond = fragment(&message, &vec![1; MAX_RECORDS]);
    assert_eq!(record_need(&beyond, MAX), Err(ParseError::TooManyRecords));

    // The largest hello that fits the default limit: four full records and a little.
    let big = Hello::tls13().ext(0xff01, vec![0; 60_000]).message();
    let records = fragment(&big, &[MAX_FRAGMENT_LEN; 4]);
    assert!(records.len() <= MAX);
    assert_eq!(record_need(&records, MAX), Ok(Need::Complete(records.len())));
    assert_eq!(parse(&reassemble(&records).unwrap()).unwrap().extensions.get(0xff01).map(<[u8]>::len), Some(60_000));
}

#[test]
fn reassemble_needs_the_whole_hello() {
    let records = fragment(&Hello::tls13().message(), &[50]);
    for cut in 0..records.len() {
        assert_eq!(reassemble(&records[..cut]).unwrap_err(), ParseError::Incomplete, "cut {cut}");
    }
}
