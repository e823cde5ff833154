//! One order for one name (RFC 8555 §7.4): authorizations answered with the first configured
//! challenge the CA offers, the answers published on the [`Board`] (so any node can give them),
//! then a CSR for a new ECDSA P-256 key, and the chain.

use crate::error::{ca_call, nonce_retried, problem_text, AcmeError};
use crate::settings::Settings;
use gatehouse_config::AcmeChallenge;
use gatehouse_tls::challenge::{Board, Kind};
use instant_acme::{
    Account, AuthorizationStatus, CertificateIdentifier, ChallengeType, Identifier, NewOrder, OrderStatus, RetryPolicy,
};
use std::time::Duration;

/// How long the CA is given to validate and to issue.
const VALIDATION_TIMEOUT: Duration = Duration::from_secs(120);

fn challenge_type(c: AcmeChallenge) -> ChallengeType {
    match c {
        AcmeChallenge::Http01 => ChallengeType::Http01,
        AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
        AcmeChallenge::Dns01 => ChallengeType::Dns01,
    }
}

fn type_name(t: &ChallengeType) -> String {
    match t {
        ChallengeType::Http01 => "http-01".into(),
        ChallengeType::Dns01 => "dns-01".into(),
        ChallengeType::TlsAlpn01 => "tls-alpn-01".into(),
        other => format!("{other:?}"),
    }
}

/// A certificate issued for a name: the chain (PEM, leaf first) followed by its key.
pub struct Issued {
    /// Chain and key, PEM, as the store takes them.
    pub pem: String,
    /// The order's URL, for the log.
    pub order: String,
    /// The challenge type the CA validated.
    pub challenge: &'static str,
}

/// An answer published for the order.
enum Answer {
    /// On the challenge board: its kind and id.
    Board(Kind, String),
    /// A TXT record: its name and value.
    Dns(String, String),
}

/// The answers published for the order, withdrawn when the order is over.
struct Published<'a> {
    board: &'a Board,
    dns01: Option<&'a crate::dns01::Updater>,
    answers: Vec<Answer>,
}

impl Published<'_> {
    async fn withdraw(self) {
        for answer in &self.answers {
            match answer {
                Answer::Board(kind, id) => self.board.withdraw(*kind, id).await,
                Answer::Dns(fqdn, value) => {
                    if let Some(u) = self.dns01 {
                        if let Err(e) = u.remove(fqdn, value).await {
                            tracing::warn!(record = %fqdn, error = %e, "dns-01 record not removed");
                        }
                    }
                }
            }
        }
    }
}

/// Orders a certificate for `name`; `replaces` names the certificate it renews (ARI); challenge
/// types in `skip` (failed in an earlier order) are not answered with.
pub async fn issue(
    account: &Account,
    settings: &Settings,
    board: &Board,
    name: &str,
    replaces: Option<CertificateIdentifier<'static>>,
    skip: &[AcmeChallenge],
) -> Result<Issued, AcmeError> {
    let identifiers = [Identifier::Dns(name.to_string())];
    let mut new = NewOrder::new(&identifiers);
    if let Some(p) = &settings.profile {
        new = new.profile(p);
    }
    if let Some(r) = replaces {
        new = new.replaces(r);
    }
    let mut order = ca_call!("place the order", account.new_order(&new))?;
    let url = order.url().to_string();
    let mut published = Published { board, dns01: settings.dns01.as_deref(), answers: Vec::new() };
    let mut chosen = None;
    let answered = answer(&mut order, settings, name, &mut published, &mut chosen, skip).await;
    let result = match answered {
        Ok(()) => finish(&mut order, name, chosen.unwrap_or("none")).await,
        Err(e) => Err(e),
    };
    published.withdraw().await;
    let pem = result.map_err(|e| AcmeError::InOrder { order: url.clone(), challenge: chosen, source: Box::new(e) })?;
    Ok(Issued { pem, order: url, challenge: chosen.unwrap_or("none") })
}

/// Answers every pending authorization of `order`; `chosen` is the challenge type answered with,
/// for the log.
async fn answer(
    order: &mut instant_acme::Order,
    settings: &Settings,
    name: &str,
    published: &mut Published<'_>,
    chosen: &mut Option<&'static str>,
    skip: &[AcmeChallenge],
) -> Result<(), AcmeError> {
    // The authorizations answered, by URL: reading one may be refused for its nonce, and the
    // walk then starts again without answering any twice.
    let mut done: Vec<String> = Vec::new();
    let mut nonce_retries = crate::error::NONCE_RETRIES;
    'walk: loop {
        let mut authorizations = order.authorizations();
        while let Some(authz) = authorizations.next().await {
            let authz = match authz {
                Ok(a) => a,
                Err(e) if nonce_retries > 0 && crate::error::bad_nonce(&e) => {
                    nonce_retries -= 1;
                    continue 'walk;
                }
                Err(e) => return Err(AcmeError::ca("read an authorization")(e)),
            };
            if done.iter().any(|u| u == authz.url()) {
                continue;
            }
            let url = authz.url().to_string();
            answer_one(authz, settings, name, published, chosen, skip).await?;
            done.push(url);
        }
        return Ok(());
    }
}

