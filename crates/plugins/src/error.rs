//! Admit stage, compiled off the request path: why the gateway part of a configuration does not
//! compile. Validation refuses most of these first; what is left for compiling to find is a key
//! file that cannot be read, or key material the crypto library refuses.

use gatehouse_jwt::KeyError;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Why [`crate::Gateway::build`] refused a configuration. The message names the place in the file.
#[derive(Debug)]
#[non_exhaustive]
pub enum GatewayError {
    /// Several apps' keys could not be read or used, each its own error (one a line).
    Several(Vec<GatewayError>),
    /// An app is granted a service that does not exist.
    UnknownService {
        /// The app.
        app: String,
        /// The service it names.
        service: String,
    },
    /// An app's grant names a plan that does not exist.
    UnknownPlan {
        /// The app.
        app: String,
        /// The plan it names.
        plan: String,
    },
    /// An app's `secret` is refused as an HMAC key.
    Secret {
        /// The app.
        app: String,
        /// Why.
        source: KeyError,
    },
    /// A JWT key names an algorithm that is not verified here.
    UnsupportedAlgorithm {
        /// The app.
        app: String,
        /// The key's index in `jwt_keys`.
        key: usize,
        /// The algorithm as written.
        alg: String,
    },
    /// The public key file of a JWT key cannot be read.
    ReadPublicKey {
        /// The app.
        app: String,
        /// The key's index in `jwt_keys`.
        key: usize,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A JWT key gives the wrong material for its algorithm.
    KeyMaterial {
        /// The app.
        app: String,
        /// The key's index in `jwt_keys`.
        key: usize,
    },
    /// A JWT key's secret or public key is refused.
    JwtKey {
        /// The app.
        app: String,
        /// The key's index in `jwt_keys`.
        key: usize,
        /// Why.
        source: KeyError,
    },
    /// An app id that cannot be sent as a header value.
    AppIdNotHeaderValue {
        /// The app.
        app: String,
    },
    /// A `key_sha256` that is not 64 hex digits.
    KeySha256NotHex {
        /// The app.
        app: String,
    },
    /// Two apps have the same key.
    SameKey {
        /// The app compiled second.
        app: String,
        /// The app that has the key already.
        other: Arc<str>,
    },
    /// A `scope: cluster` rate limit where there is no Redis to count in.
    ClusterLimitWithoutRedis {
        /// The limit's index in `rate_limits`.
        limit: usize,
    },
    /// A JWT issuer's key-set CA file cannot be read or holds no certificate.
    JwksCa {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A service's `external` cannot be compiled (a URL, a header name, its CA file).
    External {
        /// Why.
        reason: String,
    },
    /// A JWT issuer's plan does not exist.
    UnknownJwtPlan {
        /// The plan it names.
        plan: String,
    },
    /// A header name that is not a token.
    NotAHeaderName {
        /// The name as written.
        name: String,
    },
    /// A header value with a byte a header cannot carry.
    InvalidHeaderValue {
        /// The header's name.
        name: String,
    },
    /// A header rewrite was refused.
    Headers {
        /// `request` or `response`.
        direction: &'static str,
        /// Why.
        source: Box<GatewayError>,
    },
    /// A service name that cannot be sent in a `WWW-Authenticate` header.
    ServiceNameNotHeaderValue,
    /// A service's `app_id_header` that is not a header name.
    AppIdHeader {
        /// The name as written.
        header: String,
    },
    /// A plan's plugins were refused.
    Plan {
        /// The plan.
        plan: String,
        /// Why.
        source: Box<GatewayError>,
    },
    /// A service's settings or plugins were refused.
    Service {
        /// The service.
        service: String,
        /// Why.
        source: Box<GatewayError>,
    },
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayError::Several(all) => {
                for (i, e) in all.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            GatewayError::UnknownService { app, service } => write!(f, "apps.{app}: unknown service `{service}`"),
            GatewayError::UnknownPlan { app, plan } => write!(f, "apps.{app}: unknown plan `{plan}`"),
            GatewayError::Secret { app, source } => write!(f, "apps.{app}.secret: {source}"),
            GatewayError::UnsupportedAlgorithm { app, key, alg } => {
                write!(f, "apps.{app}.jwt_keys[{key}].alg: unsupported `{alg}`")
            }
            GatewayError::ReadPublicKey { app, key, path, source } => {
                write!(
                    f,
                    "apps.{app}.jwt_keys[{key}].public_key: cannot read {}: {source}",
                    gatehouse_files::shown(path)
                )
            }
            GatewayError::KeyMaterial { app, key } => {
                write!(
                    f,
                    "apps.{app}.jwt_keys[{key}]: HS256, HS384 and HS512 take a `secret`, the others a `public_key`"
                )
            }
            GatewayError::JwtKey { app, key, source } => write!(f, "apps.{app}.jwt_keys[{key}]: {source}"),
            GatewayError::AppIdNotHeaderValue { app } => write!(f, "apps.{app}: id is not a header value"),
            GatewayError::KeySha256NotHex { app } => write!(f, "apps.{app}.key_sha256: not 64 hex digits"),
            GatewayError::SameKey { app, other } => write!(f, "apps.{app}: the same key as app `{other}`"),
            GatewayError::ClusterLimitWithoutRedis { limit } => {
                write!(f, "rate_limits[{limit}]: `cluster` needs Redis")
            }
            GatewayError::NotAHeaderName { name } => write!(f, "`{name}` is not a header name"),
            GatewayError::JwksCa { path, reason } => {
                write!(f, "jwt.jwks.ca: {}: {reason}", gatehouse_files::shown(path))
            }
            GatewayError::External { reason } => write!(f, "external: {reason}"),
            GatewayError::UnknownJwtPlan { plan } => write!(f, "jwt.plan: unknown plan `{plan}`"),
            GatewayError::InvalidHeaderValue { name } => write!(f, "invalid value for `{name}`"),
            GatewayError::Headers { direction, source } => write!(f, "headers.{direction}: {source}"),
            GatewayError::ServiceNameNotHeaderValue => f.write_str("service name is not a header value"),
            GatewayError::AppIdHeader { header } => write!(f, "app_id_header: `{header}`"),
            GatewayError::Plan { plan, source } => write!(f, "plans.{plan}: {source}"),
            GatewayError::Service { service, source } => write!(f, "services.{service}: {source}"),
        }
    }
}

impl std::error::Error for GatewayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GatewayError::Secret { source, .. } | GatewayError::JwtKey { source, .. } => Some(source),
            GatewayError::ReadPublicKey { source, .. } => Some(source),
            GatewayError::Headers { source, .. }
            | GatewayError::Plan { source, .. }
            | GatewayError::Service { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
