//! Session tickets sealed with AES-256-GCM under a rotating key ring.
//!
//! A ticket is `key name (16) ‖ nonce (12) ‖ ciphertext ‖ tag (16)`, with the key name as
//! associated data. The newest key seals; every key still in the ring opens, so a ticket outlives
//! the rotation that retired its key for as long as the ring keeps that key. Keys live only in
//! memory (and, in cluster mode, in Redis): a stolen ticket key opens the TLS 1.2 sessions sealed
//! under it, so the ring's window is the forward-secrecy window.

use crate::stats::TlsStats;
use arc_swap::ArcSwap;
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use data_encoding::HEXLOWER;
use rustls::server::ProducesTickets;
use std::sync::Arc;

/// Length of a key name.
pub const NAME_LEN: usize = 16;
/// Length of key material.
pub const KEY_LEN: usize = 32;
const TAG_LEN: usize = 16;

/// Key material as stored and shared: name, secret, creation time (Unix seconds).
#[derive(Clone, PartialEq, Eq)]
pub struct KeyMaterial {
    /// Identifies the key inside tickets.
    pub name: [u8; NAME_LEN],
    /// The AES-256 key.
    pub secret: [u8; KEY_LEN],
    /// When it was made, Unix seconds.
    pub created: u64,
}

impl std::fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("KeyMaterial")
            .field("name", &HEXLOWER.encode(&self.name))
            .field("created", &self.created)
            .finish()
    }
}

impl KeyMaterial {
    /// A new random key made at `created`.
    pub fn generate(created: u64) -> Option<Self> {
        let rng = SystemRandom::new();
        let mut name = [0u8; NAME_LEN];
        let mut secret = [0u8; KEY_LEN];
        rng.fill(&mut name).ok()?;
        rng.fill(&mut secret).ok()?;
        Some(KeyMaterial { name, secret, created })
    }

    /// `name ‖ secret ‖ created (8, big endian)`: the form stored in Redis (sealed there).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(NAME_LEN + KEY_LEN + 8);
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&self.secret);
        out.extend_from_slice(&self.created.to_be_bytes());
        out
    }

    /// Reads [`KeyMaterial::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != NAME_LEN + KEY_LEN + 8 {
            return None;
        }
        let name = b[..NAME_LEN].try_into().ok()?;
        let secret = b[NAME_LEN..NAME_LEN + KEY_LEN].try_into().ok()?;
        let created = u64::from_be_bytes(b[NAME_LEN + KEY_LEN..].try_into().ok()?);
        Some(KeyMaterial { name, secret, created })
    }
}

struct Key {
    name: [u8; NAME_LEN],
    aead: LessSafeKey,
}

impl Key {
    fn new(m: &KeyMaterial) -> Option<Self> {
        let unbound = UnboundKey::new(&AES_256_GCM, &m.secret).ok()?;
        Some(Key { name: m.name, aead: LessSafeKey::new(unbound) })
    }
}

/// The keys in use: the first seals, all open.
struct Ring {
    keys: Vec<Key>,
}

/// Seals and opens tickets for rustls; the ring is swapped without locks.
pub struct Ticketer {
    ring: ArcSwap<Ring>,
    lifetime: u32,
    rng: SystemRandom,
    stats: Arc<TlsStats>,
}

impl std::fmt::Debug for Ticketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticketer")
            .field("keys", &self.ring.load().keys.len())
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

impl Ticketer {
    /// A ticketer whose tickets tell clients they last `lifetime_secs`, with one fresh key; the
    /// ring's size is kept in `stats`.
    pub fn new(lifetime_secs: u32, stats: Arc<TlsStats>) -> Option<Arc<Self>> {
        let first = KeyMaterial::generate(0)?;
        let t = Ticketer {
            ring: ArcSwap::from_pointee(Ring { keys: Vec::new() }),
            lifetime: lifetime_secs,
            rng: SystemRandom::new(),
            stats,
        };
        t.install(&[first]);
        Some(Arc::new(t))
    }

    /// Replaces the ring: `keys[0]` seals from now on, all of them open. Unusable material is
    /// skipped; an empty list leaves the ring as it is.
    pub fn install(&self, keys: &[KeyMaterial]) {
        let keys: Vec<Key> = keys.iter().filter_map(Key::new).collect();
        if !keys.is_empty() {
            self.stats.ticket_keys.store(keys.len() as u64, std::sync::atomic::Ordering::Relaxed);
            self.ring.store(Arc::new(Ring { keys }));
        }
    }

    /// Names of the keys in the ring, sealing key first (for status and tests).
    pub fn key_names(&self) -> Vec<[u8; NAME_LEN]> {
        self.ring.load().keys.iter().map(|k| k.name).collect()
    }
}

impl ProducesTickets for Ticketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let ring = self.ring.load();
        let key = ring.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(&key.name);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plain);
        let mut body = out.split_off(NAME_LEN + NONCE_LEN);
        key.aead.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&key.name), &mut body).ok()?;
        out.extend_from_slice(&body);
        Some(out)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < NAME_LEN + NONCE_LEN + TAG_LEN {
            return None;
        }
        let (name, rest) = ticket.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let ring = self.ring.load();
        let key = ring.keys.iter().find(|k| k.name[..] == *name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key.aead.open_in_place(nonce, Aad::from(&key.name), &mut buf).ok()?;
        let n = plain.len();
        buf.truncate(n);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_by_the_current_key_opened_after_rotation_not_after_removal() {
        let t = Ticketer::new(3600, Arc::default()).expect("test setup");
        let first = t.ring.load().keys[0].name;
        let sealed = t.encrypt(b"session state").expect("test setup");
        assert_eq!(&sealed[..NAME_LEN], &first);
        assert_eq!(t.decrypt(&sealed).expect("test setup"), b"session state");
        let old = KeyMaterial::generate(1).expect("test setup");
        let new = KeyMaterial::generate(2).expect("test setup");
        t.install(&[new.clone(), old.clone()]);
        // The first key is gone: its tickets no longer open.
        assert!(t.decrypt(&sealed).is_none());
        let by_new = t.encrypt(b"x").expect("test setup");
        assert_eq!(&by_new[..NAME_LEN], &new.name);
        t.install(&[KeyMaterial::generate(3).expect("test setup"), new]);
        assert_eq!(t.decrypt(&by_new).expect("test setup"), b"x");
    }

    #[test]
    fn tampering_and_short_input_are_refused() {
        let t = Ticketer::new(60, Arc::default()).expect("test setup");
        let mut sealed = t.encrypt(b"abc").expect("test setup");
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert!(t.decrypt(&sealed).is_none());
        assert!(t.decrypt(&sealed[..10]).is_none());
        assert!(t.decrypt(&[]).is_none());
    }

    #[test]
    fn material_round_trips_and_debug_hides_the_secret() {
        let m = KeyMaterial::generate(42).expect("test setup");
        assert_eq!(KeyMaterial::from_bytes(&m.to_bytes()), Some(m.clone()));
        assert!(!format!("{m:?}").contains(&HEXLOWER.encode(&m.secret)));
        assert!(KeyMaterial::from_bytes(&[1, 2, 3]).is_none());
    }
}
