//! Access log: each worker formats lines into its own buffer; a full buffer (or the periodic flush)
//! is handed to one writer thread through a bounded channel with `try_send`, so a worker never
//! waits on the disk. When the writer falls behind, whole buffers are dropped and counted.

use crate::time::{clf_time, rfc3339_time};
use gatehouse_config::LogFormat;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Lines are handed to the writer in buffers of about this size.
const BATCH_BYTES: usize = 32 * 1024;
/// Buffers waiting for the writer before new ones are dropped.
const QUEUE_DEPTH: usize = 256;

/// One finished request.
#[derive(Debug)]
pub struct Entry<'a> {
    /// Client address.
    pub client: IpAddr,
    /// When the request arrived.
    pub time: SystemTime,
    /// Request method.
    pub method: &'a str,
    /// Request target as received.
    pub uri: &'a str,
    /// `HTTP/1.1`, `HTTP/2.0`, …
    pub version: &'a str,
    /// Host header or authority.
    pub host: &'a str,
    /// Response status.
    pub status: u16,
    /// Response body bytes sent.
    pub bytes: u64,
    /// Referer header.
    pub referer: &'a str,
    /// User-Agent header.
    pub user_agent: &'a str,
    /// Time from request head to the end of the response.
    pub duration: Duration,
    /// Endpoint that answered, if any.
    pub upstream: &'a str,
    /// Route (`site/path`).
    pub route: &'a str,
    /// The API app that called, when a service authenticated it (the `user` field of the
    /// combined format).
    pub app: &'a str,
    /// The request id sent upstream and echoed to the client; empty when ids are off.
    pub request_id: &'a str,
    /// The `grpc-status` a gRPC call ended with.
    pub grpc_status: Option<u8>,
    /// Trace id and the gateway's server span id, when `tracing` is on.
    pub trace: Option<(u128, u64)>,
}

enum Msg {
    Lines(Vec<u8>),
    Sync(std::sync::mpsc::Sender<()>),
    /// Open the file again (after logrotate moved it); the answer says whether it worked.
    Reopen(std::sync::mpsc::Sender<std::io::Result<()>>),
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

/// Where lines go.
#[derive(Clone, Debug)]
pub struct AccessLog {
    format: LogFormat,
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(BATCH_BYTES + 1024));
}

impl AccessLog {
    /// Opens `path` (`stdout`, `stderr` or a file, appended) and starts the writer thread.
    pub fn open(path: &str, format: LogFormat) -> std::io::Result<Self> {
        let open = |path: &str| -> std::io::Result<Box<dyn Write + Send>> {
            Ok(match path {
                "stdout" => Box::new(std::io::stdout()),
                "stderr" => Box::new(std::io::stderr()),
                file => Box::new(std::fs::OpenOptions::new().create(true).append(true).open(file)?),
            })
        };
        let mut out = open(path)?;
        let path = path.to_string();
        let (tx, rx) = sync_channel::<Msg>(QUEUE_DEPTH);
        std::thread::Builder::new().name("access-log".into()).spawn(move || {
            for msg in rx {
                match msg {
                    Msg::Lines(batch) => {
                        if out.write_all(&batch).and_then(|_| out.flush()).is_err() {
                            tracing::error!("access log write failed");
                        }
                    }
                    Msg::Sync(done) => {
                        let _ = done.send(());
                    }
                    // Lines handed over before the reopen went to the old file, those after
                    // go to the new one: none is lost or written twice.
                    Msg::Reopen(done) => {
                        let _ = done.send(open(&path).map(|new| out = new));
                    }
                }
            }
        })?;
        Ok(AccessLog { format, tx, dropped: Arc::new(AtomicU64::new(0)) })
    }

    /// Lines dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Formats `e` into this thread's buffer, handing the buffer over when it is full.
    pub fn log(&self, e: &Entry<'_>) {
        BUFFER.with(|b| {
            let mut buf = b.borrow_mut();
            match self.format {
                LogFormat::Combined => combined(&mut buf, e),
                LogFormat::Json => json(&mut buf, e),
            }
            if buf.len() >= BATCH_BYTES {
                self.hand_over(&mut buf);
            }
        });
    }

    /// Hands this thread's buffered lines to the writer; workers call it periodically.
    pub fn flush_local(&self) {
        BUFFER.with(|b| {
            let mut buf = b.borrow_mut();
            if !buf.is_empty() {
                self.hand_over(&mut buf);
            }
        });
    }

    /// Waits until every line handed over so far is written, at most `timeout`.
    pub fn sync(&self, timeout: Duration) {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        if self.tx.send(Msg::Sync(done_tx)).is_ok() {
            let _ = done_rx.recv_timeout(timeout);
        }
    }

    /// Opens the file again at its path (`SIGUSR1`, after logrotate moved it), once the lines
    /// handed over so far are written to the old one. On failure the old file stays in use.
    pub fn reopen(&self, timeout: Duration) -> std::io::Result<()> {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        self.tx.send(Msg::Reopen(done_tx)).map_err(|_| std::io::Error::other("the access log writer stopped"))?;
        done_rx.recv_timeout(timeout).map_err(|_| std::io::Error::other("the access log writer did not answer"))?
    }

