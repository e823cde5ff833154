use super::*;
use gatehouse_testkit::Rng;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector")).collect()
}

fn encoded(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(raw, &mut out);
    out
}

fn decoded(coded: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    decode(coded, &mut out).map(|()| out)
}

/// RFC 7541 Appendix C.4 and C.6: the Huffman-coded literals of its examples.
const RFC_EXAMPLES: &[(&str, &str)] = &[
    ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
    ("no-cache", "a8eb 1064 9cbf"),
    ("custom-key", "25a8 49e9 5ba9 7d7f"),
    ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
    ("302", "6402"),
    ("private", "aec3 771a 4b"),
    ("Mon, 21 Oct 2013 20:13:21 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"),
    ("https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
    ("307", "640e ff"),
    ("Mon, 21 Oct 2013 20:13:22 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff"),
    ("gzip", "9bd9 ab"),
    (
        "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ),
];

#[test]
fn the_rfc_examples_encode_and_decode() {
    for (raw, coded) in RFC_EXAMPLES {
        let coded = hex(coded);
        assert_eq!(encoded(raw.as_bytes()), coded, "{raw}");
        assert_eq!(encoded_len(raw.as_bytes()), coded.len(), "{raw}");
        assert_eq!(decoded(&coded).as_deref(), Ok(raw.as_bytes()), "{raw}");
    }
}

#[test]
fn the_code_is_complete_and_canonical() {
    // Kraft's sum of a complete prefix code is exactly 1: in units of 2^-30, 2^30.
    let sum: u64 = CODES.iter().map(|&(_, len)| 1u64 << (MAX_LEN - u32::from(len))).sum();
    assert_eq!(sum, 1 << MAX_LEN);
    // Canonical: each code is its length's first code plus its rank among that length's symbols.
    let t = &CANONICAL;
    for (sym, &(code, len)) in CODES.iter().enumerate() {
        let rank = CODES[..sym].iter().filter(|&&(_, l)| l == len).count() as u32;
        assert_eq!(code, t.first[len as usize] + rank, "symbol {sym}");
        assert_eq!(t.symbols[t.offset[len as usize] as usize + rank as usize] as usize, sym);
    }
    assert_eq!(CODES[256], ((1 << 30) - 1, 30), "EOS");
}

#[test]
fn every_byte_alone_and_all_together_round_trip() {
    for b in 0..=255u8 {
        assert_eq!(decoded(&encoded(&[b])), Ok(vec![b]), "byte {b}");
    }
    let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
    assert_eq!(decoded(&encoded(&all)), Ok(all.clone()));
    assert_eq!(encoded(&all).len(), encoded_len(&all));
}

#[test]
fn strings_of_every_length_round_trip() {
    // Header-like and arbitrary bytes.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for n in 0..600 {
        let raw: Vec<u8> = (0..n % 97)
            .map(|_| if n % 3 == 0 { rng.byte() } else { *rng.pick(b"abcdefghijklmnopqrstuvwxyz0123456789-/.;=, ") })
            .collect();
        let coded = encoded(&raw);
        assert_eq!(coded.len(), encoded_len(&raw));
        assert_eq!(decoded(&coded), Ok(raw));
    }
    assert_eq!(decoded(&[]), Ok(vec![]));
    assert_eq!(encoded(b""), Vec::<u8>::new());
}

#[test]
fn the_errors_of_rfc_7541_section_5_2_are_refused() {
    // EOS coded (30 ones) and padded: 0xff 0xff 0xff 0xff is EOS followed by 2 bits of padding.
    assert_eq!(decoded(&[0xff, 0xff, 0xff, 0xff]), Err(DecodeError::Eos));
    // A whole byte of padding after a symbol: '0' is 00000, then 3 + 8 ones.
    assert_eq!(decoded(&[0b0000_0111, 0xff]), Err(DecodeError::Padding));
    // Padding that is not all ones: '0' (00000) then 010.
    assert_eq!(decoded(&[0b0000_0010]), Err(DecodeError::Padding));
    // A lone byte of ones: 8 bits, no code, too long for padding.
    assert_eq!(decoded(&[0xff]), Err(DecodeError::Padding));
    // Right padding after "302" decodes.
    assert_eq!(decoded(&hex("6402")), Ok(b"302".to_vec()));
}

#[test]
fn arbitrary_input_never_panics() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for n in 0..20_000 {
        let coded: Vec<u8> = (0..n % 23).map(|_| rng.byte()).collect();
        if let Ok(raw) = decoded(&coded) {
            // Whatever decodes encodes back to the same bytes (the code is a bijection up to
            // padding, and padding is fixed).
            assert_eq!(encoded(&raw), coded);
        }
    }
}
