//! Admit stage, after the signature: the registered claims of a token and whether they admit it now.

use serde_json::{Map, Value};

use crate::JwtError;

/// The claims set of a token: the registered claims the gateway checks, typed, and the whole object.
///
/// Built by [`decode`](crate::decode) only, which has already refused wrongly typed registered claims; a `Claims`
/// seen before [`Token::verify`](crate::Token::verify) succeeded is attacker-controlled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claims {
    /// `iss`: who issued the token.
    pub iss: Option<String>,
    /// `sub`: whom the token is about.
    pub sub: Option<String>,
    /// `aud`: whom the token is for. JSON allows a string or an array of strings; a string becomes one entry.
    pub aud: Vec<String>,
    /// `exp`: expiry, seconds since the Unix epoch (a fractional JSON number is truncated toward zero).
    pub exp: Option<i64>,
    /// `nbf`: not valid before, seconds since the Unix epoch.
    pub nbf: Option<i64>,
    /// `iat`: issued at, seconds since the Unix epoch. Read, not checked.
    pub iat: Option<i64>,
    raw: Map<String, Value>,
}

impl Claims {
    /// Types the registered claims of a parsed payload object.
    pub(crate) fn from_object(raw: Map<String, Value>) -> Result<Self, JwtError> {
        Ok(Self {
            iss: string_claim(&raw, "iss")?,
            sub: string_claim(&raw, "sub")?,
            aud: audience(&raw)?,
            exp: numeric_date(&raw, "exp")?,
            nbf: numeric_date(&raw, "nbf")?,
            iat: numeric_date(&raw, "iat")?,
            raw,
        })
    }

    /// The claim `name` if it is a JSON string: `sub`, or a custom claim naming the application the token is for.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.raw.get(name).and_then(Value::as_str)
    }

    /// The whole claims object as received, registered claims included.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// Whether the claims admit the token at `now_unix_secs`.
    ///
    /// In this order: `exp` absent while required → [`JwtError::MissingExpiry`]; `now > exp + leeway` →
    /// [`JwtError::Expired`] (so a token is still good in the second `exp + leeway`); `now + leeway < nbf` →
    /// [`JwtError::NotYetValid`]; then `iss` must equal [`Validation::issuer`] and some `aud` entry must equal
    /// [`Validation::audience`], when those are set.
    pub fn validate(&self, now_unix_secs: i64, v: &Validation) -> Result<(), JwtError> {
        let leeway = i64::try_from(v.leeway_secs).unwrap_or(i64::MAX);
        match self.exp {
            None if v.require_exp => return Err(JwtError::MissingExpiry),
            Some(exp) if now_unix_secs > exp.saturating_add(leeway) => return Err(JwtError::Expired),
            _ => {}
        }
        if self.nbf.is_some_and(|nbf| now_unix_secs.saturating_add(leeway) < nbf) {
            return Err(JwtError::NotYetValid);
        }
        if let Some(issuer) = &v.issuer {
            if self.iss.as_deref() != Some(issuer.as_str()) {
                return Err(JwtError::WrongIssuer);
            }
        }
        if let Some(audience) = &v.audience {
            if !self.aud.iter().any(|aud| aud == audience) {
                return Err(JwtError::WrongAudience);
            }
        }
        Ok(())
    }
}

/// What [`Claims::validate`] requires of a token, fixed per route at config load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    /// Seconds of clock skew forgiven on `exp` and `nbf`.
    pub leeway_secs: u64,
    /// The exact `iss` required, if any.
    pub issuer: Option<String>,
    /// A value some `aud` entry must equal, if any.
    pub audience: Option<String>,
    /// Refuse tokens without `exp`: a token that never expires cannot be revoked by waiting.
    pub require_exp: bool,
}

impl Default for Validation {
    /// No leeway, no issuer or audience check, `exp` required.
    fn default() -> Self {
        Self { leeway_secs: 0, issuer: None, audience: None, require_exp: true }
    }
}

fn string_claim(raw: &Map<String, Value>, name: &str) -> Result<Option<String>, JwtError> {
    match raw.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(JwtError::Malformed("iss or sub is not a string")),
    }
}

fn audience(raw: &Map<String, Value>) -> Result<Vec<String>, JwtError> {
    const NOT_STRINGS: JwtError = JwtError::Malformed("aud is not a string or an array of strings");
    match raw.get("aud") {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => {
            items.iter().map(|item| item.as_str().map(str::to_owned).ok_or(NOT_STRINGS)).collect()
        }
        Some(_) => Err(NOT_STRINGS),
    }
}

