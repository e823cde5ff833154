//! `parse` on hellos built by hand: every field read back, every rejection the brief names.

use gatehouse_hello::{extension_type as ty, is_ip_literal, parse, Field, ParseError, PskIdentity};

use crate::builder::{alpn, handshake, psk, sni, sni_entries, u16_list, u8_list16, vec16, Hello};

#[test]
fn typical_tls13_hello_reads_back() {
    let hello = Hello::tls13();
    let message = hello.message();
    let ch = parse(&message).unwrap();
    assert_eq!(ch.legacy_version, 0x0303);
    assert_eq!(ch.random, &[7; 32]);
    assert_eq!(ch.session_id, &[0x5a; 32][..]);
    assert_eq!(ch.cipher_suites.iter().collect::<Vec<_>>(), [0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f]);
    assert_eq!(ch.cipher_suites.len(), 5);
    assert_eq!(ch.compression_methods, [0]);
    assert_eq!(ch.server_name, Some("example.com"));
    assert_eq!(ch.alpn.unwrap().iter().collect::<Vec<_>>(), [&b"h2"[..], b"http/1.1"]);
    assert!(ch.alpn.unwrap().contains(b"h2"));
    assert_eq!(ch.supported_versions.unwrap().iter().collect::<Vec<_>>(), [0x0304, 0x0303]);
    assert!(ch.offers_tls13());
    assert_eq!(ch.signature_schemes.unwrap().iter().collect::<Vec<_>>(), [0x0403, 0x0804, 0x0401]);
    assert_eq!(ch.session_ticket, None);
    assert!(ch.psk_identities.is_none());
    assert_eq!(ch.psk_modes, Some(&[1][..]));
    assert!(!ch.early_data);
    assert_eq!(ch.extensions.types().collect::<Vec<_>>(), [0, 10, 13, 16, 43, 45, 51]);
    assert_eq!(ch.extensions.get(ty::SUPPORTED_GROUPS), Some(&u16_list(&[0x001d, 0x0017])[..]));
    let debug = format!("{ch:?}");
    assert!(debug.contains("0x1301") && debug.contains("\"http/1.1\""), "{debug}");
}

#[test]
fn tls13_resumption_with_psk_and_early_data() {
    let ticket = vec![0xab; 180];
    let hello = Hello::tls13()
        .ext(ty::EARLY_DATA, vec![])
        .ext(ty::PRE_SHARED_KEY, psk(&[(&ticket, 0x0102_0304), (b"external", 0)], &[&[1; 32], &[2; 48]]));
    let message = hello.message();
    let ch = parse(&message).unwrap();
    let ids = ch.psk_identities.unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(
        ids.iter().collect::<Vec<_>>(),
        [
            PskIdentity { identity: &ticket, obfuscated_ticket_age: 0x0102_0304 },
            PskIdentity { identity: b"external", obfuscated_ticket_age: 0 },
        ]
    );
    assert!(ch.early_data);
    assert_eq!(ch.psk_modes, Some(&[1][..]));
}

#[test]
fn tls12_session_ticket_present_empty_or_absent() {
    let tls12 = || Hello::tls13().without(ty::SUPPORTED_VERSIONS).without(ty::PSK_KEY_EXCHANGE_MODES);
    let m = tls12().ext(ty::SESSION_TICKET, vec![]).message();
    let ch = parse(&m).unwrap();
    assert_eq!(ch.session_ticket, Some(&[][..]), "supports tickets, has none");
    assert!(!ch.offers_tls13());
    assert!(ch.supported_versions.is_none());

    let m = tls12().ext(ty::SESSION_TICKET, vec![0xcd; 200]).message();
    assert_eq!(parse(&m).unwrap().session_ticket, Some(&[0xcd; 200][..]));

    let m = tls12().message();
    assert_eq!(parse(&m).unwrap().session_ticket, None);
}

#[test]
fn hello_without_extensions_block() {
    let hello = Hello { extensions: None, session_id: vec![], ..Hello::tls13() };
    let m = hello.message();
    let ch = parse(&m).unwrap();
    assert_eq!(ch.server_name, None);
    assert_eq!(ch.session_id, &[0u8; 0][..]);
    assert_eq!(ch.extensions.iter().count(), 0);
    // An empty block is fine too.
    let m = Hello { extensions: Some(vec![]), ..Hello::tls13() }.message();
    assert_eq!(parse(&m).unwrap().extensions.iter().count(), 0);
}

