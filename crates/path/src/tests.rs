use super::*;

fn norm(path: &str) -> Result<String, Rejected> {
    normalize(path, Rules::default()).map(Cow::into_owned)
}

fn with(path: &str, merge_slashes: bool, escaped_slashes: EscapedSlashes) -> Result<String, Rejected> {
    normalize(path, Rules { merge_slashes, escaped_slashes }).map(Cow::into_owned)
}

#[test]
fn plain_paths_are_borrowed_unchanged() {
    for p in ["/", "/a", "/a/b/", "/pkg.Service/Method", "/a.b/c..d/.well-known/x", "/a;b=c/d", "/é/ü", "*"] {
        assert!(matches!(normalize(p, Rules::default()), Ok(Cow::Borrowed(q)) if q == p), "{p}");
    }
}

#[test]
fn dot_segments_are_removed() {
    let cases = [
        ("/files/public/../admin/secret.txt", "/files/admin/secret.txt"),
        ("/files/./admin/secret.txt", "/files/admin/secret.txt"),
        ("/a/b/c/./../../g", "/a/g"),
        ("/a/b/..", "/a/"),
        ("/a/b/.", "/a/b/"),
        ("/.", "/"),
        ("/a/..", "/"),
        ("/files/public/%2e%2e/admin/secret.txt", "/files/admin/secret.txt"),
        ("/files/public/%2E%2E/admin", "/files/admin"),
        ("/files/public/.%2e/admin", "/files/admin"),
        ("/files/%2e/admin", "/files/admin"),
        ("/a/.../b", "/a/.../b"),
        ("/a/..x/b", "/a/..x/b"),
    ];
    for (input, want) in cases {
        assert_eq!(norm(input).as_deref(), Ok(want), "{input}");
    }
}

#[test]
fn unreserved_escapes_are_decoded_and_others_kept_in_upper_case() {
    let cases = [
        ("/files/%61dmin/secret.txt", "/files/admin/secret.txt"),
        ("/%66iles/x", "/files/x"),
        ("/a%2Db%5F%7E%30", "/a-b_~0"),
        ("/a%20b", "/a%20b"),
        ("/a%3fb", "/a%3Fb"),
        ("/a%252e%252e/b", "/a%252e%252e/b"),
        ("/caf%c3%a9", "/caf%C3%A9"),
        ("/a%3B/b", "/a%3B/b"),
    ];
    for (input, want) in cases {
        assert_eq!(norm(input).as_deref(), Ok(want), "{input}");
    }
}

#[test]
fn slashes_are_merged_unless_turned_off() {
    assert_eq!(norm("/files//admin///secret.txt").as_deref(), Ok("/files/admin/secret.txt"));
    assert_eq!(norm("//admin").as_deref(), Ok("/admin"));
    assert_eq!(norm("/a//").as_deref(), Ok("/a/"));
    assert_eq!(with("/a//b", false, EscapedSlashes::Reject).as_deref(), Ok("/a//b"));
    assert_eq!(with("/a//../b", false, EscapedSlashes::Reject).as_deref(), Ok("/a/b"));
    assert_eq!(with("//..", false, EscapedSlashes::Reject).as_deref(), Ok("/"));
}

#[test]
fn bad_paths_are_refused() {
    let cases = [
        ("/a%", Rejected::InvalidEscape),
        ("/a%4", Rejected::InvalidEscape),
        ("/a%zz", Rejected::InvalidEscape),
        ("/a%%32e", Rejected::InvalidEscape),
        ("/a%00b", Rejected::EncodedNul),
        ("/..", Rejected::AboveRoot),
        ("/a/../..", Rejected::AboveRoot),
        ("/%2e%2e/etc/passwd", Rejected::AboveRoot),
        ("/public/%2E%2E%2Fadmin%2Fsecret.txt", Rejected::EscapedSlash),
        ("/a%2fb", Rejected::EscapedSlash),
        ("/a%5cb", Rejected::EscapedSlash),
        ("/a\\..\\admin", Rejected::Backslash),
        ("/a/%c0%ae%c0%ae/b", Rejected::InvalidUtf8),
        ("/a/%e0%80%ae", Rejected::InvalidUtf8),
        ("/a/%80", Rejected::InvalidUtf8),
        ("/a/%c3", Rejected::InvalidUtf8),
        ("/a/%c3b", Rejected::InvalidUtf8),
        ("/public/..;/admin", Rejected::DotSegmentParameter),
        ("/public/.;x/admin", Rejected::DotSegmentParameter),
    ];
    for (input, want) in cases {
        assert_eq!(norm(input), Err(want), "{input}");
    }
}

