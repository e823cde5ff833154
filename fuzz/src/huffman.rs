//! Target `huffman`: a QPACK (and HPACK) string literal's Huffman-coded bytes, as a peer sends
//! them in an HTTP/3 header block. Decoding never panics; what decodes encodes back to exactly
//! the same bytes (the code is a bijection once padding is fixed to the EOS prefix, RFC 7541
//! §5.2), and any bytes encode and decode back to themselves.

/// Decodes `data` and, whatever it gave, encodes back; encodes `data` and decodes back.
pub fn check(data: &[u8]) {
    let mut raw = Vec::new();
    if gatehouse_huffman::decode(data, &mut raw).is_ok() {
        let mut again = Vec::new();
        gatehouse_huffman::encode(&raw, &mut again);
        assert_eq!(again, data, "a decoded string encodes back differently");
    }
    let mut coded = Vec::new();
    gatehouse_huffman::encode(data, &mut coded);
    assert_eq!(coded.len(), gatehouse_huffman::encoded_len(data));
    let mut back = Vec::new();
    assert_eq!(gatehouse_huffman::decode(&coded, &mut back), Ok(()));
    assert_eq!(back, data, "an encoded string decodes back differently");
}
