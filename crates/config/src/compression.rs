//! Response compression: a site's, a route's or a service's `compression`, which answers an
//! endpoint gives are sent compressed (gzip, brotli, zstd) to clients that accept it.

use crate::units::ByteSize;
use serde::Deserialize;

/// A content coding the gateway can compress with (RFC 9110 §8.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
pub enum Coding {
    /// `zstd` (RFC 8878).
    #[serde(rename = "zstd")]
    Zstd,
    /// `br` (RFC 7932).
    #[serde(rename = "br")]
    Brotli,
    /// `gzip` (RFC 1952).
    #[serde(rename = "gzip")]
    Gzip,
}

impl Coding {
    /// The name in `Accept-Encoding` and `Content-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Zstd => "zstd",
            Coding::Brotli => "br",
            Coding::Gzip => "gzip",
        }
    }
}

/// A `compression` setting.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compression {
    /// `false` turns compression off where it would be inherited (a route of a site that
    /// compresses).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The codings offered, in the gateway's order of preference when the client's q-values
    /// tie.
    #[serde(default = "default_codings")]
    pub algorithms: Vec<Coding>,
    /// Levels: gzip 1–9, brotli 0–11, zstd 1–22.
    #[serde(default)]
    pub levels: Levels,
    /// Media types compressed: `type/subtype`, `type/*`, or `type/*+suffix` (`application/*+json`),
    /// case-insensitive, parameters ignored. `text/event-stream` only when listed as such.
    #[serde(default = "default_types")]
    pub types: Vec<String>,
    /// Answers whose `Content-Length` is below this are sent as they are (an answer of unknown
    /// length is compressed).
    #[serde(default = "default_min_size")]
    pub min_size: ByteSize,
    /// Request bodies sent with `Content-Encoding: gzip`, `br` or `zstd` are decoded on the
    /// way to the backend (`max_body` bounds the decoded size).
    #[serde(default)]
    pub decompress_requests: bool,
}

/// Compression levels by coding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Levels {
    /// gzip, 1 (fastest) to 9; 6 by default (zlib's default).
    #[serde(default = "gzip_level")]
    pub gzip: u32,
    /// brotli, 0 to 11; 4 by default (a web server's on-the-fly choice: near gzip's speed,
    /// smaller).
    #[serde(default = "br_level")]
    pub br: u32,
    /// zstd, 1 to 22; 3 by default (zstd's default).
    #[serde(default = "zstd_level")]
    pub zstd: u32,
}

impl Default for Levels {
    fn default() -> Self {
        Levels { gzip: gzip_level(), br: br_level(), zstd: zstd_level() }
    }
}

fn yes() -> bool {
    true
}

fn gzip_level() -> u32 {
    6
}

fn br_level() -> u32 {
    4
}

fn zstd_level() -> u32 {
    3
}

fn default_codings() -> Vec<Coding> {
    vec![Coding::Zstd, Coding::Brotli, Coding::Gzip]
}

fn default_min_size() -> ByteSize {
    ByteSize(256)
}

/// Text formats that shrink: markup, styles, scripts, data, fonts and icons that are not
/// compressed already.
pub const DEFAULT_TYPES: &[&str] = &[
    "text/*",
    "application/json",
    "application/*+json",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/xml",
    "application/*+xml",
    "application/x-ndjson",
    "application/graphql-response+json",
    "application/wasm",
    "application/x-font-ttf",
    "application/vnd.ms-fontobject",
    "font/otf",
    "font/ttf",
    "image/svg+xml",
    "image/x-icon",
    "image/bmp",
];

fn default_types() -> Vec<String> {
    DEFAULT_TYPES.iter().map(|t| t.to_string()).collect()
}

/// What is wrong with media-type pattern `t`, if anything.
pub fn media_type_error(t: &str) -> Option<String> {
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b));
    let Some((ty, sub)) = t.split_once('/') else {
        return Some(format!("`{t}` is not a media type: write `type/subtype`, `type/*` or `type/*+suffix`"));
    };
    let sub_ok = match sub.strip_prefix('*') {
        Some("") => true,
        Some(suffix) => suffix.strip_prefix('+').is_some_and(token),
        None => token(sub),
    };
    if !token(ty) || !sub_ok {
        return Some(format!("`{t}` is not a media type: write `type/subtype`, `type/*` or `type/*+suffix`"));
    }
    None
}

