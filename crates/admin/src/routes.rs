//! Which methods each API path takes, read from the OpenAPI document the API serves, so the two
//! cannot disagree: a path the document has, called with a method it lacks, is answered 405 with
//! `Allow` (RFC 9110 §15.5.6); any other path 404.

use crate::api::ApiError;
use http::{Method, StatusCode};
use serde_json::Value;

/// A path template of the document: its segments, `None` for a `{parameter}`, and its methods.
type Template = (Vec<Option<String>>, Vec<String>);

fn templates() -> &'static [Template] {
    static TEMPLATES: std::sync::OnceLock<Vec<Template>> = std::sync::OnceLock::new();
    TEMPLATES.get_or_init(|| {
        let doc: Value = serde_json::from_str(crate::api::openapi()).unwrap_or_default();
        let methods = ["get", "put", "post", "delete", "patch"];
        doc["paths"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(path, item)| {
                let segs = path
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(|s| (!s.starts_with('{')).then(|| s.to_string()))
                    .collect();
                let mut allowed: Vec<String> =
                    methods.iter().filter(|m| item.get(**m).is_some()).map(|m| m.to_uppercase()).collect();
                if allowed.iter().any(|m| m == "GET") {
                    allowed.push("HEAD".into());
                }
                (segs, allowed)
            })
            .collect()
    })
}

/// The methods the document gives the path `segs` (under `/api/v1`), from its most specific
/// template (the most literal segments); none when no template matches.
pub fn allowed(segs: &[&str]) -> Option<&'static [String]> {
    templates()
        .iter()
        .filter(|(t, _)| t.len() == segs.len() && t.iter().zip(segs).all(|(t, s)| t.as_deref().is_none_or(|t| t == *s)))
        .max_by_key(|(t, _)| t.iter().filter(|s| s.is_some()).count())
        .map(|(_, m)| m.as_slice())
}

/// The answer to a call no handler took: 405 with `Allow` when the path is the document's, else
/// 404.
pub fn unrouted(method: &Method, segs: &[&str]) -> ApiError {
    match allowed(segs) {
        Some(methods) if !methods.iter().any(|m| m == method.as_str()) => ApiError {
            allow: Some(methods.join(", ")),
            ..ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not a method of this resource"))
        },
        _ => ApiError::not_found("no such API resource"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_template_gives_the_methods() {
        assert_eq!(allowed(&["draft", "diff"]).map(|m| m.join(",")).as_deref(), Some("GET,HEAD"));
        assert_eq!(allowed(&["draft", "sites", "www"]).map(|m| m.join(",")).as_deref(), Some("GET,PUT,DELETE,HEAD"));
        assert!(allowed(&["nothing"]).is_none());
        let e = unrouted(&Method::PATCH, &["revisions"]);
        assert_eq!((e.status, e.allow.as_deref()), (StatusCode::METHOD_NOT_ALLOWED, Some("GET, POST, HEAD")));
        assert_eq!(unrouted(&Method::GET, &["nothing", "here"]).status, StatusCode::NOT_FOUND);
    }
}