#[test]
fn server_name_policy() {
    let with = |data: Vec<u8>| {
        parse(&Hello::tls13().replace(ty::SERVER_NAME, data).message()).map(|h| h.server_name.map(str::to_owned))
    };
    assert_eq!(with(sni(b"WWW.Example.COM.")), Ok(Some("WWW.Example.COM.".into())), "case and dot kept");
    assert_eq!(with(sni(&[b'a'; 255])), Ok(Some("a".repeat(255))));
    assert_eq!(with(sni(&[b'a'; 256])), Err(ParseError::InvalidHostName));
    assert_eq!(with(sni(b"")), Err(ParseError::InvalidHostName));
    assert_eq!(with(sni("bücher.example".as_bytes())), Err(ParseError::InvalidHostName));
    assert_eq!(with(sni(b"evil\r\nhost")), Err(ParseError::InvalidHostName));
    assert_eq!(with(sni_entries(&[(0, b"a.example"), (0, b"b.example")])), Err(ParseError::DuplicateHostName));
    assert_eq!(
        with(sni_entries(&[(7, b"\xff\xfe"), (0, b"a.example")])),
        Ok(Some("a.example".into())),
        "unknown type skipped"
    );
    assert_eq!(with(sni_entries(&[(7, b"opaque")])), Ok(None));
    assert_eq!(with(vec![]), Err(ParseError::Overrun { field: Field::ServerNameList }), "server's empty form");
    assert_eq!(with(vec16(&[])), Err(ParseError::BadLength { field: Field::ServerNameList, len: 0 }));

    // IP literals are returned; the helper tells them apart.
    let ip = with(sni(b"192.0.2.1")).unwrap().unwrap();
    assert!(is_ip_literal(&ip));
    assert!(!is_ip_literal("example.com"));
}

#[test]
fn duplicate_extensions_are_rejected() {
    // Types the base hello already has, and unknown ones: the check comes before any decoding.
    for ext_type in [ty::SERVER_NAME, ty::ALPN, 0x0a0a, 0xffff] {
        let m = Hello::tls13().ext(ext_type, vec![]).ext(ext_type, vec![]).message();
        assert_eq!(parse(&m).unwrap_err(), ParseError::DuplicateExtension { ext_type });
    }
    let m = Hello::tls13().ext(0x1234, vec![]).ext(0x1234, vec![1]).message();
    assert_eq!(parse(&m).unwrap_err(), ParseError::DuplicateExtension { ext_type: 0x1234 });
    let m = Hello::tls13().ext(ty::ALPN, alpn(&[b"h2"])).message();
    assert_eq!(parse(&m).unwrap_err(), ParseError::DuplicateExtension { ext_type: ty::ALPN });
}

#[test]
fn pre_shared_key_must_be_last_and_well_formed() {
    let good = psk(&[(b"ticket", 1)], &[&[0; 32]]);
    let m = Hello::tls13().ext(ty::PRE_SHARED_KEY, good.clone()).ext(ty::EARLY_DATA, vec![]).message();
    assert_eq!(parse(&m).unwrap_err(), ParseError::PreSharedKeyNotLast);

    let bad = |data: Vec<u8>| parse(&Hello::tls13().ext(ty::PRE_SHARED_KEY, data).message()).unwrap_err();
    assert_eq!(
        bad(psk(&[(b"t1", 1), (b"t2", 2)], &[&[0; 32]])),
        ParseError::PskBinderCountMismatch { identities: 2, binders: 1 }
    );
    assert_eq!(bad(psk(&[(b"ticket", 1)], &[&[0; 31]])), ParseError::BadLength { field: Field::PskBinders, len: 32 });
    assert_eq!(
        bad(psk(&[(b"t1", 1), (b"t2", 2)], &[&[0; 32], &[0; 31]])),
        ParseError::BadLength { field: Field::PskBinder, len: 31 }
    );
    assert_eq!(
        bad(psk(&[(b"ticket", 1), (b"", 2)], &[&[0; 32], &[0; 32]])),
        ParseError::BadLength { field: Field::PskIdentity, len: 0 }
    );
    assert_eq!(bad(psk(&[], &[&[0; 32]])), ParseError::BadLength { field: Field::PskIdentities, len: 0 });
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(bad(trailing), ParseError::TrailingBytes { field: Field::PskBinders });
    let mut truncated = good;
    truncated.pop();
    assert_eq!(bad(truncated), ParseError::Overrun { field: Field::PskBinders });
}

