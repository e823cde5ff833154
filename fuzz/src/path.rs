//! Target `path`: request paths as clients write them. Whatever the bytes, under every rule set
//! [`gatehouse_path::normalize`] either refuses the path or gives one that is its own normalized
//! form (idempotent), starts with `/`, holds no `.` or `..` segment, no `//` when slashes are
//! merged, and no escape of an unreserved character.
//!
//! The input is a path as text (the query is never normalized, so none is given).

use gatehouse_path::{normalize, EscapedSlashes, Rules};

/// Checks every rule set on `data`.
pub fn check(data: &[u8]) {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    for merge_slashes in [true, false] {
        for escaped_slashes in [EscapedSlashes::Reject, EscapedSlashes::Keep, EscapedSlashes::Decode] {
            one(path, Rules { merge_slashes, escaped_slashes });
        }
    }
}

fn one(path: &str, rules: Rules) {
    let Ok(once) = normalize(path, rules) else {
        return;
    };
    if !path.starts_with('/') {
        assert_eq!(once, path, "a path without a leading `/` is left alone");
        return;
    }
    assert!(once.starts_with('/'), "{path:?} -> {once:?}");
    match normalize(&once, rules) {
        Ok(twice) => assert_eq!(twice, once, "not idempotent: {path:?} under {rules:?}"),
        Err(e) => panic!("{path:?} -> {once:?}, which is then refused ({e}) under {rules:?}"),
    }
    for seg in once.split('/') {
        assert!(seg != "." && seg != "..", "dot segment left: {path:?} -> {once:?} under {rules:?}");
    }
    if rules.merge_slashes {
        assert!(!once.contains("//"), "`//` left: {path:?} -> {once:?}");
    }
    if rules.escaped_slashes != EscapedSlashes::Keep {
        assert!(!once.contains('\\'), "backslash left: {path:?} -> {once:?}");
    }
    for (i, _) in once.match_indices('%') {
        let hex = once.get(i + 1..i + 3).unwrap_or("");
        let v = u8::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("bad escape left: {path:?} -> {once:?}"));
        assert!(hex.bytes().all(|b| !b.is_ascii_lowercase()), "lower-case escape left: {once:?}");
        assert!(
            !(v.is_ascii_alphanumeric() || b"-._~".contains(&v)),
            "escaped unreserved character left: {path:?} -> {once:?}"
        );
    }
}
