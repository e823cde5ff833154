//! Admit stage, ACL: allow or deny by method and path glob. Deny rules win; when allow rules
//! exist, a request must match one.

use gatehouse_config::{Acl, AclRule};
use http::Method;

/// A compiled ACL.
#[derive(Debug, Clone)]
pub struct Rules {
    allow: Box<[Rule]>,
    deny: Box<[Rule]>,
}

#[derive(Debug, Clone)]
struct Rule {
    methods: Box<[Method]>,
    paths: Box<[Glob]>,
}

impl Rules {
    /// Compiles the configured rules (validated: methods are tokens, paths start with `/`).
    pub fn new(acl: &Acl) -> Self {
        let rules = |list: &[AclRule]| {
            list.iter()
                .map(|r| Rule {
                    methods: r.methods.iter().filter_map(|m| Method::from_bytes(m.as_bytes()).ok()).collect(),
                    paths: r.paths.iter().map(|p| Glob::new(p)).collect(),
                })
                .collect()
        };
        Rules { allow: rules(&acl.allow), deny: rules(&acl.deny) }
    }

    /// Whether a request with `method` for `path` (below the service prefix) may pass.
    pub fn allows(&self, method: &Method, path: &str) -> bool {
        if self.deny.iter().any(|r| r.matches(method, path)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|r| r.matches(method, path))
    }
}

impl Rule {
    fn matches(&self, method: &Method, path: &str) -> bool {
        (self.methods.is_empty() || self.methods.contains(method))
            && (self.paths.is_empty() || self.paths.iter().any(|g| g.matches(path.as_bytes())))
    }
}

/// A path glob: `*` matches any run of bytes other than `/`, `**` any run at all.
#[derive(Debug, Clone)]
pub struct Glob(Box<[Piece]>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(Box<[u8]>),
    /// `*`
    Segment,
    /// `**`
    Any,
}

impl Glob {
    /// Compiles a pattern.
    pub fn new(pattern: &str) -> Self {
        let mut pieces = Vec::new();
        let mut lit = Vec::new();
        let b = pattern.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'*' {
                if !lit.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut lit).into()));
                }
                let double = b.get(i + 1) == Some(&b'*');
                i += if double { 2 } else { 1 };
                let piece = if double { Piece::Any } else { Piece::Segment };
                // `***` and `* **` collapse to one wildcard; `**` absorbs `*`.
                match pieces.last_mut() {
                    Some(last @ Piece::Segment) if piece == Piece::Any => *last = Piece::Any,
                    Some(Piece::Segment | Piece::Any) => {}
                    _ => pieces.push(piece),
                }
            } else {
                lit.push(b[i]);
                i += 1;
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Literal(lit.into()));
        }
        Glob(pieces.into())
    }

    /// Whether `path` matches the whole pattern.
    pub fn matches(&self, path: &[u8]) -> bool {
        // The usual shapes (`/exact`, `/prefix/**`, `**.json`, `**`) need no table of positions.
        match &*self.0 {
            [Piece::Any] => true,
            [Piece::Literal(l)] => path == &**l,
            [Piece::Literal(l), Piece::Any] => path.starts_with(l),
            [Piece::Any, Piece::Literal(l)] => path.ends_with(l),
            pieces => match_from(pieces, path),
        }
    }
}

/// Runs the pattern as a set of reachable positions in the path, piece by piece: linear in the
/// path for each piece, whatever the pattern, so no input makes it backtrack exponentially.
fn match_from(pieces: &[Piece], path: &[u8]) -> bool {
    /// Paths up to this long are matched without allocating.
    const STACK: usize = 256;
    let n = path.len();
    let (mut a, mut b) = ([false; STACK + 1], [false; STACK + 1]);
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    let (mut reach, mut next): (&mut [bool], &mut [bool]) = if n <= STACK {
        (&mut a[..=n], &mut b[..=n])
    } else {
        va.resize(n + 1, false);
        vb.resize(n + 1, false);
        (&mut va[..], &mut vb[..])
    };
    reach[0] = true;
    for piece in pieces {
        next.fill(false);
        match piece {
            Piece::Literal(l) => {
                for p in 0..=n {
                    if reach[p] && path[p..].starts_with(l) {
                        next[p + l.len()] = true;
                    }
                }
            }
            Piece::Any => {
                if let Some(first) = reach.iter().position(|&r| r) {
                    next[first..].fill(true);
                }
            }
            Piece::Segment => {
                let mut carry = false;
                for p in 0..=n {
                    carry |= reach[p];
                    next[p] = carry;
                    if p < n && path[p] == b'/' {
                        carry = false;
                    }
                }
            }
        }
        std::mem::swap(&mut reach, &mut next);
    }
    reach[n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let g = |p: &str, s: &str| Glob::new(p).matches(s.as_bytes());
        assert!(g("/public/*", "/public/a.html"));
        assert!(!g("/public/*", "/public/a/b.html"));
        assert!(g("/public/**", "/public/a/b.html"));
        assert!(g("/v*/users/*", "/v2/users/7"));
        assert!(!g("/v*/users/*", "/v2/users/7/x"));
        assert!(g("/**.json", "/a/b/c.json"));
        assert!(!g("/**.json", "/a/b/c.jsonx"));
        assert!(g("/exact", "/exact") && !g("/exact", "/exact/"));
        assert!(g("/***", "/anything/at/all"));
        assert!(g("**", "") && g("/**", "/") && !g("/**", "x/"));
        assert!(g("**.json", "a.json") && !g("**.json", "a.jso"));
        // Every shorthand agrees with the general matcher.
        for p in ["**", "/exact", "/public/**", "**.json", "/**", "/a*", "/a/*/b"] {
            let glob = Glob::new(p);
            for s in ["", "/", "/exact", "/exact/", "/public/x/y", "a.json", "/a", "/ab", "/a/x/b", "/a/x/y/b"] {
                assert_eq!(glob.matches(s.as_bytes()), match_from(&glob.0, s.as_bytes()), "{p} on {s}");
            }
        }
        // Many wildcards against a long path stay quick.
        let long = "/a".repeat(2000);
        assert!(!g("/*a*a*a*a*a*a*a*a*b", &long));
        assert!(!g("/**a**a**a**a**a**a**a**a**b", &long));
        assert!(g("/**a**a**a**a**a**a**a**a**", &long));
    }

    #[test]
    fn deny_wins_and_allow_lists_restrict() {
        let acl: Acl = Acl {
            allow: vec![AclRule { methods: vec!["GET".into()], paths: vec!["/public/**".into()] }],
            deny: vec![AclRule { methods: vec![], paths: vec!["/public/secret*".into()] }],
        };
        let r = Rules::new(&acl);
        assert!(r.allows(&Method::GET, "/public/a"));
        assert!(!r.allows(&Method::POST, "/public/a"));
        assert!(!r.allows(&Method::GET, "/public/secret.txt"));
        assert!(!r.allows(&Method::GET, "/private"));
        let deny_only = Rules::new(&Acl { allow: vec![], deny: acl.deny.clone() });
        assert!(deny_only.allows(&Method::DELETE, "/anything"));
    }
}
