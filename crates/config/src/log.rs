//! The process log (`log:`): what Gatehouse says about itself (starts, reloads, errors), as
//! opposed to the access log.

use serde::Deserialize;

/// `log:`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// Line format.
    pub format: ProcessLogFormat,
    /// Which messages are written: a level (`info`), or comma-separated `target=level`
    /// directives after it (`info,gatehouse_acme=debug`). Changed by a reload or the admin API.
    pub level: String,
    /// `stderr`, `stdout` or a file path (appended to, reopened on SIGUSR1).
    pub path: String,
}

impl Default for Log {
    fn default() -> Self {
        Log { format: ProcessLogFormat::Text, level: "info".into(), path: "stderr".into() }
    }
}

/// Process log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessLogFormat {
    /// One line of text per message: time, level, message, fields.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `fields` (with `message`), `target`.
    Json,
}

/// The levels a directive may name.
const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

/// Why `level` is not a level filter: comma-separated directives, each a level or
/// `target=level`, with targets made of letters, digits, `_` and `::`.
pub fn check_log_level(level: &str) -> Result<(), String> {
    if level.trim().is_empty() {
        return Err("a level is required: one of trace, debug, info, warn, error, off".into());
    }
    for directive in level.split(',').map(str::trim) {
        let (target, lvl) = match directive.split_once('=') {
            Some((t, l)) => (Some(t.trim()), l.trim()),
            None => (None, directive),
        };
        if let Some(t) = target {
            let ok = !t.is_empty()
                && t.split("::")
                    .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            if !ok {
                return Err(format!(
                    "{directive:?}: a target is a module path such as gatehouse_acme or gatehouse_proxy::forward"
                ));
            }
        }
        if !LEVELS.contains(&lvl.to_ascii_lowercase().as_str()) {
            return Err(format!("{directive:?}: the level must be one of {}", LEVELS.join(", ")));
        }
    }
    Ok(())
}

pub(crate) fn validate(c: &crate::Config, err: &mut impl FnMut(String, String)) {
    if let Err(e) = check_log_level(&c.log.level) {
        err("log.level".into(), e);
    }
    if c.log.path.trim().is_empty() {
        err("log.path".into(), "stderr, stdout or a file path".into());
    }
}

#[cfg(test)]
mod tests {
    use super::check_log_level;

    #[test]
    fn levels_and_directives() {
        for ok in
            ["info", "DEBUG", "warn,gatehouse_acme=debug", "off,gatehouse_proxy::forward=trace", " info , h2=warn "]
        {
            assert_eq!(check_log_level(ok), Ok(()), "{ok}");
        }
        for bad in
            ["", "verbose", "info,=debug", "info,a b=debug", "info,gatehouse=loud", "info,a:::b=debug", "[span]=info"]
        {
            assert!(check_log_level(bad).is_err(), "{bad}");
        }
    }
}
