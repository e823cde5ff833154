//! Machine-readable lifecycle events (`--status-json`): one JSON object per line on stdout, so
//! scripts and tests can wait for "ready" or "reloaded" instead of guessing with sleeps.

use serde_json::{json, Value};
use std::io::Write;

/// Where events go.
#[derive(Clone, Copy, Debug)]
pub struct Events {
    enabled: bool,
}

impl Events {
    pub fn new(enabled: bool) -> Self {
        Events { enabled }
    }

    pub fn emit(&self, event: &str, mut fields: Value) {
        if !self.enabled {
            return;
        }
        if let Value::Object(map) = &mut fields {
            map.insert("event".into(), json!(event));
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{fields}");
        let _ = out.flush();
    }
}