    fn hand_over(&self, buf: &mut Vec<u8>) {
        let batch = std::mem::replace(buf, Vec::with_capacity(BATCH_BYTES + 1024));
        let lines = batch.iter().filter(|&&b| b == b'\n').count() as u64;
        match self.tx.try_send(Msg::Lines(batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(lines, Relaxed);
            }
        }
    }
}

fn dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

/// Escapes `"` and `\` and control bytes so a client cannot forge log lines.
fn push_escaped(buf: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        match b {
            b'"' | b'\\' => {
                buf.push(b'\\');
                buf.push(b);
            }
            0..=0x1f | 0x7f => {
                let _ = write!(buf, "\\x{b:02x}");
            }
            _ => buf.push(b),
        }
    }
}

fn combined(buf: &mut Vec<u8>, e: &Entry<'_>) {
    let _ = write!(buf, "{} - ", e.client);
    push_escaped(buf, dash(e.app));
    let _ = write!(buf, " [{}] \"", clf_time(e.time));
    push_escaped(buf, e.method);
    buf.push(b' ');
    push_escaped(buf, e.uri);
    let _ = write!(buf, " {}\" {} {} \"", e.version, e.status, e.bytes);
    push_escaped(buf, dash(e.referer));
    buf.extend_from_slice(b"\" \"");
    push_escaped(buf, dash(e.user_agent));
    let _ = write!(buf, "\" {:.3} \"{}\" \"", e.duration.as_secs_f64(), dash(e.upstream));
    // Last, so parsers of the fields before it keep working; quoted like the upstream.
    push_escaped(buf, dash(e.request_id));
    buf.push(b'"');
    // A gRPC call's status comes after everything else, so lines of other requests are as before.
    if let Some(code) = e.grpc_status {
        let _ = write!(buf, " grpc-status={code}");
    }
    buf.push(b'\n');
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json(buf: &mut Vec<u8>, e: &Entry<'_>) {
    let mut s = String::with_capacity(256);
    s.push_str("{\"time\":");
    json_str(&mut s, &rfc3339_time(e.time));
    s.push_str(",\"client\":");
    json_str(&mut s, &e.client.to_string());
    for (k, v) in [("method", e.method), ("uri", e.uri), ("protocol", e.version), ("host", e.host)] {
        let _ = write!(s, ",\"{k}\":");
        json_str(&mut s, v);
    }
    let _ = write!(
        s,
        ",\"status\":{},\"bytes\":{},\"duration_ms\":{:.3}",
        e.status,
        e.bytes,
        e.duration.as_secs_f64() * 1e3
    );
    for (k, v) in [
        ("referer", e.referer),
        ("user_agent", e.user_agent),
        ("upstream", e.upstream),
        ("route", e.route),
        ("app", e.app),
        ("request_id", e.request_id),
    ] {
        let _ = write!(s, ",\"{k}\":");
        json_str(&mut s, v);
    }
    if let Some(code) = e.grpc_status {
        let _ = write!(s, ",\"grpc_status\":{code}");
    }
    if let Some((trace, span)) = e.trace {
        let _ = write!(s, ",\"trace_id\":\"{trace:032x}\",\"span_id\":\"{span:016x}\"");
    }
    s.push_str("}\n");
    buf.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry<'static> {
        Entry {
            client: "127.0.0.1".parse().expect("ip"),
            time: std::time::UNIX_EPOCH + Duration::from_secs(971_186_136),
            method: "GET",
            uri: "/a\"b",
            version: "HTTP/1.1",
            host: "example.com",
            status: 200,
            bytes: 75,
            referer: "",
            user_agent: "curl/8\n",
            duration: Duration::from_millis(2),
            upstream: "127.0.0.1:9000",
            route: "site/",
            app: "",
            request_id: "0123456789abcdef0123456789abcdef",
            grpc_status: None,
            trace: None,
        }
    }

    #[test]
    fn combined_line_is_escaped() {
        let mut b = Vec::new();
        combined(&mut b, &entry());
        let line = String::from_utf8(b).expect("utf8");
        assert_eq!(
            line,
            "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a\\\"b HTTP/1.1\" 200 75 \"-\" \"curl/8\\x0a\" 0.002 \"127.0.0.1:9000\" \"0123456789abcdef0123456789abcdef\"\n"
        );
    }

    #[test]
    fn json_line_parses_back() {
        let mut b = Vec::new();
        json(&mut b, &entry());
        let line = String::from_utf8(b).expect("utf8");
        assert!(line.ends_with("}\n"));
        assert!(line.contains("\"uri\":\"/a\\\"b\""), "{line}");
        assert!(line.contains("\"user_agent\":\"curl/8\\u000a\""), "{line}");
        assert!(line.contains("\"status\":200"), "{line}");
        assert!(line.contains("\"request_id\":\"0123456789abcdef0123456789abcdef\"}"), "{line}");
    }
}
