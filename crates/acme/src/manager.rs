//! Keeps a certificate for every configured name: orders the names the store lacks, and renews
//! each in its renewal window (the CA's, RFC 9773, else `renew_before`) at a random point of it,
//! retrying failures with backoff. The certificate in the store is served until its successor is
//! written there; nodes pick the change up by themselves.
//!
//! ```text
//! per name:  stored? ─no──────────────────────────┐
//!              └yes─► window (ARI | renew_before) ─► sleep to a random point ─► lock ─► stored
//!                                                                              still due? ─► order
//!                                                                              ─► store ─► unlock
//! ```

use crate::account::{account, Keep, CA_TIMEOUT};
use crate::error::AcmeError;
use crate::lock::Locks;
use crate::on_demand::{is_orderable, Policy};
use crate::order::issue;
use crate::settings::Settings;
use crate::NameStatus;
use gatehouse_config::AcmeChallenge;
use gatehouse_tls::bundle::Bundle;
use gatehouse_tls::catalog::Catalog;
use gatehouse_tls::challenge::Board;
use gatehouse_tls::Certs;
use instant_acme::{Account, CertificateIdentifier};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// Orders placed by this node at once.
const CONCURRENT_ORDERS: usize = 8;

/// Longest wait between two looks at a name (the store may have changed, the CA's window too).
const LONGEST_SLEEP: Duration = Duration::from_secs(6 * 3600);

/// First wait after a failure; doubled after each until [`LONGEST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(30);
const LONGEST_BACKOFF: Duration = Duration::from_secs(6 * 3600);

/// While another node holds a name's lock, how often this one looks whether it is done.
const OTHERS_ORDER: Duration = Duration::from_secs(2);

/// Where the admin API finds the running manager (replaced by reloads).
#[derive(Default)]
pub struct ManagerSlot(std::sync::RwLock<Option<Arc<Manager>>>);

impl ManagerSlot {
    /// The manager now, if ACME is on.
    pub fn get(&self) -> Option<Arc<Manager>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the manager.
    pub fn set(&self, manager: Option<Arc<Manager>>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = manager;
    }
}

/// Where the manager keeps what it issues and answers from.
pub struct Parts {
    /// The CA and names.
    pub settings: Settings,
    /// The store issued certificates are written to.
    pub catalog: Catalog,
    /// The certificates the node serves (read to see what is stored, told of what was written).
    pub certs: Arc<Certs>,
    /// Challenge answers.
    pub board: Arc<Board>,
    /// Where the account is kept.
    pub keep: Keep,
    /// Order locks.
    pub locks: Locks,
    /// Counters, kept across the reloads that replace the manager.
    pub stats: Arc<crate::AcmeStats>,
}

/// The certificates of `tls.acme`, kept.
pub struct Manager {
    parts: Parts,
    /// What this node knows of each kept name, as it writes it to the store.
    names: Mutex<BTreeMap<String, NameStatus>>,
    orders: tokio::sync::Semaphore,
    /// Who may get an on-demand certificate, when on.
    policy: Option<Policy>,
    /// The manager itself, for the tasks it spawns.
    me: Weak<Manager>,
    /// The runtime [`Manager::run`] runs on (orders run there, whatever runtime asks).
    runtime: OnceLock<tokio::runtime::Handle>,
    /// The account, once made or read.
    account: watch::Sender<Option<Account>>,
    /// On-demand orders under way, by name, with their outcome once known.
    inflight: Mutex<HashMap<String, watch::Receiver<Option<bool>>>>,
    /// Set when a reload replaced the manager: its loops end at their next wake.
    stopped: AtomicBool,
    /// Names asked to be renewed now, and the wake of each name's loop.
    forced: Mutex<HashSet<String>>,
    wakes: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A random point of `[start, end]` (Unix seconds).
fn random_point(start: i64, end: i64) -> i64 {
    if end <= start {
        return start;
    }
    let mut b = [0u8; 8];
    let r = match aws_lc_rs::rand::fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => 0,
    };
    start + (r % (end - start + 1) as u64) as i64
}

/// When a certificate valid over `[not_before, not_after]` is renewed without the CA's advice: a
/// random point of the window that starts `renew_before` ahead of expiry (at two thirds of the
/// validity for certificates no longer than `renew_before`) and ends a third of the way from
/// there to expiry.
pub fn fallback_window(not_before: i64, not_after: i64, renew_before: Duration) -> (i64, i64) {
    let lifetime = (not_after - not_before).max(0);
    let renew_before = renew_before.as_secs() as i64;
    let start = if renew_before < lifetime { not_after - renew_before } else { not_before + lifetime * 2 / 3 };
    (start, start + (not_after - start) / 3)
}

