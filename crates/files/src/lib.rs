//! Configuration stage: the files a configuration names for the request path (JWT public keys,
//! CA bundles, upstream client certificates), read so that no name can hurt the process: a
//! regular file only (never a device, a FIFO or a directory), at most [`MAX_LEN`] bytes, or PEM
//! written inline instead of a path. The admin API also asks [`allowed`] whether a file named in a
//! draft lies under the roots it may read, and answers every refusal with one message, so a
//! client cannot learn which paths exist. Files that hold secrets (private keys, the admin
//! token, cached revisions) are written by [`write_private`]: mode 0600, renamed into place whole.

#![forbid(unsafe_code)]

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The largest file read: 1 MiB, far above any key or CA bundle.
pub const MAX_LEN: u64 = 1 << 20;

/// PEM written where a path is expected (`-----BEGIN …`), as its bytes.
pub fn inline_pem(value: &Path) -> Option<&[u8]> {
    let bytes = value.as_os_str().as_encoded_bytes();
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    bytes[start..].starts_with(b"-----BEGIN ").then_some(bytes)
}

/// How `value` is written in errors and logs: the path, or `(inline PEM)` (which may be a
/// private key).
pub fn shown(value: &Path) -> std::borrow::Cow<'_, str> {
    match inline_pem(value) {
        Some(_) => "(inline PEM)".into(),
        None => value.to_string_lossy(),
    }
}

/// The contents `value` names: PEM written inline, else the regular file at that path, of at
/// most [`MAX_LEN`] bytes.
pub fn read(value: &Path) -> io::Result<Vec<u8>> {
    if let Some(pem) = inline_pem(value) {
        return Ok(pem.to_vec());
    }
    // Non-blocking, so a FIFO cannot hold the open; it is refused as not a regular file next.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(value)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    if meta.len() > MAX_LEN {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {MAX_LEN} bytes")));
    }
    let mut out = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // Bounded again while reading: a file may grow after its length was read.
    Read::take(file, MAX_LEN + 1).read_to_end(&mut out)?;
    if out.len() as u64 > MAX_LEN {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {MAX_LEN} bytes")));
    }
    Ok(out)
}

/// Whether `value` is PEM written inline, or a regular file of at most [`MAX_LEN`] bytes whose
/// real path (symbolic links and `..` resolved) lies under one of `roots`. Relative paths are
/// taken from the process's working directory, as the node reads them.
pub fn allowed(value: &Path, roots: &[PathBuf]) -> bool {
    if inline_pem(value).is_some() {
        return true;
    }
    let Ok(real) = value.canonicalize() else { return false };
    let under = roots.iter().filter_map(|r| r.canonicalize().ok()).any(|root| real.starts_with(root));
    under && std::fs::metadata(&real).is_ok_and(|m| m.is_file() && m.len() <= MAX_LEN)
}

/// Writes a file that holds a private key: mode 0600, written under a hidden name beside it and
/// renamed into place, so a directory scan never sees half of it.
pub fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gatehouse-files-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    #[test]
    fn regular_files_within_the_limit_are_read() {
        let dir = temp_dir("read");
        let small = dir.join("key.pem");
        std::fs::write(&small, b"-----BEGIN PUBLIC KEY-----\n").expect("write");
        assert_eq!(read(&small).expect("read"), b"-----BEGIN PUBLIC KEY-----\n");
        let big = dir.join("big.pem");
        std::fs::write(&big, vec![b'a'; MAX_LEN as usize + 1]).expect("write");
        assert_eq!(read(&big).expect_err("too big").kind(), io::ErrorKind::InvalidData);
        assert_eq!(read(&dir).expect_err("a directory").kind(), io::ErrorKind::InvalidInput);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn devices_are_refused_at_once() {
        for dev in ["/dev/zero", "/dev/urandom", "/dev/null"] {
            assert_eq!(read(Path::new(dev)).expect_err(dev).kind(), io::ErrorKind::InvalidInput, "{dev}");
        }
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = temp_dir("fifo");
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
        if made {
            assert_eq!(read(&fifo).expect_err("a fifo").kind(), io::ErrorKind::InvalidInput);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn inline_pem_is_taken_as_it_is() {
        let pem = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n";
        assert_eq!(read(Path::new(pem)).expect("inline"), pem.as_bytes());
        assert!(inline_pem(Path::new("\n -----BEGIN CERTIFICATE-----")).is_some());
        assert!(inline_pem(Path::new("/etc/-----BEGIN ")).is_none());
        assert_eq!(shown(Path::new(pem)), "(inline PEM)");
        assert_eq!(shown(Path::new("/etc/key.pem")), "/etc/key.pem");
    }

    #[test]
    fn only_files_under_the_roots_are_allowed() {
        let dir = temp_dir("roots");
        let inside = dir.join("in");
        std::fs::create_dir_all(&inside).expect("mkdir");
        let key = inside.join("key.pem");
        std::fs::write(&key, b"k").expect("write");
        std::fs::write(dir.join("outside.pem"), b"k").expect("write");
        let roots = vec![inside.clone()];
        assert!(allowed(&key, &roots));
        assert!(!allowed(&inside.join("../outside.pem"), &roots));
        assert!(!allowed(&dir.join("outside.pem"), &roots));
        assert!(!allowed(&inside.join("missing.pem"), &roots));
        assert!(!allowed(&inside, &roots), "a directory");
        assert!(!allowed(Path::new("/etc/shadow"), &roots));
        assert!(!allowed(Path::new("/dev/zero"), &[PathBuf::from("/dev")]));
        std::os::unix::fs::symlink(dir.join("outside.pem"), inside.join("link.pem")).expect("symlink");
        assert!(!allowed(&inside.join("link.pem"), &roots), "a link out of the root");
        assert!(allowed(Path::new("-----BEGIN PUBLIC KEY-----"), &roots));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