#[test]
fn fixed_fields_are_bounded() {
    let m = Hello { session_id: vec![1; 33], ..Hello::tls13() }.message();
    assert_eq!(parse(&m).unwrap_err(), ParseError::BadLength { field: Field::SessionId, len: 33 });
    let m = Hello { cipher_suites: vec![], ..Hello::tls13() }.message();
    assert_eq!(parse(&m).unwrap_err(), ParseError::BadLength { field: Field::CipherSuites, len: 0 });
    let m = Hello { compression: vec![1], ..Hello::tls13() }.message();
    assert_eq!(parse(&m).unwrap_err(), ParseError::NoNullCompression);
    let m = Hello { compression: vec![], ..Hello::tls13() }.message();
    assert_eq!(parse(&m).unwrap_err(), ParseError::BadLength { field: Field::CompressionMethods, len: 0 });

    // Odd cipher_suites length: rebuild the body by hand.
    let mut body = Hello::tls13().body();
    let suites_at = 2 + 32 + 1 + 32;
    body[suites_at..suites_at + 2].copy_from_slice(&9u16.to_be_bytes());
    assert_eq!(parse(&handshake(1, &body)).unwrap_err(), ParseError::BadLength { field: Field::CipherSuites, len: 9 });
}

#[test]
fn lengths_that_overrun_or_leave_bytes_are_rejected() {
    let message = Hello::tls13().message();
    // Every strict prefix fails cleanly.
    for cut in 0..message.len() {
        assert!(parse(&message[..cut]).is_err(), "prefix of {cut} bytes parsed");
    }
    let mut extra = message.clone();
    extra.push(0);
    assert_eq!(parse(&extra).unwrap_err(), ParseError::TrailingBytes { field: Field::HandshakeBody });

    // A body with a byte after the extensions block, header length adjusted to match.
    let mut body = Hello::tls13().body();
    body.push(0);
    assert_eq!(parse(&handshake(1, &body)).unwrap_err(), ParseError::TrailingBytes { field: Field::Extensions });

    assert_eq!(parse(&handshake(2, &[])).unwrap_err(), ParseError::NotClientHello { msg_type: 2 });
}

#[test]
fn decoded_extensions_are_validated() {
    let bad = |ext_type: u16, data: Vec<u8>| parse(&Hello::tls13().replace(ext_type, data).message()).unwrap_err();
    let bad_new = |ext_type: u16, data: Vec<u8>| parse(&Hello::tls13().ext(ext_type, data).message()).unwrap_err();
    assert_eq!(bad(ty::ALPN, alpn(&[b"h2", b""])), ParseError::BadLength { field: Field::ProtocolName, len: 0 });
    assert_eq!(bad(ty::ALPN, vec16(&[])), ParseError::BadLength { field: Field::ProtocolNameList, len: 0 });
    assert_eq!(
        bad(ty::SUPPORTED_VERSIONS, vec![3, 3, 4, 3]),
        ParseError::BadLength { field: Field::SupportedVersions, len: 3 }
    );
    assert_eq!(
        bad(ty::SUPPORTED_VERSIONS, u8_list16(&[])),
        ParseError::BadLength { field: Field::SupportedVersions, len: 0 }
    );
    assert_eq!(
        bad(ty::SIGNATURE_ALGORITHMS, vec![0, 3, 4, 3, 8]),
        ParseError::BadLength { field: Field::SignatureAlgorithms, len: 3 }
    );
    assert_eq!(
        bad(ty::PSK_KEY_EXCHANGE_MODES, vec![0]),
        ParseError::BadLength { field: Field::PskKeyExchangeModes, len: 0 }
    );
    assert_eq!(bad_new(ty::EARLY_DATA, vec![0]), ParseError::TrailingBytes { field: Field::EarlyData });
    let mut sigs = u16_list(&[0x0403]);
    sigs.push(0);
    assert_eq!(bad(ty::SIGNATURE_ALGORITHMS, sigs), ParseError::TrailingBytes { field: Field::SignatureAlgorithms });
}

#[test]
fn errors_read_as_facts() {
    let shown = [
        ParseError::DuplicateExtension { ext_type: 16 }.to_string(),
        ParseError::BadLength { field: Field::SessionId, len: 33 }.to_string(),
        ParseError::RecordLimit { max: 65536 }.to_string(),
    ];
    assert_eq!(
        shown,
        [
            "extension 16 appears twice",
            "legacy_session_id has invalid length 33",
            "ClientHello records exceed the limit of 65536 bytes",
        ]
    );
}