/// The CA's window `(start, end)`, kept out of the last sixth of the validity: a window that
/// reaches expiry (Pebble's for certificates shorter than two days) would let a point near its
/// end leave no time to order before the certificate runs out.
pub fn within_validity(window: (i64, i64), not_before: i64, not_after: i64) -> (i64, i64) {
    let latest = not_after - (not_after - not_before).max(0) / 6;
    let start = window.0.min(latest);
    (start, window.1.min(latest).max(start))
}

/// The ARI identifier of a certificate (RFC 9773 §4.1): its authority key identifier and serial.
fn certificate_id(leaf: &[u8]) -> Option<CertificateIdentifier<'static>> {
    use x509_parser::extensions::ParsedExtension;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let aki = cert.iter_extensions().find_map(|e| match e.parsed_extension() {
        ParsedExtension::AuthorityKeyIdentifier(a) => a.key_identifier.as_ref().map(|k| k.0),
        _ => None,
    })?;
    use rustls::pki_types::Der;
    Some(
        CertificateIdentifier::new(Der::from_slice(aki), Der::from_slice(cert.tbs_certificate.raw_serial()))
            .into_owned(),
    )
}

impl Manager {
    /// A manager over `parts`; [`Manager::run`] does the work. `Err` when the on-demand ask
    /// endpoint cannot get an HTTP client.
    pub fn new(parts: Parts) -> Result<Arc<Self>, AcmeError> {
        let names = parts
            .settings
            .names
            .iter()
            .map(|n| (n.clone(), NameStatus { source: "acme".into(), ..NameStatus::default() }))
            .collect();
        let policy = parts.settings.on_demand.as_ref().map(Policy::new).transpose().map_err(AcmeError::Local)?;
        Ok(Arc::new_cyclic(|me| Manager {
            parts,
            names: Mutex::new(names),
            orders: tokio::sync::Semaphore::new(CONCURRENT_ORDERS),
            policy,
            me: me.clone(),
            runtime: OnceLock::new(),
            account: watch::Sender::new(None),
            inflight: Mutex::default(),
            stopped: AtomicBool::new(false),
            forced: Mutex::default(),
            wakes: Mutex::default(),
        }))
    }

