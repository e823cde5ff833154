//! Why an ACME step failed, with what the CA said (its problem document) when it said anything.

/// Why an ACME step failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum AcmeError {
    /// The CA refused or could not be reached.
    Ca {
        /// The step.
        what: &'static str,
        /// The client's error; for a refusal, the CA's problem document.
        source: instant_acme::Error,
    },
    /// The CA did not answer in time.
    TimedOut(&'static str),
    /// The CA offers no challenge type this node answers for the name.
    NoChallenge {
        /// The name.
        name: String,
        /// What the CA offered.
        offered: Vec<String>,
    },
    /// The CA found the name's challenge not answered as it should be.
    Invalid {
        /// The name.
        name: String,
        /// The challenge type.
        challenge: &'static str,
        /// The CA's problem document, as text.
        problem: String,
    },
    /// The cluster's Redis failed (locks, the account).
    Redis(gatehouse_redis::Error),
    /// Something on this node: a file, a key, a certificate the store refused.
    Local(String),
    /// A failure within an order, with the order's URL and the challenge type answered with.
    InOrder {
        /// The order's URL.
        order: String,
        /// The challenge type, once one was chosen.
        challenge: Option<&'static str>,
        /// What failed.
        source: Box<AcmeError>,
    },
}

/// How many more times a request the CA refused for its nonce is sent again, beyond the client's
/// own retries (instant-acme sends each request at most three times). A CA may refuse any nonce
/// (RFC 8555 §6.5: `badNonce` is retried by the client); Let's Encrypt's and Pebble's refuse a few
/// per cent on purpose, and an order is a dozen requests.
pub(crate) const NONCE_RETRIES: u32 = 5;

/// Whether the CA refused the request for its nonce (`badNonce`), so that sending it again helps.
pub(crate) fn bad_nonce(e: &instant_acme::Error) -> bool {
    matches!(e, instant_acme::Error::Api(p) if p.r#type.as_deref() == Some("urn:ietf:params:acme:error:badNonce"))
}

/// Evaluates `$call` (a request to the CA, `.await`ed) again while the CA refuses its nonce, at
/// most [`NONCE_RETRIES`] more times; its last result.
macro_rules! nonce_retried {
    ($call:expr) => {{
        let mut left = $crate::error::NONCE_RETRIES;
        loop {
            match $call {
                Err(e) if left > 0 && $crate::error::bad_nonce(&e) => {
                    left -= 1;
                    tracing::debug!("the CA refused the nonce; sending again");
                }
                r => break r,
            }
        }
    }};
}
pub(crate) use nonce_retried;

/// Sends a request to the CA (`$call`, evaluated again for each try) within
/// [`CA_TIMEOUT`](crate::account::CA_TIMEOUT) per try, again when the CA refused its nonce; the
/// step is named `$what` in the error.
macro_rules! ca_call {
    ($what:expr, $call:expr) => {{
        let r = $crate::error::nonce_retried!(match tokio::time::timeout($crate::account::CA_TIMEOUT, $call).await {
            Ok(r) => r.map(Some),
            Err(_) => Ok(None),
        });
        match r {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err($crate::error::AcmeError::TimedOut($what)),
            Err(e) => Err($crate::error::AcmeError::ca($what)(e)),
        }
    }};
}
pub(crate) use ca_call;

impl AcmeError {
    /// The challenge type whose validation the CA found failed, for an order that failed so.
    pub fn failed_challenge(&self) -> Option<&'static str> {
        match self {
            AcmeError::InOrder { source, .. } => source.failed_challenge(),
            AcmeError::Invalid { challenge, .. } => Some(challenge),
            _ => None,
        }
    }

    /// Wraps a client error met at step `what`.
    pub(crate) fn ca(what: &'static str) -> impl FnOnce(instant_acme::Error) -> AcmeError {
        move |source| AcmeError::Ca { what, source }
    }
}

/// A problem document as one line: type, detail, status and subproblems.
pub(crate) fn problem_text(p: &instant_acme::Problem) -> String {
    let mut out =
        format!("{} {}", p.r#type.as_deref().unwrap_or("(no type)"), p.detail.as_deref().unwrap_or("(no detail)"));
    if let Some(status) = p.status {
        out.push_str(&format!(" (status {status})"));
    }
    for sub in &p.subproblems {
        out.push_str(&format!(
            "; {}: {}",
            sub.r#type.as_deref().unwrap_or("(no type)"),
            sub.detail.as_deref().unwrap_or("(no detail)")
        ));
    }
    out
}

impl std::fmt::Display for AcmeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AcmeError::Ca { what, source: instant_acme::Error::Api(p) } => {
                write!(f, "cannot {what}: the CA answered {}", problem_text(p))
            }
            AcmeError::Ca { what, source } => write!(f, "cannot {what}: {source}"),
            AcmeError::TimedOut(what) => write!(f, "cannot {what}: the CA did not answer in time"),
            AcmeError::NoChallenge { name, offered } => {
                write!(f, "{name}: the CA offers {}, none of the configured challenges", offered.join(", "))
            }
            AcmeError::Invalid { name, challenge, problem } => {
                write!(f, "{name}: {challenge} validation failed: {problem}")
            }
            AcmeError::Redis(e) => write!(f, "redis: {e}"),
            AcmeError::Local(e) => f.write_str(e),
            AcmeError::InOrder { order, challenge: Some(c), source } => write!(f, "order {order} ({c}): {source}"),
            AcmeError::InOrder { order, challenge: None, source } => write!(f, "order {order}: {source}"),
        }
    }
}

impl std::error::Error for AcmeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AcmeError::Ca { source, .. } => Some(source),
            AcmeError::Redis(e) => Some(e),
            AcmeError::InOrder { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