/// A NumericDate (RFC 7519 §2): any JSON number, fractions truncated, out-of-range values saturated.
fn numeric_date(raw: &Map<String, Value>, name: &str) -> Result<Option<i64>, JwtError> {
    match raw.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(secs) => Ok(Some(secs)),
            // `as` truncates toward zero and saturates; JSON has no NaN.
            None => Ok(n.as_f64().map(|secs| secs as i64)),
        },
        Some(_) => Err(JwtError::Malformed("exp, nbf or iat is not a number")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claims(value: Value) -> Result<Claims, JwtError> {
        match value {
            Value::Object(map) => Claims::from_object(map),
            _ => panic!("test claims must be an object"),
        }
    }

    fn lenient() -> Validation {
        Validation { require_exp: false, ..Validation::default() }
    }

    #[test]
    fn registered_claims_are_typed() {
        let c = claims(json!({"iss": "i", "sub": "s", "aud": "a", "exp": 10, "nbf": 2.9, "iat": -1.9, "app": "x"}))
            .expect("valid claims");
        assert_eq!(
            (c.iss.as_deref(), c.sub.as_deref(), c.aud.clone(), c.exp, c.nbf, c.iat),
            (Some("i"), Some("s"), vec!["a".to_owned()], Some(10), Some(2), Some(-1))
        );
        assert_eq!(c.get_str("app"), Some("x"));
        assert_eq!(c.get_str("sub"), Some("s"));
        assert_eq!(c.get_str("exp"), None);
        assert_eq!(c.get_str("nope"), None);
        assert_eq!(c.raw().len(), 7);

        let c = claims(json!({"aud": ["a", "b"], "exp": 1e300, "nbf": 18446744073709551615u64})).expect("valid");
        assert_eq!((c.aud.len(), c.exp, c.nbf), (2, Some(i64::MAX), Some(i64::MAX)));
        assert_eq!(claims(json!({"aud": []})).expect("empty aud").aud, Vec::<String>::new());
    }

    #[test]
    fn wrongly_typed_registered_claims_are_malformed() {
        for bad in [
            json!({"exp": "10"}),
            json!({"nbf": null}),
            json!({"iat": true}),
            json!({"exp": [1]}),
            json!({"iss": 1}),
            json!({"sub": {}}),
            json!({"aud": 1}),
            json!({"aud": ["a", 1]}),
            json!({"aud": null}),
        ] {
            assert!(matches!(claims(bad.clone()), Err(JwtError::Malformed(_))), "{bad}");
        }
    }

    #[test]
    fn expiry_boundaries_are_exact() {
        let c = claims(json!({"exp": 100})).expect("valid");
        assert_eq!(c.validate(100, &lenient()), Ok(()));
        assert_eq!(c.validate(101, &lenient()), Err(JwtError::Expired));
        let leeway = Validation { leeway_secs: 5, ..lenient() };
        assert_eq!(c.validate(105, &leeway), Ok(()));
        assert_eq!(c.validate(106, &leeway), Err(JwtError::Expired));
        let huge = Validation { leeway_secs: u64::MAX, ..lenient() };
        assert_eq!(c.validate(i64::MAX, &huge), Ok(()));
    }

    #[test]
    fn not_before_boundaries_are_exact() {
        let c = claims(json!({"nbf": 100})).expect("valid");
        assert_eq!(c.validate(100, &lenient()), Ok(()));
        assert_eq!(c.validate(99, &lenient()), Err(JwtError::NotYetValid));
        let leeway = Validation { leeway_secs: 5, ..lenient() };
        assert_eq!(c.validate(95, &leeway), Ok(()));
        assert_eq!(c.validate(94, &leeway), Err(JwtError::NotYetValid));
        assert_eq!(c.validate(0, &Validation { leeway_secs: u64::MAX, ..lenient() }), Ok(()));
    }

    #[test]
    fn missing_expiry_only_when_required() {
        let c = claims(json!({"sub": "s"})).expect("valid");
        assert_eq!(c.validate(0, &Validation::default()), Err(JwtError::MissingExpiry));
        assert_eq!(c.validate(0, &lenient()), Ok(()));
    }

    #[test]
    fn issuer_must_match_when_set() {
        let v = Validation { issuer: Some("https://idp".into()), ..lenient() };
        assert_eq!(claims(json!({"iss": "https://idp"})).expect("valid").validate(0, &v), Ok(()));
        assert_eq!(claims(json!({"iss": "https://idp/"})).expect("valid").validate(0, &v), Err(JwtError::WrongIssuer));
        assert_eq!(claims(json!({})).expect("valid").validate(0, &v), Err(JwtError::WrongIssuer));
        assert_eq!(claims(json!({"iss": "x"})).expect("valid").validate(0, &lenient()), Ok(()));
    }

    #[test]
    fn audience_matches_any_entry() {
        let v = Validation { audience: Some("api".into()), ..lenient() };
        assert_eq!(claims(json!({"aud": "api"})).expect("valid").validate(0, &v), Ok(()));
        assert_eq!(claims(json!({"aud": ["web", "api"]})).expect("valid").validate(0, &v), Ok(()));
        assert_eq!(
            claims(json!({"aud": ["web", "API"]})).expect("valid").validate(0, &v),
            Err(JwtError::WrongAudience)
        );
        assert_eq!(claims(json!({"aud": []})).expect("valid").validate(0, &v), Err(JwtError::WrongAudience));
        assert_eq!(claims(json!({})).expect("valid").validate(0, &v), Err(JwtError::WrongAudience));
    }

    #[test]
    fn time_is_checked_before_identity() {
        let v = Validation { issuer: Some("i".into()), audience: Some("a".into()), ..Validation::default() };
        let c = claims(json!({"exp": 10, "nbf": 5, "iss": "other", "aud": "other"})).expect("valid");
        assert_eq!(c.validate(11, &v), Err(JwtError::Expired));
        assert_eq!(c.validate(4, &v), Err(JwtError::NotYetValid));
        assert_eq!(c.validate(7, &v), Err(JwtError::WrongIssuer));
    }
}