    /// Asks for `name` to be renewed now (by this node, under the name's lock as always);
    /// `false` when the manager does not keep it.
    pub fn renew_now(&self, name: &str) -> bool {
        let Some(wake) = self.wakes.lock().unwrap_or_else(|p| p.into_inner()).get(name).cloned() else {
            return false;
        };
        self.forced.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string());
        wake.notify_one();
        true
    }

    /// The statuses of every kept name, as the store holds them (the whole cluster's).
    pub async fn statuses(&self) -> Result<BTreeMap<String, crate::NameStatus>, AcmeError> {
        self.parts.keep.statuses().await
    }

    /// Writes what this node knows of `name` to the store, for every node's API and the CLI, and
    /// recounts the kept certificates by days to expiry.
    async fn publish(&self, name: &str) {
        let names = self.names();
        self.parts.stats.set_expiring(names.values().filter_map(|s| s.not_after), now_secs());
        let Some(mut status) = names.get(name).cloned() else { return };
        status.updated = now_secs();
        if let Err(e) = self.parts.keep.save_status(name, &status).await {
            tracing::debug!(name, error = %e, "ACME status not written");
        }
    }

    /// Ends the manager's loops (a reload replaced it); an order under way finishes.
    pub fn stop(&self) {
        self.stopped.store(true, Relaxed);
    }

    /// What is known of each managed name.
    pub fn names(&self) -> BTreeMap<String, NameStatus> {
        self.names.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn note(&self, name: &str, f: impl FnOnce(&mut NameStatus)) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        f(names.entry(name.to_string()).or_default());
    }

    /// Gets the account (retrying with backoff while the CA cannot be reached), then keeps every
    /// name; runs until dropped.
    pub async fn run(self: Arc<Self>) {
        let _ = self.runtime.set(tokio::runtime::Handle::current());
        let mut backoff = FIRST_BACKOFF;
        let account = loop {
            match account(&self.parts.settings, &self.parts.keep, &self.parts.locks, &self.parts.stats).await {
                Ok(a) => break a,
                Err(e) => {
                    tracing::error!(directory = %self.parts.settings.directory, error = %e, retry_in_s = backoff.as_secs(), "no ACME account");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(LONGEST_BACKOFF);
                }
            }
        };
        self.account.send_replace(Some(account.clone()));
        let mut names = self.parts.settings.names.clone();
        if self.policy.is_some() {
            match self.parts.keep.on_demand_names().await {
                Ok(issued) => names.extend(issued.into_iter().filter(|n| !self.parts.settings.names.contains(n))),
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the names issued on demand; they renew at their next handshake")
                }
            }
        }
        let mut tasks = tokio::task::JoinSet::new();
        for name in names {
            tasks.spawn(self.clone().keep(account.clone(), name));
        }
        while tasks.join_next().await.is_some() {}
    }

    /// The certificate the store holds for `name`, if any; `Err` while the store cannot answer.
    async fn stored(&self, name: &str) -> Result<Option<Arc<Bundle>>, AcmeError> {
        let pair = self
            .parts
            .certs
            .stored(name)
            .await
            .map_err(|_| AcmeError::Local("the certificate store cannot be read".into()))?;
        Ok(pair.and_then(|p| p.bundles().max_by_key(|b| b.facts.not_after).cloned()))
    }

    /// When `bundle` is renewed: a random point of the CA's window when it gives one, else of
    /// [`fallback_window`]; when to ask again at the latest; and whether the CA gave the window
    /// (then the new order says which certificate it `replaces`).
    async fn due(&self, account: &Account, name: &str, bundle: &Bundle) -> (i64, Duration, bool) {
        let facts = &bundle.facts;
        let leaf = bundle.certified.cert.first().map(|c| c.as_ref().to_vec()).unwrap_or_default();
        if let Some(id) = certificate_id(&leaf) {
            match tokio::time::timeout(CA_TIMEOUT, account.renewal_info(&id)).await {
                Ok(Ok((info, retry_after))) => {
                    let w = info.suggested_window;
                    let (start, end) = within_validity(
                        (w.start.unix_timestamp(), w.end.unix_timestamp()),
                        facts.not_before,
                        facts.not_after,
                    );
                    let at = random_point(start, end);
                    return (at, retry_after.clamp(Duration::from_secs(60), LONGEST_SLEEP), true);
                }
                Ok(Err(instant_acme::Error::Unsupported(_))) => {}
                Ok(Err(e)) => tracing::debug!(name, error = %e, "no renewal information; renewing before expiry"),
                Err(_) => tracing::debug!(name, "no renewal information in time; renewing before expiry"),
            }
        }
        let (start, end) = fallback_window(facts.not_before, facts.not_after, self.parts.settings.renew_before);
        (random_point(start, end), LONGEST_SLEEP, false)
    }

    /// Keeps `name`'s certificate, for as long as the manager runs.
    async fn keep(self: Arc<Self>, account: Account, name: String) {
        let mut backoff = FIRST_BACKOFF;
        let wake = Arc::new(tokio::sync::Notify::new());
        self.wakes.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), wake.clone());
        self.note(&name, |s| {
            if s.source.is_empty() {
                s.source = "on-demand".into();
            }
        });
        // The expiry already counted as passed with no renewal in place (each certificate once).
        let mut counted_expiry = None;
        loop {
            let wait = match self.step(&account, &name).await {
                Ok(wait) => {
                    backoff = FIRST_BACKOFF;
                    wait
                }
                Err(e) => {
                    let not_after =
                        self.names.lock().unwrap_or_else(|p| p.into_inner()).get(&name).and_then(|s| s.not_after);
                    let now = now_secs();
                    // The retry comes no later than the expiry, so that an expiry with no
                    // renewal in place is seen when it happens.
                    let wait = match not_after {
                        Some(t) if t > now => backoff.min(Duration::from_secs((t - now) as u64 + 1)),
                        _ => backoff,
                    };
                    tracing::error!(name = %name, error = %e, retry_in_s = wait.as_secs(), "ACME certificate not obtained");
                    self.note(&name, |s| {
                        s.last_error = Some(e.to_string());
                        s.next_renewal = Some(now + wait.as_secs() as i64);
                    });
                    if let Some(t) = not_after.filter(|t| *t <= now && counted_expiry != Some(*t)) {
                        counted_expiry = Some(t);
                        self.parts.stats.expired.inc();
                        tracing::error!(name = %name, not_after = t, "certificate expired with no renewal in place");
                    }
                    backoff = (backoff * 2).min(LONGEST_BACKOFF);
                    wait
                }
            };
            self.publish(&name).await;
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = wake.notified() => {}
            }
            if self.stopped.load(Relaxed) {
                return;
            }
        }
    }

    /// Obtains a certificate for `name` on demand: allowed, within the rate, ordered (or found
    /// ordered by another node), then kept like a configured name.
    async fn order_on_demand(self: Arc<Self>, name: String) -> bool {
        let Some(policy) = &self.policy else { return false };
        // The decision first: a refused name is answered at once, whatever the CA or the store
        // are doing, and names nobody allowed cost no store read.
        if !policy.allows(&name).await {
            self.parts.stats.decided(1);
            return false;
        }
        match self.stored(&name).await {
            Ok(Some(_)) => return true,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(name, error = %e, "on-demand certificate not ordered");
                return false;
            }
        }
        // A handshake at start may come before the account is read or made.
        let mut account = self.account.subscribe();
        let ready = tokio::time::timeout(CA_TIMEOUT, account.wait_for(Option::is_some)).await;
        let Some(account) = ready.ok().and_then(|r| r.ok()).and_then(|a| a.clone()) else { return false };
        let guard = match self.parts.locks.try_take(&name).await {
            Ok(Some(g)) => g,
            // Another node orders it: its certificate is in the store soon.
            Ok(None) => return self.wait_stored(&name).await,
            Err(e) => {
                tracing::warn!(name, error = %e, "on-demand certificate not ordered");
                return false;
            }
        };
        if !policy.take_order(self.parts.locks.cluster().map(|c| c.as_ref())).await {
            self.parts.stats.decided(2);
            guard.release().await;
            tracing::warn!(name, "on-demand certificate refused: over tls.acme.on_demand.rate");
            return false;
        }
        self.parts.stats.decided(0);
        let ordered = self.order_locked(&account, &name, None, None).await;
        guard.release().await;
        if let Err(e) = ordered {
            tracing::error!(name, error = %e, "on-demand certificate not obtained");
            self.note(&name, |s| {
                s.source = "on-demand".into();
                s.last_error = Some(e.to_string());
            });
            self.publish(&name).await;
            return false;
        }
        if let Err(e) = self.parts.keep.record_on_demand(&name).await {
            tracing::warn!(name, error = %e, "on-demand name not recorded; it renews at its next handshake after a restart");
        }
        tokio::spawn(self.clone().keep(account, name));
        true
    }

    /// Whether the store holds `name` within a bounded wait (another node's order).
    async fn wait_stored(&self, name: &str) -> bool {
        let deadline = tokio::time::Instant::now() + crate::lock::LOCK_TTL * 2;
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.stored(name).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        false
    }

    /// One look at `name`: renews it when due, else says how long to sleep.
    async fn step(&self, account: &Account, name: &str) -> Result<Duration, AcmeError> {
        let now = now_secs();
        let current = self.stored(name).await?;
        let forced = self.forced.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        let replaces = match &current {
            Some(b) => {
                self.note(name, |s| {
                    s.not_after = Some(b.facts.not_after);
                    s.issuer = Some(b.facts.issuer.clone());
                });
                let (at, recheck, ari) = self.due(account, name, b).await;
                self.note(name, |s| s.next_renewal = Some(at));
                if at > now && !forced {
                    return Ok(Duration::from_secs((at - now) as u64).min(recheck));
                }
                b.certified.cert.first().and_then(|c| certificate_id(c.as_ref())).filter(|_| ari)
            }
            None => None,
        };
        let Some(guard) = self.parts.locks.try_take(name).await? else {
            // Another node is ordering it: look again soon, and see its certificate.
            return Ok(OTHERS_ORDER);
        };
        let result = self.order_locked(account, name, current.as_deref(), replaces).await;
        guard.release().await;
        result
    }

    /// Orders `name` under its lock, unless the store got a newer certificate meanwhile.
    async fn order_locked(
        &self,
        account: &Account,
        name: &str,
        seen: Option<&Bundle>,
        replaces: Option<CertificateIdentifier<'static>>,
    ) -> Result<Duration, AcmeError> {
        let now_stored = self.stored(name).await?;
        if now_stored.as_ref().map(|b| b.facts.serial.as_str()) != seen.map(|b| b.facts.serial.as_str()) {
            // Another node renewed it between our look and the lock.
            return Ok(Duration::ZERO);
        }
        let _permit = self.orders.acquire().await.map_err(|_| AcmeError::Local("shutting down".into()))?;
        let started = std::time::Instant::now();
        let acme = &self.parts.stats;
        // The certificate renewed in the CA's window, named on the new order (RFC 9773 §5).
        let replacing = replaces.as_ref().map(|r| r.to_string());
        let settings = &self.parts.settings;
        // Challenge types are tried in the configured order: when the CA finds one failed, a new
        // order is placed at once with the next one it can use, until none is left.
        let mut skip = Vec::new();
        let issued = loop {
            match issue(account, settings, &self.parts.board, name, replaces.clone(), &skip).await {
                Ok(issued) => {
                    acme.validated(issued.challenge, true);
                    break issued;
                }
                Err(e) => {
                    acme.orders_failed.inc();
                    if let Some(c) = e.failed_challenge() {
                        acme.validated(c, false);
                    }
                    let failed =
                        e.failed_challenge().and_then(|f| settings.challenges.iter().find(|c| c.as_str() == f));
                    let Some(failed) = failed.filter(|_| !name.starts_with("*.")) else { return Err(e) };
                    skip.push(*failed);
                    let next = settings
                        .challenges
                        .iter()
                        .find(|c| !skip.contains(c) && (**c != AcmeChallenge::Dns01 || settings.dns01.is_some()));
                    let Some(next) = next else { return Err(e) };
                    tracing::warn!(name, error = %e, next = next.as_str(), "ACME validation failed; ordering again with the next challenge type");
                }
            }
        };
        acme.orders_valid.inc();
        let imported = self
            .parts
            .catalog
            .import(issued.pem.as_bytes(), now_secs())
            .await
            .map_err(|e| AcmeError::Local(format!("the store refused the issued certificate: {e}")))?;
        if let Catalog::Dir(_) = self.parts.catalog {
            let certs = self.parts.certs.clone();
            let _ = tokio::task::spawn_blocking(move || certs.scan_dir()).await;
        }
        self.parts.certs.invalidate([name]);
        tracing::info!(
            name,
            order = %issued.order,
            not_after = imported.facts.not_after,
            place = %imported.place,
            replaces = replacing.as_deref().unwrap_or("-"),
            ms = started.elapsed().as_millis() as u64,
            "ACME certificate issued"
        );
        self.note(name, |s| {
            s.not_after = Some(imported.facts.not_after);
            s.issuer = Some(imported.facts.issuer.clone());
            s.last_error = None;
        });
        Ok(Duration::ZERO)
    }
}