impl Compression {
    /// What is wrong with the setting at `p` (`sites.web`, `sites.web.routes[0]`, `services.api`).
    pub(crate) fn check(&self, p: &str, err: &mut impl FnMut(String, String)) {
        if self.enabled && self.algorithms.is_empty() {
            err(format!("{p}.compression.algorithms"), "at least one of zstd, br, gzip (or `enabled: false`)".into());
        }
        for (i, a) in self.algorithms.iter().enumerate() {
            if self.algorithms[..i].contains(a) {
                err(format!("{p}.compression.algorithms[{i}]"), format!("`{}` is listed twice", a.name()));
            }
        }
        let levels =
            [("gzip", self.levels.gzip, 1, 9), ("br", self.levels.br, 0, 11), ("zstd", self.levels.zstd, 1, 22)];
        for (name, level, low, high) in levels {
            if !(low..=high).contains(&level) {
                err(
                    format!("{p}.compression.levels.{name}"),
                    format!("{level} is not a level of {name} ({low} to {high})"),
                );
            }
        }
        if self.enabled && self.types.is_empty() {
            err(format!("{p}.compression.types"), "at least one media type (or `enabled: false`)".into());
        }
        for (i, t) in self.types.iter().enumerate() {
            if let Some(e) = media_type_error(t) {
                err(format!("{p}.compression.types[{i}]"), e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{errors, HEAD};

    #[test]
    fn every_error_is_named() {
        let got = errors(
            "sites: {s: {hosts: [\"*\"], compression: {algorithms: [gzip, gzip], levels: {gzip: 10, br: 12, zstd: 0}, types: [\"text\", \"application/*json\", \"a b/c\"]}, routes: [{path: /, upstream: u, compression: {algorithms: []}}]}}\n\
             services: {api: {path: /api, upstream: u, compression: {types: []}}}\n",
        );
        let text = got.join("\n");
        for want in [
            "sites.s.compression.algorithms[1]: `gzip` is listed twice",
            "sites.s.compression.levels.gzip: 10 is not a level of gzip (1 to 9)",
            "sites.s.compression.levels.br: 12 is not a level of br (0 to 11)",
            "sites.s.compression.levels.zstd: 0 is not a level of zstd (1 to 22)",
            "sites.s.compression.types[0]: `text` is not a media type",
            "sites.s.compression.types[1]: `application/*json` is not a media type",
            "sites.s.compression.types[2]: `a b/c` is not a media type",
            "sites.s.routes[0].compression.algorithms: at least one of zstd, br, gzip",
            "services.api.compression.types: at least one media type",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        assert!(errors(
            "sites: {s: {hosts: [\"*\"], routes: [{path: /, upstream: u, compression: {algorithms: [lz4]}}]}}\n"
        )
        .join("\n")
        .contains("lz4"));
    }

    #[test]
    fn defaults_and_an_off_switch() {
        let yaml = "sites: {s: {hosts: [\"*\"], compression: {}, routes: [{path: /, upstream: u, compression: {enabled: false, algorithms: []}}]}}\n";
        let c = crate::compile(&format!("{HEAD}{yaml}")).expect("compiles");
        let site = c.sites["s"].compression.as_ref().expect("site compression");
        assert_eq!(site.algorithms, vec![super::Coding::Zstd, super::Coding::Brotli, super::Coding::Gzip]);
        assert_eq!((site.levels.gzip, site.levels.br, site.levels.zstd, site.min_size.0), (6, 4, 3, 256));
        assert!(!c.sites["s"].routes[0].compression.as_ref().expect("route").enabled);
        assert!(super::media_type_error("application/*+json").is_none());
        assert!(super::media_type_error("text/*").is_none());
    }
}
