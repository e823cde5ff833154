//! Relative paths in a configuration name files beside the configuration file, as nginx's are
//! relative to its prefix: `cert: certs/www.pem` in `/etc/gatehouse/gatehouse.yaml` is
//! `/etc/gatehouse/certs/www.pem` whatever the working directory. The built-in quick start has no
//! file: its paths stay relative to the working directory, as do defaults (`control.dir`).

use crate::Config;
use std::path::{Path, PathBuf};

/// The directory relative paths of the configuration file `file` resolve against.
pub fn config_dir(file: &Path) -> PathBuf {
    file.parent().map_or_else(PathBuf::new, Path::to_path_buf)
}

impl Config {
    /// Makes every relative path written in the document relative to `dir` (the configuration
    /// file's directory, [`config_dir`]). PEM written inline, `stdout`, `stderr` and `off` are
    /// left as they are, and so is `control.dir` while it is the default.
    pub fn resolve_paths(&mut self, dir: &Path) {
        if dir.as_os_str().is_empty() {
            return;
        }
        let mut file = |p: &mut PathBuf| {
            if p.is_relative() && !inline_pem(p) && !p.as_os_str().is_empty() {
                *p = dir.join(&*p);
            }
        };
        let named = |p: &mut String| {
            if !["stdout", "stderr", "off", ""].contains(&p.as_str()) && Path::new(p.as_str()).is_relative() {
                *p = dir.join(p.as_str()).to_string_lossy().into_owned();
            }
        };
        if let Some(a) = &mut self.admin {
            if let Some(t) = &mut a.token_file {
                file(&mut t.path);
            }
            if let Some(l) = &mut a.audit_log {
                named(l);
            }
            if let Some(t) = &mut a.tls {
                file(&mut t.cert);
                file(&mut t.key);
                a_opt(&mut t.client_ca, &mut file);
            }
            a.file_roots.iter_mut().for_each(&mut file);
        }
        named(&mut self.log.path);
        named(&mut self.access_log.path);
        if let Some(t) = &mut self.tracing {
            a_opt(&mut t.otlp.ca, &mut file);
        }
        for u in self.upstreams.values_mut() {
            if let Some(t) = &mut u.tls {
                a_opt(&mut t.ca, &mut file);
                a_opt(&mut t.cert, &mut file);
                a_opt(&mut t.key, &mut file);
            }
        }
        for s in self.sites.values_mut() {
            if let Some(c) = &mut s.client_auth {
                file(&mut c.ca);
            }
        }
        for app in self.apps.values_mut() {
            for k in &mut app.jwt_keys {
                a_opt(&mut k.public_key, &mut file);
            }
        }
        for s in self.services.values_mut() {
            for j in &mut s.jwt.0 {
                a_opt(&mut j.jwks.ca, &mut file);
            }
            if let Some(e) = &mut s.external {
                a_opt(&mut e.ca, &mut file);
            }
        }
        let tls = &mut self.tls;
        for c in &mut tls.certificates {
            file(&mut c.cert);
            a_opt(&mut c.key, &mut file);
            a_opt(&mut c.ocsp, &mut file);
        }
        if let Some(s) = &mut tls.store {
            a_opt(&mut s.dir, &mut file);
        }
        if let Some(s) = &mut tls.self_signed {
            file(&mut s.dir);
        }
        if let Some(acme) = &mut tls.acme {
            a_opt(&mut acme.ca, &mut file);
            if let Some(e) = &mut acme.eab {
                file(&mut e.hmac_key_file);
            }
            if let Some(d) = &mut acme.dns01 {
                file(&mut d.rfc2136.key_file);
            }
        }
        if let Some(r) = &mut self.redis {
            a_opt(&mut r.password_file, &mut file);
            file(&mut r.secret_file);
            if let Some(s) = &mut r.sentinel {
                a_opt(&mut s.password_file, &mut file);
            }
            if let Some(t) = &mut r.tls {
                a_opt(&mut t.ca, &mut file);
                a_opt(&mut t.cert, &mut file);
                a_opt(&mut t.key, &mut file);
            }
        }
        if self.control.dir != crate::Control::default().dir {
            file(&mut self.control.dir);
        }
    }
}

fn a_opt(p: &mut Option<PathBuf>, file: &mut impl FnMut(&mut PathBuf)) {
    if let Some(p) = p {
        file(p);
    }
}

/// Whether `p` is PEM written in place of a path (as `gatehouse_files::inline_pem` reads it).
fn inline_pem(p: &Path) -> bool {
    p.as_os_str().as_encoded_bytes().trim_ascii_start().starts_with(b"-----BEGIN ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_move_beside_the_file_and_nothing_else_does() {
        let text = "\
log: { path: logs/gatehouse.log }
access_log: { path: stdout }
admin: { bind: \"127.0.0.1:0\", token_file: { path: admin-token }, audit_log: off, file_roots: [keys, /srv/keys] }
tls:
  certificates:
    - { cert: certs/www.pem, key: /etc/keys/www.key }
    - { cert: \"-----BEGIN CERTIFICATE-----\\nMII\\n-----END CERTIFICATE-----\\n\" }
  store: { dir: certs }
upstreams:
  u: { targets: [\"127.0.0.1:1\"], tls: { ca: ca.pem } }
redis: { url: \"redis://127.0.0.1:6379\", secret_file: ../secrets/cluster.key }
";
        let mut c = crate::compile_all(text).0;
        c.resolve_paths(&config_dir(Path::new("/etc/gatehouse/gatehouse.yaml")));
        assert_eq!(c.log.path, "/etc/gatehouse/logs/gatehouse.log");
        assert_eq!(c.access_log.path, "stdout");
        let admin = c.admin.as_ref().expect("admin");
        assert_eq!(admin.token_file.as_ref().map(|t| t.path.clone()), Some("/etc/gatehouse/admin-token".into()));
        assert_eq!(admin.audit_log.as_deref(), Some("off"));
        assert_eq!(admin.file_roots, [PathBuf::from("/etc/gatehouse/keys"), PathBuf::from("/srv/keys")]);
        assert_eq!(c.tls.certificates[0].cert, Path::new("/etc/gatehouse/certs/www.pem"));
        assert_eq!(c.tls.certificates[0].key.as_deref(), Some(Path::new("/etc/keys/www.key")));
        assert!(c.tls.certificates[1].cert.to_string_lossy().starts_with("-----BEGIN"));
        assert_eq!(c.tls.store.as_ref().and_then(|s| s.dir.clone()), Some("/etc/gatehouse/certs".into()));
        let tls = c.upstreams["u"].tls.as_ref().expect("tls");
        assert_eq!(tls.ca.as_deref(), Some(Path::new("/etc/gatehouse/ca.pem")));
        let redis = c.redis.as_ref().expect("redis");
        assert_eq!(redis.secret_file, Path::new("/etc/gatehouse/../secrets/cluster.key"));
        assert_eq!(c.control.dir, crate::Control::default().dir, "the default stays in the working directory");
    }

    #[test]
    fn a_file_in_the_working_directory_changes_nothing() {
        let mut c = crate::compile_all("log: { path: g.log }\n").0;
        c.resolve_paths(&config_dir(Path::new("gatehouse.yaml")));
        assert_eq!(c.log.path, "g.log");
    }
}