impl gatehouse_tls::on_demand::OnDemand for Manager {
    fn obtain<'a>(&'a self, name: &'a str) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            if self.policy.is_none() || self.stopped.load(Relaxed) {
                return false;
            }
            if !is_orderable(name) {
                self.parts.stats.decided(3);
                return false;
            }
            let (Some(me), Some(runtime)) = (self.me.upgrade(), self.runtime.get()) else { return false };
            let mut outcome = {
                let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
                match inflight.get(name) {
                    Some(rx) => rx.clone(),
                    None => {
                        // The first handshake for the name starts the order, on the manager's
                        // runtime: it goes on if this handshake gives up waiting.
                        let (tx, rx) = watch::channel(None);
                        inflight.insert(name.to_string(), rx.clone());
                        let name = name.to_string();
                        runtime.spawn(async move {
                            let got = me.clone().order_on_demand(name.clone()).await;
                            me.inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&name);
                            let _ = tx.send(Some(got));
                        });
                        rx
                    }
                }
            };
            loop {
                if let Some(got) = *outcome.borrow_and_update() {
                    return got;
                }
                if outcome.changed().await.is_err() {
                    return false;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_window_is_before_expiry() {
        let day = 86_400;
        // 90 days, renew 30 days ahead: days 60 to 70.
        assert_eq!(fallback_window(0, 90 * day, Duration::from_secs(30 * 86_400)), (60 * day, 70 * day));
        // 6 days: two thirds in (day 4), ending a third of the way to expiry.
        let (start, end) = fallback_window(0, 6 * day, Duration::from_secs(30 * 86_400));
        assert_eq!(start, 4 * day);
        assert!(end > start && end < 6 * day);
        // A CA window reaching expiry stops a sixth of the validity short of it.
        assert_eq!(within_validity((0, 60), 0, 60), (0, 50));
        assert_eq!(within_validity((10 * day, 12 * day), 0, 90 * day), (10 * day, 12 * day));
        assert_eq!(within_validity((80 * day, 95 * day), 0, 90 * day), (75 * day, 75 * day));
        for _ in 0..100 {
            let at = random_point(start, end);
            assert!((start..=end).contains(&at));
        }
    }
}
