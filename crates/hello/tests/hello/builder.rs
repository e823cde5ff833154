//! Builds ClientHellos and records byte by byte, so tests can state exactly what is on the wire.

/// A ClientHello to encode. Fields are public so a test can break exactly one thing.
#[derive(Debug, Clone)]
pub struct Hello {
    pub legacy_version: u16,
    pub random: [u8; 32],
    pub session_id: Vec<u8>,
    pub cipher_suites: Vec<u16>,
    pub compression: Vec<u8>,
    /// `None` encodes a hello without the extensions block at all (pre-RFC 5246 clients).
    pub extensions: Option<Vec<(u16, Vec<u8>)>>,
}

impl Hello {
    /// What a typical TLS 1.3 client sends: SNI `example.com`, ALPN h2 and http/1.1, TLS 1.3 and 1.2.
    pub fn tls13() -> Self {
        Self {
            legacy_version: 0x0303,
            random: [7; 32],
            session_id: vec![0x5a; 32],
            cipher_suites: vec![0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f],
            compression: vec![0],
            extensions: Some(vec![
                (0, sni(b"example.com")),
                (10, u16_list(&[0x001d, 0x0017])),
                (13, u16_list(&[0x0403, 0x0804, 0x0401])),
                (16, alpn(&[b"h2", b"http/1.1"])),
                (43, u8_list16(&[0x0304, 0x0303])),
                (45, vec![1, 1]),
                (51, key_share_x25519()),
            ]),
        }
    }

    /// Appends an extension.
    pub fn ext(mut self, ext_type: u16, data: Vec<u8>) -> Self {
        self.extensions.get_or_insert_with(Vec::new).push((ext_type, data));
        self
    }

    /// Removes every extension of `ext_type`.
    pub fn without(mut self, ext_type: u16) -> Self {
        if let Some(exts) = &mut self.extensions {
            exts.retain(|(t, _)| *t != ext_type);
        }
        self
    }

    /// Replaces the data of the extension `ext_type`.
    pub fn replace(mut self, ext_type: u16, data: Vec<u8>) -> Self {
        for (t, d) in self.extensions.iter_mut().flatten() {
            if *t == ext_type {
                *d = data.clone();
            }
        }
        self
    }

    /// The handshake body, without the 4-byte header.
    pub fn body(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(self.legacy_version.to_be_bytes());
        b.extend(self.random);
        b.push(self.session_id.len() as u8);
        b.extend(&self.session_id);
        let suites: Vec<u8> = self.cipher_suites.iter().flat_map(|s| s.to_be_bytes()).collect();
        b.extend(vec16(&suites));
        b.push(self.compression.len() as u8);
        b.extend(&self.compression);
        if let Some(exts) = &self.extensions {
            let mut block = Vec::new();
            for (t, d) in exts {
                block.extend(t.to_be_bytes());
                block.extend(vec16(d));
            }
            b.extend(vec16(&block));
        }
        b
    }

    /// The handshake message: type 1, 24-bit length, body.
    pub fn message(&self) -> Vec<u8> {
        handshake(1, &self.body())
    }

    /// The message in a single handshake record, as nearly every client sends it.
    pub fn record(&self) -> Vec<u8> {
        record(22, 0x0301, &self.message())
    }
}

pub fn handshake(msg_type: u8, body: &[u8]) -> Vec<u8> {
    let len = body.len() as u32;
    let mut m = vec![msg_type];
    m.extend(&len.to_be_bytes()[1..]);
    m.extend(body);
    m
}

pub fn record(content_type: u8, version: u16, payload: &[u8]) -> Vec<u8> {
    let mut r = vec![content_type];
    r.extend(version.to_be_bytes());
    r.extend((payload.len() as u16).to_be_bytes());
    r.extend(payload);
    r
}

/// Splits `message` into handshake records of the given sizes; the last record takes what is left.
pub fn fragment(message: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = message;
    for &size in sizes {
        if rest.len() <= size {
            break;
        }
        let (head, tail) = rest.split_at(size);
        out.extend(record(22, 0x0303, head));
        rest = tail;
    }
    out.extend(record(22, 0x0303, rest));
    out
}

/// Handshake records of the message at `records`' start, re-split into records of `size` bytes.
pub fn refragment(records: &[u8], size: usize) -> Vec<u8> {
    let message = gatehouse_hello::reassemble(records).unwrap();
    let sizes = vec![size; message.len() / size + 1];
    fragment(&message, &sizes)
}

pub fn vec16(data: &[u8]) -> Vec<u8> {
    let mut v = (data.len() as u16).to_be_bytes().to_vec();
    v.extend(data);
    v
}

pub fn vec8(data: &[u8]) -> Vec<u8> {
    let mut v = vec![data.len() as u8];
    v.extend(data);
    v
}

/// A `u16` list with a 2-byte length prefix (`signature_algorithms`, `supported_groups`).
pub fn u16_list(values: &[u16]) -> Vec<u8> {
    vec16(&values.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<_>>())
}

/// A `u16` list with a 1-byte length prefix (`supported_versions`).
pub fn u8_list16(values: &[u16]) -> Vec<u8> {
    vec8(&values.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<_>>())
}

/// `server_name` with one `host_name`.
pub fn sni(name: &[u8]) -> Vec<u8> {
    sni_entries(&[(0, name)])
}

/// `server_name` with arbitrary entries.
pub fn sni_entries(entries: &[(u8, &[u8])]) -> Vec<u8> {
    let mut list = Vec::new();
    for (name_type, name) in entries {
        list.push(*name_type);
        list.extend(vec16(name));
    }
    vec16(&list)
}

pub fn alpn(protocols: &[&[u8]]) -> Vec<u8> {
    vec16(&protocols.iter().flat_map(|p| vec8(p)).collect::<Vec<_>>())
}

/// `pre_shared_key` with the given identities (ticket, obfuscated age) and binders.
pub fn psk(identities: &[(&[u8], u32)], binders: &[&[u8]]) -> Vec<u8> {
    let mut ids = Vec::new();
    for (identity, age) in identities {
        ids.extend(vec16(identity));
        ids.extend(age.to_be_bytes());
    }
    let binders: Vec<u8> = binders.iter().flat_map(|b| vec8(b)).collect();
    let mut data = vec16(&ids);
    data.extend(vec16(&binders));
    data
}

fn key_share_x25519() -> Vec<u8> {
    let mut entry = 0x001du16.to_be_bytes().to_vec();
    entry.extend(vec16(&[9; 32]));
    vec16(&entry)
}
