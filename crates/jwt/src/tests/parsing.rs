//! What `decode` refuses before any cryptography: the shape of the token, its encoding, its header and claims.

use serde_json::json;

use super::*;
use crate::{decode, JwtError, MAX_TOKEN_LEN};

/// A token with exactly these header and payload bytes, and a real HS256 signature over them.
fn raw_token(header: &[u8], payload: &[u8]) -> String {
    let input = format!("{}.{}", b64(header), b64(payload));
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, HMAC_SECRET);
    format!("{input}.{}", b64(aws_lc_rs::hmac::sign(&key, input.as_bytes()).as_ref()))
}

fn malformed(token: &str) -> &'static str {
    match decode(token) {
        Err(JwtError::Malformed(reason)) => reason,
        other => panic!("{token:?}: expected Malformed, got {other:?}"),
    }
}

#[test]
fn the_raw_token_helper_makes_good_tokens() {
    let token = raw_token(br#"{"alg":"HS256"}"#, br#"{"exp":1}"#);
    assert_eq!(decode(&token).expect("decodes").verify(&keys(Algorithm::Hs256).1), Ok(()));
}

#[test]
fn only_three_segments() {
    let token = token(Algorithm::Hs256, &header(Algorithm::Hs256), &good_claims());
    let [h, p, s] = segments(&token);
    for bad in [
        String::new(),
        ".".into(),
        "...".into(),
        h.to_owned(),
        format!("{h}.{p}"),
        format!("{h}.{p}.{s}."),
        format!("{h}.{p}.{s}.{s}"),
        format!("{h}.{p}.{s}.{p}.{s}"), // The JWE compact form has five.
    ] {
        assert_eq!(malformed(&bad), "not three segments", "{bad}");
    }
    assert_eq!(malformed(".."), "header is not a JSON object");
    assert_eq!(malformed(&format!(".{p}.{s}")), "header is not a JSON object");
    assert_eq!(malformed(&format!("{h}..{s}")), "payload is not a JSON object");
    // An empty signature segment parses; it is refused by verify.
    assert_eq!(
        decode(&format!("{h}.{p}.")).expect("decodes").verify(&keys(Algorithm::Hs256).1),
        Err(JwtError::BadSignature)
    );
}

#[test]
fn padding_and_the_standard_alphabet_are_refused() {
    // Claims whose payload segment needs padding, and contains `-` or `_` where standard base64 has `+` or `/`.
    let claims = (0..)
        .map(|n| json!({"exp": NOW, "n": n, "x": "~~~???>>>"}))
        .find(|c| {
            let segment = b64(c.to_string().as_bytes());
            !segment.len().is_multiple_of(4) && segment.contains(['-', '_'])
        })
        .expect("some claims encode that way");
    let token = token(Algorithm::Hs256, &header(Algorithm::Hs256), &claims);
    let [h, p, s] = segments(&token);
    assert!(decode(&token).is_ok());

    let padded = format!("{p}{}", "=".repeat(4 - p.len() % 4));
    for bad in [format!("{h}.{padded}.{s}"), format!("{h}.{p}=.{s}"), format!("{h}.{p}.{s}=")] {
        assert_eq!(malformed(&bad), "segment is not unpadded base64url", "{bad}");
    }
    let standard = p.replace('-', "+").replace('_', "/");
    assert_ne!(standard, p);
    assert_eq!(malformed(&format!("{h}.{standard}.{s}")), "segment is not unpadded base64url");
    for junk in [" ", "\n", "*", "é", "\0"] {
        assert_eq!(malformed(&format!("{h}.{p}{junk}.{s}")), "segment is not unpadded base64url", "{junk:?}");
    }
    assert_eq!(malformed(&format!("Bearer {token}")), "segment is not unpadded base64url");
}

#[test]
fn non_canonical_trailing_bits_are_refused() {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let token = token(Algorithm::Hs256, &header(Algorithm::Hs256), &good_claims());
    let [h, p, s] = segments(&token);
    // 32 bytes are 43 characters; the last carries 4 bits and 2 that must be zero.
    let (body, last) = s.split_at(s.len() - 1);
    let index = ALPHABET.iter().position(|c| *c == last.as_bytes()[0]).expect("base64url character");
    assert_eq!(index & 3, 0);
    let other = char::from(ALPHABET[index | 1]);
    assert_eq!(malformed(&format!("{h}.{p}.{body}{other}")), "segment is not unpadded base64url");
}

#[test]
fn the_header_must_be_a_plain_jws_header() {
    let payload = br#"{"exp":1}"#;
    let cases: [(&[u8], &str); 13] = [
        (b"[]", "header is not a JSON object"),
        (br#""HS256""#, "header is not a JSON object"),
        (b"null", "header is not a JSON object"),
        (b"", "header is not a JSON object"),
        (br#"{"alg":"HS256""#, "header is not a JSON object"),
        (br#"{"alg":"HS256","alg":"none"}"#, "header is not a JSON object"),
        (b"{\"alg\":\"HS256\",\"x\":\"\xff\"}", "header is not a JSON object"),
        (br#"{"typ":"JWT"}"#, "header has no alg"),
        (br#"{"alg":"HS256","crit":["exp"],"exp":1}"#, "crit header is not supported"),
        (br#"{"alg":"HS256","b64":false,"crit":["b64"]}"#, "crit header is not supported"),
        (br#"{"alg":"HS256","typ":"dpop+jwt"}"#, "typ is not JWT"),
        (br#"{"alg":"HS256","typ":1}"#, "typ is not JWT"),
        (br#"{"alg":"HS256","kid":7}"#, "kid is not a string"),
    ];
    for (header, reason) in cases {
        assert_eq!(malformed(&raw_token(header, payload)), reason, "{}", String::from_utf8_lossy(header));
    }
    for typ in ["JWT", "jwt", "Jwt", "at+jwt", "application/jwt", "application/at+JWT"] {
        let header = json!({"alg": "HS256", "typ": typ}).to_string();
        assert!(decode(&raw_token(header.as_bytes(), payload)).is_ok(), "{typ}");
    }
}

#[test]
fn the_payload_must_be_a_claims_object() {
    let header = br#"{"alg":"HS256"}"#;
    let cases: [(&[u8], &str); 6] = [
        (b"[1]", "payload is not a JSON object"),
        (b"eyJ", "payload is not a JSON object"),
        (br#"{"sub":"a","sub":"b"}"#, "payload is not a JSON object"),
        (br#"{"exp":"tomorrow"}"#, "exp, nbf or iat is not a number"),
        (br#"{"aud":{"a":1}}"#, "aud is not a string or an array of strings"),
        (br#"{"iss":["a"]}"#, "iss or sub is not a string"),
    ];
    for (payload, reason) in cases {
        assert_eq!(malformed(&raw_token(header, payload)), reason, "{}", String::from_utf8_lossy(payload));
    }
    let deep = format!("{{\"x\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(malformed(&raw_token(header, deep.as_bytes())), "too long");
    let deep = format!("{{\"x\":{}{}}}", "[".repeat(2_000), "]".repeat(2_000));
    assert_eq!(malformed(&raw_token(header, deep.as_bytes())), "payload is not a JSON object", "recursion limit");
}

#[test]
fn length_is_capped() {
    let token_of_len = |target: usize| {
        let fixed = token(Algorithm::Hs256, &header(Algorithm::Hs256), &json!({"exp": NOW, "pad": ""})).len();
        // Each 3 bytes of padding add 4 characters; the header and signature are fixed.
        let pad = "x".repeat((target - fixed) / 4 * 3);
        token(Algorithm::Hs256, &header(Algorithm::Hs256), &json!({"exp": NOW, "pad": pad}))
    };
    let near = token_of_len(MAX_TOKEN_LEN);
    assert!(near.len() <= MAX_TOKEN_LEN && near.len() > MAX_TOKEN_LEN - 4, "{}", near.len());
    assert_eq!(decode(&near).expect("under the cap").verify(&keys(Algorithm::Hs256).1), Ok(()));
    assert_eq!(malformed(&token_of_len(MAX_TOKEN_LEN + 8)), "too long");
    assert_eq!(malformed(&"A".repeat(MAX_TOKEN_LEN + 1)), "too long");
    assert_eq!(malformed(&"A".repeat(1 << 20)), "too long");
}
