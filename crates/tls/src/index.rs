//! Certificates by name: exact names and `*.` wildcards (one label deep, as browsers match), at
//! most one ECDSA and one RSA bundle per name. Resolving a name is two hash probes.

use crate::bundle::{Bundle, KeyKind};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use std::collections::HashMap;
use std::sync::Arc;

/// The bundles serving one name.
#[derive(Debug, Default, Clone)]
pub struct Pair {
    /// Preferred for clients offering an ECDSA signature scheme.
    pub ecdsa: Option<Arc<Bundle>>,
    /// For everyone else (and anything that is not ECDSA, such as Ed25519).
    pub rsa: Option<Arc<Bundle>>,
}

impl Pair {
    /// Adds a bundle in its slot; a later bundle of the same kind replaces an earlier one.
    pub fn put(&mut self, bundle: Arc<Bundle>) {
        match bundle.facts.key {
            KeyKind::Ecdsa => self.ecdsa = Some(bundle),
            KeyKind::Rsa | KeyKind::Other => self.rsa = Some(bundle),
        }
    }

    /// Whether no bundle is held.
    pub fn is_empty(&self) -> bool {
        self.ecdsa.is_none() && self.rsa.is_none()
    }

    /// The bundle for a client offering `schemes`: ECDSA when the client can verify it, else the
    /// other one; rustls refuses the handshake if the client can verify neither.
    pub fn choose(&self, schemes: &[SignatureScheme]) -> Option<&Arc<Bundle>> {
        let ecdsa_ok = schemes.iter().any(|s| {
            matches!(
                s,
                SignatureScheme::ECDSA_NISTP256_SHA256
                    | SignatureScheme::ECDSA_NISTP384_SHA384
                    | SignatureScheme::ECDSA_NISTP521_SHA512
            )
        });
        match (&self.ecdsa, &self.rsa) {
            (Some(e), _) if ecdsa_ok => Some(e),
            (_, Some(r)) => Some(r),
            (e, None) => e.as_ref(),
        }
    }

    /// Bundles held, ECDSA first.
    pub fn bundles(&self) -> impl Iterator<Item = &Arc<Bundle>> {
        self.ecdsa.iter().chain(self.rsa.iter())
    }
}

/// Serves one [`Pair`] to rustls, choosing by the client's signature schemes.
#[derive(Debug)]
pub struct PairResolver(pub Arc<Pair>);

impl ResolvesServerCert for PairResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.choose(hello.signature_schemes()).map(|b| b.certified.clone())
    }
}

/// The parent a wildcard would match: `a.example.com` → `example.com`. Names of one label, and
/// names whose parent is a single label (`*.com` is never honoured), have none.
pub fn wildcard_parent(name: &str) -> Option<&str> {
    let (_, parent) = name.split_once('.')?;
    parent.contains('.').then_some(parent)
}

/// Lowercases a name and removes a trailing dot; `None` for names no certificate can match.
pub fn normalise(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    Some(name.to_ascii_lowercase())
}

/// An immutable index of bundles by the names in them.
#[derive(Debug, Default)]
pub struct Index {
    exact: HashMap<Box<str>, Arc<Pair>>,
    /// Keyed by the part after `*.`.
    wildcard: HashMap<Box<str>, Arc<Pair>>,
}

impl Index {
    /// Indexes `bundles`; later bundles win a name's slot over earlier ones.
    pub fn new<'a>(bundles: impl IntoIterator<Item = &'a Arc<Bundle>>) -> Self {
        let mut exact: HashMap<Box<str>, Pair> = HashMap::new();
        let mut wildcard: HashMap<Box<str>, Pair> = HashMap::new();
        for b in bundles {
            for name in &b.facts.names {
                match name.strip_prefix("*.") {
                    Some(parent) => wildcard.entry(parent.into()).or_default().put(b.clone()),
                    None => exact.entry(name.as_str().into()).or_default().put(b.clone()),
                }
            }
        }
        let arc = |m: HashMap<Box<str>, Pair>| m.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
        Index { exact: arc(exact), wildcard: arc(wildcard) }
    }

    /// The bundles for `name` (normalised): an exact entry, else a wildcard one label up.
    pub fn get(&self, name: &str) -> Option<&Arc<Pair>> {
        self.exact.get(name).or_else(|| self.wildcard.get(wildcard_parent(name)?))
    }

    /// The bundles indexed under a key: a name, or `*.parent` for a wildcard.
    pub fn get_key(&self, key: &str) -> Option<&Arc<Pair>> {
        match key.strip_prefix("*.") {
            Some(parent) => self.wildcard.get(parent),
            None => self.exact.get(key),
        }
    }

    /// Every entry, exact and wildcard.
    pub fn pairs(&self) -> impl Iterator<Item = &Arc<Pair>> {
        self.exact.values().chain(self.wildcard.values())
    }

    /// Number of names indexed.
    pub fn len(&self) -> usize {
        self.exact.len() + self.wildcard.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::parse;
    use crate::issue::{self_signed, Algorithm};

    fn bundle(names: &[&str], alg: Algorithm) -> Arc<Bundle> {
        let pem = self_signed(names, alg, 30).expect("test setup");
        Arc::new(parse(pem.as_bytes(), None, 0).expect("test setup").0)
    }

    #[test]
    fn exact_beats_wildcard_and_wildcards_are_one_label_deep() {
        let wild = bundle(&["*.example.com"], Algorithm::EcdsaP256);
        let exact = bundle(&["api.example.com"], Algorithm::EcdsaP256);
        let index = Index::new([&wild, &exact]);
        let names = |n: &str| index.get(n).and_then(|p| p.ecdsa.clone()).map(|b| b.facts.names[0].clone());
        assert_eq!(names("api.example.com").as_deref(), Some("api.example.com"));
        assert_eq!(names("www.example.com").as_deref(), Some("*.example.com"));
        assert_eq!(names("a.b.example.com"), None);
        assert_eq!(names("example.com"), None);
        assert_eq!(wildcard_parent("example.com"), None);
        assert_eq!(wildcard_parent("com"), None);
    }

    #[test]
    fn ecdsa_for_clients_that_can_verify_it_rsa_for_the_rest() {
        let e = bundle(&["dual.test"], Algorithm::EcdsaP256);
        let r = bundle(&["dual.test"], Algorithm::Rsa2048);
        let index = Index::new([&e, &r]);
        let pair = index.get("dual.test").expect("test setup");
        let kind = |schemes: &[SignatureScheme]| pair.choose(schemes).map(|b| b.facts.key);
        assert_eq!(
            kind(&[SignatureScheme::RSA_PSS_SHA256, SignatureScheme::ECDSA_NISTP256_SHA256]),
            Some(KeyKind::Ecdsa)
        );
        assert_eq!(kind(&[SignatureScheme::RSA_PSS_SHA256]), Some(KeyKind::Rsa));
        let only_e = Index::new([&e]);
        assert_eq!(
            only_e
                .get("dual.test")
                .expect("test setup")
                .choose(&[SignatureScheme::RSA_PSS_SHA256])
                .map(|b| b.facts.key),
            Some(KeyKind::Ecdsa)
        );
    }
}
