//! The committed captures in `tests/data/`: hellos real clients sent, checked without the clients.

use gatehouse_hello::{parse, reassemble, record_need, ClientHello, Need, DEFAULT_MAX_HELLO_BYTES};

use crate::builder::refragment;

/// What a capture must contain.
pub struct Expect {
    pub name: &'static str,
    pub server_name: Option<&'static str>,
    /// Empty when the client sends no ALPN.
    pub alpn: &'static [&'static [u8]],
    pub versions: Option<&'static [u16]>,
    /// Whether TLS 1.3 suites (`0x13xx`) are offered.
    pub tls13_suites: bool,
    pub session_id_len: usize,
    /// `None`: no `session_ticket`; `Some(0)`: empty, the client just supports tickets.
    pub session_ticket_len: Option<usize>,
    pub psk_identities: usize,
    pub early_data: bool,
}

const H2_H1: &[&[u8]] = &[b"h2", b"http/1.1"];
/// Length of the ticket `openssl s_server` issued for the TLS 1.2 resumption capture.
const TLS12_TICKET_LEN: usize = 176;
/// What OpenSSL 3 offers by default: TLS 1.3 down to 1.0.
const ALL_VERSIONS: &[u16] = &[0x0304, 0x0303, 0x0302, 0x0301];

pub const CORPUS: &[Expect] = &[
    Expect {
        name: "openssl-default",
        server_name: Some("example.com"),
        alpn: H2_H1,
        versions: Some(ALL_VERSIONS),
        tls13_suites: true,
        session_id_len: 32,
        session_ticket_len: Some(0),
        psk_identities: 0,
        early_data: false,
    },
    Expect {
        name: "openssl-tls12",
        server_name: Some("example.com"),
        alpn: H2_H1,
        versions: None,
        tls13_suites: false,
        session_id_len: 0,
        session_ticket_len: Some(0),
        psk_identities: 0,
        early_data: false,
    },
    Expect {
        name: "openssl-tls13",
        server_name: Some("example.com"),
        alpn: H2_H1,
        versions: Some(&[0x0304]),
        tls13_suites: true,
        session_id_len: 32,
        session_ticket_len: Some(0),
        psk_identities: 0,
        early_data: false,
    },
    Expect {
        name: "openssl-noservername",
        server_name: None,
        alpn: &[],
        versions: Some(ALL_VERSIONS),
        tls13_suites: true,
        session_id_len: 32,
        session_ticket_len: Some(0),
        psk_identities: 0,
        early_data: false,
    },
    Expect {
        name: "curl-h2",
        server_name: Some("example.com"),
        alpn: H2_H1,
        versions: Some(ALL_VERSIONS),
        tls13_suites: true,
        session_id_len: 32,
        session_ticket_len: None,
        psk_identities: 0,
        early_data: false,
    },
    // TLS 1.2 resumption with a ticket against `openssl s_server`, see tests/data/README.md.
    Expect {
        name: "openssl-tls12-ticket",
        server_name: Some("example.com"),
        alpn: H2_H1,
        versions: None,
        tls13_suites: false,
        session_id_len: 32,
        session_ticket_len: Some(TLS12_TICKET_LEN),
        psk_identities: 0,
        early_data: false,
    },
    // TLS 1.3 resumption against `openssl s_server`, see tests/data/README.md.
    Expect {
        name: "openssl-psk",
        server_name: Some("example.com"),
        alpn: H2_H1,
        versions: Some(ALL_VERSIONS),
        tls13_suites: true,
        session_id_len: 32,
        session_ticket_len: Some(0),
        psk_identities: 1,
        early_data: false,
    },
    // The same with 0-RTT: the capture goes on with a change_cipher_spec and an early-data record.
    Expect {
        name: "openssl-psk-early",
        server_name: Some("example.com"),
        alpn: H2_H1,
        versions: Some(ALL_VERSIONS),
        tls13_suites: true,
        session_id_len: 32,
        session_ticket_len: Some(0),
        psk_identities: 1,
        early_data: true,
    },
];

pub fn expectation(name: &str) -> &'static Expect {
    CORPUS.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("no expectation for {name}"))
}

pub fn load(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(format!("{name}.bin"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Frames, joins and parses `bytes` as sent by a client, whole and re-split into small records.
pub fn check(name: &str, bytes: &[u8], expect: &Expect) {
    let Ok(Need::Complete(len)) = record_need(bytes, DEFAULT_MAX_HELLO_BYTES) else {
        panic!("{name}: {:?}", record_need(bytes, DEFAULT_MAX_HELLO_BYTES));
    };
    let message = reassemble(bytes).unwrap();
    let hello = parse(&message).unwrap_or_else(|e| panic!("{name}: {e}"));
    println!("{name}: {len} bytes of records, {hello:#?}");
    check_fields(name, &hello, expect);

    for size in [100, 333] {
        let split = refragment(&bytes[..len], size);
        assert_eq!(record_need(&split, DEFAULT_MAX_HELLO_BYTES), Ok(Need::Complete(split.len())), "{name}/{size}");
        let joined = reassemble(&split).unwrap();
        assert_eq!(joined, message, "{name}/{size}");
        check_fields(name, &parse(&joined).unwrap(), expect);
    }
}

fn check_fields(name: &str, hello: &ClientHello<'_>, e: &Expect) {
    assert_eq!(hello.legacy_version, 0x0303, "{name}");
    assert_eq!(hello.server_name, e.server_name, "{name}");
    let alpn: Vec<&[u8]> = hello.alpn.map(|a| a.iter().collect()).unwrap_or_default();
    assert_eq!(alpn, e.alpn, "{name}");
    assert_eq!(
        hello.supported_versions.map(|v| v.iter().collect::<Vec<_>>()),
        e.versions.map(<[u16]>::to_vec),
        "{name}"
    );
    assert_eq!(hello.cipher_suites.iter().any(|s| s >> 8 == 0x13), e.tls13_suites, "{name}");
    let offers_tls12 = e.versions.is_none_or(|v| v.contains(&0x0303));
    assert_eq!(hello.cipher_suites.iter().any(|s| s >> 8 == 0xc0), offers_tls12, "{name}: ECDHE suites");
    assert_eq!(hello.session_id.len(), e.session_id_len, "{name}");
    assert_eq!(hello.session_ticket.map(<[u8]>::len), e.session_ticket_len, "{name}");
    assert_eq!(hello.psk_identities.map_or(0, |p| p.len()), e.psk_identities, "{name}");
    assert_eq!(hello.early_data, e.early_data, "{name}");
    assert!(hello.signature_schemes.is_some_and(|s| s.contains(0x0804)), "{name}: rsa_pss_rsae_sha256");
    if e.psk_identities > 0 {
        assert_eq!(hello.psk_modes, Some(&[1][..]), "{name}: psk_dhe_ke");
        assert_eq!(hello.extensions.types().last(), Some(41), "{name}: pre_shared_key last");
        assert!(hello.psk_identities.unwrap().iter().all(|p| p.identity.len() >= 32), "{name}: real tickets");
    }
}

#[test]
fn committed_captures_parse() {
    for expect in CORPUS {
        check(expect.name, &load(expect.name), expect);
    }
}

#[test]
fn early_data_capture_is_followed_by_other_records() {
    let bytes = load("openssl-psk-early");
    let Ok(Need::Complete(len)) = record_need(&bytes, DEFAULT_MAX_HELLO_BYTES) else { panic!() };
    assert!(len < bytes.len());
    assert_eq!(bytes[len], 20, "change_cipher_spec follows the hello");
}
