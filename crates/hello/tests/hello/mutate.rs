//! Robustness without external crates: a deterministic PRNG mutates real and built hellos, and the
//! framing and parsing functions must neither panic nor contradict each other.
//!
//! `GH_HELLO_MUTATIONS=N` changes the number of rounds (200 000 by default).

use gatehouse_hello::{
    extension_type as ty, parse, reassemble, record_need, ClientHello, Need, ParseError,
    DEFAULT_MAX_HELLO_BYTES as MAX, MAX_HOST_NAME_LEN,
};
use gatehouse_testkit::Rng;

use crate::builder::{fragment, psk, Hello};
use crate::corpus::{load, CORPUS};

fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = CORPUS.iter().map(|e| load(e.name)).collect();
    let resumption = Hello::tls13()
        .ext(ty::SESSION_TICKET, vec![1; 40])
        .ext(ty::EARLY_DATA, vec![])
        .ext(ty::PRE_SHARED_KEY, psk(&[(&[0xab; 64], 7), (b"ext", 9)], &[&[1; 32], &[2; 48]]));
    seeds.push(resumption.record());
    seeds.push(fragment(&resumption.message(), &[3, 1, 90]));
    seeds.push(fragment(&Hello::tls13().message(), &[40; 10]));
    seeds.push(Hello { extensions: None, ..Hello::tls13() }.record());
    seeds
}

/// Small changes to the bytes, weighted towards length fields, where parsers break.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let at = rng.below(input.len());
    match rng.below(8) {
        0 => {
            if let Some(b) = input.get_mut(at) {
                *b ^= 1 << rng.below(8);
            }
        }
        1 => {
            let interesting = [0, 1, 0x7f, 0x80, 0xff, 0x16, 0x03, rng.byte()];
            if let Some(b) = input.get_mut(at) {
                *b = interesting[rng.below(interesting.len())];
            }
        }
        2 => input.truncate(at),
        3 => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let b = rng.byte();
                input.insert(at.min(input.len()), b);
            }
        }
        4 => {
            let end = (at + 1 + rng.below(16)).min(input.len());
            input.drain(at.min(end)..end);
        }
        5 => {
            let end = (at + 1 + rng.below(32)).min(input.len());
            let copy = input[at.min(end)..end].to_vec();
            let to = rng.below(input.len() + 1);
            input.splice(to..to, copy);
        }
        _ => {
            // Nudge a 16-bit big-endian value, the shape of most length fields.
            if at + 1 < input.len() {
                let old = u16::from_be_bytes([input[at], input[at + 1]]);
                let deltas = [1u16, 2, 4, 0xffff, 0xfffe, 0xfffc, 0x0100, 0xff00];
                let new = old.wrapping_add(deltas[rng.below(deltas.len())]);
                input[at..at + 2].copy_from_slice(&new.to_be_bytes());
            }
        }
    }
}

/// What `parse` promises about a hello it accepted, read through every view.
fn check_accepted(hello: &ClientHello<'_>) {
    assert!(hello.session_id.len() <= 32);
    assert!(!hello.cipher_suites.is_empty());
    assert_eq!(hello.cipher_suites.iter().count(), hello.cipher_suites.len());
    assert!(hello.compression_methods.contains(&0));
    if let Some(name) = hello.server_name {
        assert!(!name.is_empty() && name.len() <= MAX_HOST_NAME_LEN);
        assert!(name.bytes().all(|b| b.is_ascii_graphic()));
    }
    if let Some(alpn) = hello.alpn {
        assert!(alpn.iter().count() >= 1 && alpn.iter().all(|p| !p.is_empty()));
    }
    if let Some(ids) = hello.psk_identities {
        assert!(!ids.is_empty() && ids.iter().all(|p| !p.identity.is_empty()));
        assert_eq!(hello.extensions.types().last(), Some(ty::PRE_SHARED_KEY));
    }
    let types: Vec<u16> = hello.extensions.types().collect();
    let mut unique = types.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), types.len(), "duplicate extension accepted");
    let framed: usize = hello.extensions.iter().map(|e| 4 + e.data.len()).sum();
    assert_eq!(framed, hello.extensions.as_bytes().len(), "extensions view lost bytes");
    let _ = format!("{hello:?}");
}

#[derive(Debug, Default)]
struct Tally {
    complete: usize,
    parsed: usize,
    more: usize,
    not_tls: usize,
    framing_errors: usize,
}

#[test]
fn mutated_hellos_never_panic_and_stay_consistent() {
    let rounds: usize = std::env::var("GH_HELLO_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let seeds = seeds();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally = Tally::default();
    for round in 0..rounds {
        let mut input = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut input);
        }
        // The raw bytes as a handshake message: parse must cope with anything.
        if let Ok(hello) = parse(&input) {
            check_accepted(&hello);
        }
        match record_need(&input, MAX) {
            Ok(Need::Complete(len)) => {
                tally.complete += 1;
                assert!(len <= input.len(), "round {round}");
                let message = reassemble(&input).unwrap_or_else(|e| panic!("round {round}: Complete but {e}"));
                assert!(message.len() < len, "round {round}");
                if let Ok(hello) = parse(&message) {
                    tally.parsed += 1;
                    check_accepted(&hello);
                }
                assert_eq!(record_need(&input[..len], MAX), Ok(Need::Complete(len)), "round {round}");
                let cut = rng.below(len);
                match record_need(&input[..cut], MAX) {
                    Ok(Need::More(n)) => assert!(n >= 1 && cut + n <= len, "round {round}: cut {cut} More({n})"),
                    other => panic!("round {round}: prefix {cut} of {len}: {other:?}"),
                }
            }
            Ok(Need::More(n)) => {
                tally.more += 1;
                assert!(n >= 1, "round {round}");
                assert_eq!(reassemble(&input), Err(ParseError::Incomplete), "round {round}");
            }
            Ok(Need::NotTls) => {
                tally.not_tls += 1;
                assert_eq!(reassemble(&input), Err(ParseError::NotTls), "round {round}");
            }
            Err(e) => {
                tally.framing_errors += 1;
                if !matches!(e, ParseError::RecordLimit { .. }) {
                    assert_eq!(reassemble(&input), Err(e), "round {round}");
                }
            }
        }
    }
    println!("{rounds} mutations: {tally:?}");
    // The mutations must reach every outcome, or the test proves less than it claims.
    if rounds >= 10_000 {
        assert!(tally.parsed > rounds / 100, "{tally:?}");
        assert!(tally.complete > tally.parsed && tally.more > 0 && tally.not_tls > 0 && tally.framing_errors > 0);
    }
}
