//! Migration, offline: the converter behind `gatehouse convert --from hyperapi FILE` reads a
//! hyperapi 0.2.2 gateway file and makes the Gatehouse configuration that does the same, with one report line for each
//! thing that cannot be carried over (see `docs/migration-hyperapi.md`).
//!
//! ```text
//!   hyperapi YAML ──parse──▶ hyperapi::File ──map──▶ YAML tree ──emit──▶ text ──compile──▶ checked
//!                (lenient)                  (report)                            (must pass)
//! ```
//!
//! The output is built as a YAML tree rather than through the config model, and is then compiled
//! like any file: output that does not compile is a bug in the converter, and fails loudly.

#![forbid(unsafe_code)]

mod hyperapi;
mod map;
mod plugins;
mod upstream;

#[cfg(test)]
mod tests;

use serde_yaml::{Mapping, Value};
use std::fmt;
use std::path::{Path, PathBuf};

/// One thing not carried over as it was: where in the source file, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Path in the source file, e.g. `services[2].filters[1]`.
    pub path: String,
    /// What happened to it.
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a value of the source file cannot be carried over as it is; the converter writes it into a
/// [`Note`] and drops the value.
#[derive(Debug)]
#[non_exhaustive]
enum Untranslatable {
    /// A target that is not `scheme://host[:port][/path]`.
    NotAUrl {
        /// The URL as written.
        url: String,
    },
    /// A target URL with `user:password@`.
    UrlCredentials {
        /// The URL as written.
        url: String,
    },
    /// A target URL whose IPv6 host is not closed by `]`.
    UnclosedBracket {
        /// The URL as written.
        url: String,
    },
    /// A target URL whose port is not a number from 0 to 65535.
    InvalidPort {
        /// The URL as written.
        url: String,
    },
    /// A target URL without a host.
    NoHost {
        /// The URL as written.
        url: String,
    },
    /// A path pattern with `?` or a character class.
    GlobClass,
    /// A path pattern that starts with neither `/` nor `*`.
    NotRooted,
    /// A path pattern that is a regular expression no glob expresses.
    Regex,
}

impl fmt::Display for Untranslatable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Untranslatable::NotAUrl { url } => write!(f, "`{url}` is not a URL"),
            Untranslatable::UrlCredentials { url } => write!(f, "`{url}` carries user credentials"),
            Untranslatable::UnclosedBracket { url } => write!(f, "`{url}` has an unclosed `[`"),
            Untranslatable::InvalidPort { url } => write!(f, "`{url}` has an invalid port"),
            Untranslatable::NoHost { url } => write!(f, "`{url}` has no host"),
            Untranslatable::GlobClass => f.write_str("uses `?` or `[…]`, which Gatehouse globs do not have"),
            Untranslatable::NotRooted => f.write_str(
                "does not start with `/`; hyperapi compared it with the path below the service prefix, so it never matched",
            ),
            Untranslatable::Regex => f.write_str("is a regular expression Gatehouse globs cannot express"),
        }
    }
}

impl std::error::Error for Untranslatable {}

/// The notes of one conversion.
#[derive(Default)]
struct Report(Vec<Note>);

impl Report {
    fn note(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Note { path: path.into(), message: message.into() });
    }

    /// Reports the settings hyperapi 0.2.2 does not define, found at `path`.
    fn extra(&mut self, path: &str, extra: &hyperapi::Extra) {
        for key in extra.keys() {
            let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            self.note(at, "not a hyperapi 0.2.2 setting; ignored");
        }
    }
}

/// A public key taken out of the source file, to be written where the output names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFile {
    /// Path in the source file.
    pub source: String,
    /// Where the output expects it.
    pub path: PathBuf,
    /// PEM text.
    pub pem: String,
}

/// A finished conversion.
#[derive(Debug)]
pub struct Conversion {
    /// The Gatehouse configuration; it compiles.
    pub yaml: String,
    /// What was not carried over as it was.
    pub notes: Vec<Note>,
    /// Public keys the configuration refers to.
    pub key_files: Vec<KeyFile>,
}

/// Why there is no conversion.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConvertError {
    /// The source is not a hyperapi file.
    Parse(serde_yaml::Error),
    /// The output does not compile: a converter bug.
    Invalid(gatehouse_config::ConfigErrors),
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertError::Parse(e) => write!(f, "not a hyperapi configuration: {e}"),
            ConvertError::Invalid(errors) => {
                write!(f, "bug: the converted configuration does not compile:\n{errors}")
            }
        }
    }
}

impl std::error::Error for ConvertError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConvertError::Parse(e) => Some(e),
            ConvertError::Invalid(errors) => Some(errors),
        }
    }
}

/// Converts hyperapi file `text` (named `source` in the output's header); public keys are given
/// paths in `key_dir`.
pub fn hyperapi(text: &str, source: &str, key_dir: &Path) -> Result<Conversion, ConvertError> {
    let file = hyperapi::parse(text).map_err(ConvertError::Parse)?;
    let mut report = Report::default();
    let mut key_files = Vec::new();
    let doc = map::document(&mut report, &file, key_dir, &mut key_files);
    let yaml = emit(source, &doc, &report.0);
    gatehouse_config::compile(&yaml).map_err(ConvertError::Invalid)?;
    Ok(Conversion { yaml, notes: report.0, key_files })
}

/// The YAML text, opened by a comment that names the source and lists the notes, so that the file
/// itself records what needs a look.
fn emit(source: &str, doc: &Mapping, notes: &[Note]) -> String {
    let mut out = format!("# Gatehouse configuration converted from the hyperapi file {source}\n");
    out.push_str("# by `gatehouse convert --from hyperapi`; see docs/migration-hyperapi.md.\n");
    if notes.is_empty() {
        out.push_str("# Everything was carried over.\n");
    } else {
        out.push_str(&format!("# Not carried over as it was ({}):\n", notes.len()));
        for n in notes {
            let line = n.to_string().replace(['\n', '\r'], " ");
            out.push_str(&format!("#   {line}\n"));
        }
    }
    out.push('\n');
    // Serialising a tree of strings, numbers and maps cannot fail.
    out.push_str(&serde_yaml::to_string(&Value::Mapping(doc.clone())).unwrap_or_default());
    out
}

/// Inserts `key: value` into `m`.
fn entry(m: &mut Mapping, key: &str, value: impl Into<Value>) {
    m.insert(Value::from(key), value.into());
}
