//! Target `client_hello`: any bytes a client sends first. Framing and parsing must not panic, and
//! must agree with each other. The seed corpus holds the captures of `crates/hello/tests/data/`.

use gatehouse_hello::{parse, reassemble, record_need, ClientHello, Need, ParseError, DEFAULT_MAX_HELLO_BYTES};

/// Checks `data` as a bare handshake message and as the first bytes of a connection.
pub fn check(data: &[u8]) {
    // The input as a bare handshake message.
    if let Ok(hello) = parse(data) {
        read_every_view(&hello);
    }
    // The input as the first bytes of a connection.
    match record_need(data, DEFAULT_MAX_HELLO_BYTES) {
        Ok(Need::Complete(len)) => {
            assert!(len <= data.len());
            let message = reassemble(data).expect("record_need said Complete");
            assert!(message.len() < len);
            if let Ok(hello) = parse(&message) {
                read_every_view(&hello);
            }
        }
        Ok(Need::More(n)) => {
            assert!(n >= 1);
            assert_eq!(reassemble(data), Err(ParseError::Incomplete));
        }
        Ok(Need::NotTls) => assert_eq!(reassemble(data), Err(ParseError::NotTls)),
        Err(ParseError::RecordLimit { .. }) => {}
        Err(e) => assert_eq!(reassemble(data), Err(e)),
    }
}

fn read_every_view(hello: &ClientHello<'_>) {
    assert!(hello.session_id.len() <= 32);
    assert_eq!(hello.cipher_suites.iter().count(), hello.cipher_suites.len());
    if let Some(name) = hello.server_name {
        assert!(!name.is_empty() && name.len() <= 255 && name.bytes().all(|b| b.is_ascii_graphic()));
        let _ = gatehouse_hello::is_ip_literal(name);
    }
    let framed: usize = hello.extensions.iter().map(|e| 4 + e.data.len()).sum();
    assert_eq!(framed, hello.extensions.as_bytes().len());
    for _ in hello.alpn.into_iter().flatten() {}
    for _ in hello.psk_identities.into_iter().flatten() {}
    for _ in hello.supported_versions.into_iter().chain(hello.signature_schemes).flatten() {}
    let _ = format!("{hello:?}");
}
