//! Machine-readable lifecycle events: one JSON object per line on stdout (`--status-json`), or
//! into a channel for a node run in-process, so scripts and tests can wait for "ready" or
//! "reloaded" instead of guessing with sleeps.

use serde_json::{json, Value};
use std::io::Write;
use std::sync::mpsc;

/// Where events go.
#[derive(Clone, Debug, Default)]
pub struct Events {
    stdout: bool,
    channel: Option<mpsc::Sender<Value>>,
}

impl Events {
    /// Events on stdout when `enabled`, else nowhere.
    pub fn stdout(enabled: bool) -> Self {
        Events { stdout: enabled, channel: None }
    }

    /// Events into a channel, for a node run in this process.
    pub fn channel() -> (Self, mpsc::Receiver<Value>) {
        let (tx, rx) = mpsc::channel();
        (Events { stdout: false, channel: Some(tx) }, rx)
    }

    pub(crate) fn emit(&self, event: &str, mut fields: Value) {
        if !self.stdout && self.channel.is_none() {
            return;
        }
        if let Value::Object(map) = &mut fields {
            map.insert("event".into(), json!(event));
        }
        if self.stdout {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{fields}");
            let _ = out.flush();
        }
        if let Some(tx) = &self.channel {
            let _ = tx.send(fields);
        }
    }
}