#[test]
fn escaped_slashes_by_the_rule() {
    let keep = |p| with(p, true, EscapedSlashes::Keep);
    let decode = |p| with(p, true, EscapedSlashes::Decode);
    assert_eq!(keep("/a%2fb%5c").as_deref(), Ok("/a%2Fb%5C"));
    assert_eq!(keep("/a\\b").as_deref(), Ok("/a\\b"));
    // Kept as data: `..%2F` is not a dot segment.
    assert_eq!(keep("/p/..%2Fadmin").as_deref(), Ok("/p/..%2Fadmin"));
    assert_eq!(decode("/public/%2E%2E%2Fadmin%2Fsecret.txt").as_deref(), Ok("/admin/secret.txt"));
    assert_eq!(decode("/public\\..\\admin").as_deref(), Ok("/admin"));
    assert_eq!(decode("/p/%5c..%5c..%5cx"), Err(Rejected::AboveRoot));
}

#[test]
fn the_result_is_idempotent_and_holds_no_dot_segment_or_double_slash() {
    let inputs = [
        "/a/./b/../c//d/%2e/%2E%2e/e",
        "/x/%41%42%2f",
        "/é/%C3%A9/../ü",
        "/a/b/c/d/../../..",
        "/%7e%2D/.well-known/acme-challenge/x",
    ];
    for rules in [
        Rules::default(),
        Rules { merge_slashes: true, escaped_slashes: EscapedSlashes::Keep },
        Rules { merge_slashes: true, escaped_slashes: EscapedSlashes::Decode },
    ] {
        for input in inputs {
            let Ok(once) = normalize(input, rules) else { continue };
            assert!(matches!(normalize(&once, rules), Ok(Cow::Borrowed(_))), "{input} -> {once} under {rules:?}");
            assert!(!once.contains("//"), "{once}");
            assert!(once.split('/').all(|s| s != "." && s != ".."), "{once}");
        }
    }
}

#[test]
fn paths_that_are_not_absolute_are_left_alone() {
    assert_eq!(norm("*").as_deref(), Ok("*"));
}

#[test]
fn the_word_scan_agrees_with_the_byte_scan() {
    let pieces = ["/", "a", ".", "..", "%", "\\", "x.y", ";", "é", "//", "/.", "abcdefg"];
    // Every sequence of up to 5 pieces (249k paths), so each case sits at many offsets of a word.
    let mut stack = vec![(String::new(), 0)];
    while let Some((p, n)) = stack.pop() {
        for merge in [true, false] {
            assert_eq!(already_normal(p.as_bytes(), merge), scan(p.as_bytes(), merge), "{p:?} merge {merge}");
        }
        if n < 5 {
            stack.extend(pieces.iter().map(|q| (format!("{p}{q}"), n + 1)));
        }
    }
}

#[test]
fn percent_escapes_decode_strictly() {
    assert_eq!(percent_decode("127.0.0.1%3A8080").as_deref(), Some("127.0.0.1:8080"));
    assert_eq!(percent_decode("%e2%82%AC and +").as_deref(), Some("€ and +"));
    for broken in ["%zz", "%4", "a%", "%+f", "%ff"] {
        assert_eq!(percent_decode(broken), None, "{broken:?}");
    }
}
