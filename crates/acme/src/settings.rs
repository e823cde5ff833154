//! `tls.acme` with its files read: what `gatehouse check` reads and `run` uses, so both say the
//! same about a file that cannot be read.

use gatehouse_config::{Acme, AcmeChallenge};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::time::Duration;

/// The ACME settings, files read.
#[derive(Clone)]
pub struct Settings {
    /// The directory URL.
    pub directory: String,
    /// Trust for the directory's TLS certificate; `None`: the system's roots.
    pub roots: Option<rustls::RootCertStore>,
    /// `mailto:` contact.
    pub contact: Option<String>,
    /// External account binding: key id and MAC key.
    pub eab: Option<(String, Vec<u8>)>,
    /// Profile asked for.
    pub profile: Option<String>,
    /// Challenge types in order of preference.
    pub challenges: Vec<AcmeChallenge>,
    /// Names to hold certificates for.
    pub names: Vec<String>,
    /// Renewal before expiry, when the CA gives no renewal information.
    pub renew_before: Duration,
    /// On-demand certificates, when on.
    pub on_demand: Option<gatehouse_config::OnDemand>,
    /// DNS-01 updates, when `dns01` is set.
    pub dns01: Option<std::sync::Arc<crate::dns01::Updater>>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("directory", &self.directory)
            .field("names", &self.names.len())
            .finish_non_exhaustive()
    }
}

/// A setting whose file could not be used: its path in the configuration, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// Where in the configuration (`tls.acme.ca`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl Settings {
    /// Reads the files `acme` names; every error, each with its path.
    pub fn load(acme: &Acme) -> Result<Settings, Vec<FileError>> {
        let mut errors = Vec::new();
        let mut fail = |path: &str, message: String| errors.push(FileError { path: path.into(), message });
        let roots = acme.ca.as_ref().and_then(|ca| {
            let shown = gatehouse_files::shown(ca);
            let pem = match gatehouse_files::read(ca) {
                Ok(pem) => pem,
                Err(e) => {
                    fail("tls.acme.ca", format!("cannot read {shown}: {e}"));
                    return None;
                }
            };
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                match cert.map_err(|e| e.to_string()).and_then(|c| roots.add(c).map_err(|e| e.to_string())) {
                    Ok(()) => {}
                    Err(e) => fail("tls.acme.ca", format!("{shown}: {e}")),
                }
            }
            if roots.is_empty() {
                fail("tls.acme.ca", format!("{shown} holds no CA certificate"));
            }
            Some(roots)
        });
        let eab = acme.eab.as_ref().and_then(|eab| {
            let shown = gatehouse_files::shown(&eab.hmac_key_file);
            let text = match gatehouse_files::read(&eab.hmac_key_file) {
                Ok(t) => t,
                Err(e) => {
                    fail("tls.acme.eab.hmac_key_file", format!("cannot read {shown}: {e}"));
                    return None;
                }
            };
            let text = String::from_utf8_lossy(&text);
            let key = text.trim().trim_end_matches('=');
            match data_encoding::BASE64URL_NOPAD.decode(key.as_bytes()) {
                Ok(k) if !k.is_empty() => Some((eab.kid.clone(), k)),
                _ => {
                    fail("tls.acme.eab.hmac_key_file", format!("{shown} does not hold a base64url key"));
                    None
                }
            }
        });
        let dns01 = acme.dns01.as_ref().and_then(|d| {
            let r = &d.rfc2136;
            let shown = gatehouse_files::shown(&r.key_file);
            let text = match gatehouse_files::read(&r.key_file) {
                Ok(t) => t,
                Err(e) => {
                    fail("tls.acme.dns01.rfc2136.key_file", format!("cannot read {shown}: {e}"));
                    return None;
                }
            };
            let Some(secret) = crate::dns01::tsig_secret(&String::from_utf8_lossy(&text)) else {
                fail("tls.acme.dns01.rfc2136.key_file", format!("{shown} holds no base64 TSIG secret"));
                return None;
            };
            match crate::dns01::Updater::new(r, secret) {
                Ok(u) => Some(std::sync::Arc::new(u)),
                Err(e) => {
                    fail("tls.acme.dns01.rfc2136", e);
                    None
                }
            }
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            directory: acme.directory.clone(),
            roots,
            contact: acme.email.as_ref().map(|e| format!("mailto:{e}")),
            eab,
            profile: acme.profile.clone(),
            challenges: acme.challenges.clone(),
            names: acme.names.clone(),
            renew_before: acme.renew_before.0,
            on_demand: acme.on_demand.clone(),
            dns01,
        })
    }
}
