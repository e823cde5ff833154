//! Validate stage: the request's path made normal once, before anything reads it
//! (`gatehouse-path`; docs/security.md, "Paths"). Routing, the service's guards, the access log
//! and the backend then all see the same path.

use gatehouse_path::{Rejected, Rules};
use http::uri::{PathAndQuery, Uri};
use http::Request;

/// What normalizing did to a request's target.
#[derive(Debug)]
pub(crate) enum PathState {
    /// The path was normal already.
    Same,
    /// The target now holds the normalized path; this is the client's (boxed: the state is
    /// kept in every request's future, and nearly every request has `Same`).
    Normalized {
        /// The target as the client sent it.
        raw: Box<Uri>,
    },
    /// The path cannot be made normal; the target is the client's.
    Refused(Rejected),
}

/// Puts the normalized path into `req`'s target (the query kept as it is).
pub(crate) fn normalize<B>(req: &mut Request<B>, rules: Rules) -> PathState {
    let uri = req.uri();
    let new_pq = match gatehouse_path::normalize(uri.path(), rules) {
        Ok(std::borrow::Cow::Borrowed(_)) => return PathState::Same,
        Err(why) => return PathState::Refused(why),
        Ok(std::borrow::Cow::Owned(mut path)) => {
            if let Some(q) = uri.query() {
                path.push('?');
                path.push_str(q);
            }
            match PathAndQuery::try_from(path) {
                Ok(pq) => pq,
                // The normalizer only removes and decodes: what it makes is a valid target.
                Err(_) => return PathState::Refused(Rejected::InvalidEscape),
            }
        }
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(new_pq);
    match Uri::from_parts(parts) {
        Ok(new) => PathState::Normalized { raw: Box::new(std::mem::replace(req.uri_mut(), new)) },
        Err(_) => PathState::Refused(Rejected::InvalidEscape),
    }
}