/// Answers one authorization with the first configured challenge type the CA offers for it.
async fn answer_one(
    mut authz: instant_acme::AuthorizationHandle<'_>,
    settings: &Settings,
    name: &str,
    published: &mut Published<'_>,
    chosen: &mut Option<&'static str>,
    skip: &[AcmeChallenge],
) -> Result<(), AcmeError> {
    {
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => return Ok(()),
            other => {
                return Err(AcmeError::Invalid {
                    name: name.into(),
                    challenge: "authorization",
                    problem: format!("the authorization is {other:?}"),
                })
            }
        }
        let offered: Vec<ChallengeType> = authz.challenges.iter().map(|c| c.r#type.clone()).collect();
        // A wildcard is validated by dns-01 only (RFC 8555 §7.1.3); dns-01 needs `dns01`.
        let usable = |c: &AcmeChallenge| {
            !skip.contains(c)
                && match c {
                    AcmeChallenge::Dns01 => settings.dns01.is_some(),
                    _ => !authz.wildcard,
                }
        };
        let wildcard_way = [AcmeChallenge::Dns01];
        let ways = if authz.wildcard { &wildcard_way[..] } else { &settings.challenges[..] };
        let Some((wanted, way)) = ways.iter().filter(|c| usable(c)).find_map(|c| {
            let t = challenge_type(*c);
            offered.contains(&t).then_some((t, *c))
        }) else {
            return Err(AcmeError::NoChallenge { name: name.into(), offered: offered.iter().map(type_name).collect() });
        };
        let mut challenge =
            authz.challenge(wanted).ok_or_else(|| AcmeError::Local("the offered challenge went away".into()))?;
        let key_authorization = challenge.key_authorization();
        let board = |e: gatehouse_tls::challenge::BoardError| AcmeError::Local(e.to_string());
        match way {
            AcmeChallenge::Http01 => {
                let token = challenge.token.clone();
                published.board.publish(Kind::Http01, &token, key_authorization.as_str()).await.map_err(board)?;
                published.answers.push(Answer::Board(Kind::Http01, token));
            }
            AcmeChallenge::TlsAlpn01 => {
                let id = challenge.identifier().to_string();
                published.board.publish(Kind::TlsAlpn01, &id, key_authorization.as_str()).await.map_err(board)?;
                published.answers.push(Answer::Board(Kind::TlsAlpn01, id));
            }
            AcmeChallenge::Dns01 => {
                let Some(updater) = published.dns01 else {
                    return Err(AcmeError::Local("dns-01 without dns01".into()));
                };
                let fqdn = crate::dns01::Updater::record_name(&challenge.identifier().to_string());
                let value = key_authorization.dns_value();
                updater.add(&fqdn, &value).await?;
                published.answers.push(Answer::Dns(fqdn, value));
                tokio::time::sleep(updater.propagation_wait).await;
            }
        }
        *chosen = Some(way.as_str());
        ca_call!("ask for validation", challenge.set_ready())?;
    }
    Ok(())
}

/// Waits for validation, sends the CSR and fetches the chain; the chain and key as PEM.
async fn finish(order: &mut instant_acme::Order, name: &str, challenge: &'static str) -> Result<String, AcmeError> {
    // Polled soon and then less often: a CA that validates at once (Pebble, a private CA) answers an
    // on-demand handshake in a few hundred milliseconds, one that takes seconds is asked a few times.
    let retries = RetryPolicy::new().initial_delay(Duration::from_millis(100)).backoff(1.5).timeout(VALIDATION_TIMEOUT);
    let status = match nonce_retried!(order.poll_ready(&retries).await) {
        Ok(s) => s,
        Err(e) => return Err(validation_failed(e, name, challenge)),
    };
    if status != OrderStatus::Ready {
        let problem = authorization_problem(order).await.unwrap_or_else(|| format!("the order is {status:?}"));
        return Err(AcmeError::Invalid { name: name.into(), challenge, problem });
    }
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| AcmeError::Local(format!("cannot make a key: {e}")))?;
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()])
        .map_err(|e| AcmeError::Local(format!("cannot make the CSR: {e}")))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let csr = params.serialize_request(&key).map_err(|e| AcmeError::Local(format!("cannot make the CSR: {e}")))?;
    ca_call!("finalize the order", order.finalize_csr(csr.der()))?;
    let chain =
        nonce_retried!(order.poll_certificate(&retries).await).map_err(AcmeError::ca("download the certificate"))?;
    Ok(format!("{}{}", chain.trim_end_matches('\n').to_string() + "\n", key.serialize_pem()))
}

/// A failed wait for validation: the CA's problem document on the order is the validation's
/// failure; anything else (the CA unreachable, the wait over) is not.
fn validation_failed(e: instant_acme::Error, name: &str, challenge: &'static str) -> AcmeError {
    match e {
        instant_acme::Error::Api(p) => AcmeError::Invalid { name: name.into(), challenge, problem: problem_text(&p) },
        e => AcmeError::Ca { what: "wait for validation", source: e },
    }
}

/// The first problem an authorization of `order` reports (the CA's reason for an invalid order).
async fn authorization_problem(order: &mut instant_acme::Order) -> Option<String> {
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authz)) = authorizations.next().await {
        let state = authz.refresh().await.ok()?;
        for c in &state.challenges {
            if let Some(p) = &c.error {
                return Some(format!("{}: {}", type_name(&c.r#type), problem_text(p)));
            }
        }
    }
    None
}
