//! Lua scripts: the atomic read-modify-write of the gateway (rate limits, locks). A script is
//! sent by its SHA-1 and its source only when Redis does not have it cached yet.

use crate::client::Client;
use crate::error::{Error, Result};

use crate::value::Value;
use bytes::Bytes;

/// A Lua script and its SHA-1, computed once. Build it once (e.g. in a `static` or the config
/// snapshot) and run it with [`Client::eval`].
#[derive(Debug, Clone)]
pub struct Script {
    source: Bytes,
    sha1: String,
}

impl Script {
    /// A script with the given Lua source.
    pub fn new(source: impl Into<Bytes>) -> Script {
        let source = source.into();
        // SHA-1 only names the script, as Redis does for `EVALSHA`; nothing relies on it for security.
        let sha1 = redis::Script::new(&String::from_utf8_lossy(&source)).get_hash().to_string();
        Script { source, sha1 }
    }

    /// The Lua source.
    pub fn source(&self) -> &[u8] {
        &self.source
    }

    /// The SHA-1 of the source in lowercase hex, as `SCRIPT LOAD` and `EVALSHA` use it.
    pub fn sha1_hex(&self) -> &str {
        &self.sha1
    }
}

impl Client {
    /// Runs `script` with `KEYS` and `ARGV`: `EVALSHA` first, and `EVAL` with the source if Redis
    /// answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`), which also caches it again.
    pub async fn eval<K: AsRef<[u8]>, A: AsRef<[u8]>>(&self, script: &Script, keys: &[K], args: &[A]) -> Result<Value> {
        match self.eval_with(b"EVALSHA", script.sha1.as_bytes(), keys, args).await {
            Err(Error::Server(msg)) if msg.starts_with("NOSCRIPT") => {
                self.eval_with(b"EVAL", &script.source, keys, args).await
            }
            other => other,
        }
    }

    async fn eval_with<K: AsRef<[u8]>, A: AsRef<[u8]>>(
        &self,
        command: &[u8],
        script: &[u8],
        keys: &[K],
        args: &[A],
    ) -> Result<Value> {
        let numkeys = keys.len().to_string();
        let mut argv: Vec<&[u8]> = Vec::with_capacity(3 + keys.len() + args.len());
        argv.extend([command, script, numkeys.as_bytes()]);
        argv.extend(keys.iter().map(AsRef::as_ref));
        argv.extend(args.iter().map(AsRef::as_ref));
        self.request(&argv).await
    }
}

#[cfg(test)]
mod tests {
    use super::Script;

    #[test]
    fn scripts_are_named_by_the_lowercase_hex_sha1_of_their_source() {
        // What `SCRIPT LOAD` answers for these sources.
        for (source, sha1) in
            [("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"), ("return 1", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")]
        {
            assert_eq!(Script::new(source).sha1_hex(), sha1, "{source:?}");
        }
    }
}
