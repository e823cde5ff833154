//! Command stage: the [`Client`] handle that callers on any runtime share, and the connection task
//! that owns the one TCP connection.
//!
//! ```text
//! caller (any runtime) --try_send--> bounded queue --> connection task --one write--> Redis
//!        ^                                              | in flight (FIFO)            |
//!        +------------------- oneshot <-----------------+<------- replies ------------+
//! ```
//!
//! While there is no connection, callers are turned away at once with [`Error::Disconnected`];
//! the task reconnects in the background with exponential backoff.

use crate::conn::{reserve_read_space, Backoff, Conn};
use crate::error::{Error, Result};
use crate::options::ClientOptions;
use crate::resp::encode_command;
use crate::value::Value;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// A write buffer grown past this by one large command is replaced once it has drained.
const WBUF_KEEP: usize = 1024 * 1024;

/// A handle to one pipelined Redis connection. Cheap to clone; all clones share the connection.
///
/// The connection task runs on the runtime that created the client; any task on any Tokio runtime
/// (with the time driver enabled) can send commands. Every command either gets its reply or fails
/// within [`ClientOptions::command_timeout`], and fails at once while disconnected or when the
/// queue is full. The connection task stops when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    queue: mpsc::Sender<Request>,
    connected: Arc<AtomicBool>,
    command_timeout: std::time::Duration,
}

/// One encoded command on its way to the connection task.
struct Request {
    frame: Bytes,
    reply: oneshot::Sender<Result<Value>>,
}

/// A command written to the connection and waiting for its reply.
struct Pending {
    /// `None` for the task's own health-check `PING`.
    reply: Option<oneshot::Sender<Result<Value>>>,
    /// When the connection counts as stalled if this reply has not arrived.
    deadline: Instant,
}

/// Why the connection task stopped serving a connection.
enum Exit {
    /// Every [`Client`] is gone: the task ends.
    ClientsGone,
    /// The connection broke; reconnect.
    Lost(Error),
}

impl Client {
    /// A client whose connection task runs on the current Tokio runtime. Returns at once: it
    /// connects in the background, and commands fail with [`Error::Disconnected`] until it has.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, like [`tokio::spawn`]; see [`Client::with_runtime`].
    pub fn new(opts: ClientOptions) -> Client {
        Client::spawn(opts, &Handle::current(), None)
    }

    /// A client whose connection task runs on `runtime`, e.g. a control runtime that outlives
    /// the workers. Returns at once, like [`Client::new`].
    pub fn with_runtime(opts: ClientOptions, runtime: &Handle) -> Client {
        Client::spawn(opts, runtime, None)
    }

    /// A client on the current runtime, returned once the first connection attempt (with `AUTH`
    /// and `SELECT`) has succeeded; its error otherwise (`Error::Server` for a wrong password).
    pub async fn connect(opts: ClientOptions) -> Result<Client> {
        let (first_tx, first_rx) = oneshot::channel();
        let client = Client::spawn(opts, &Handle::current(), Some(first_tx));
        match first_rx.await {
            Ok(Ok(())) => Ok(client),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Disconnected),
        }
    }

    fn spawn(opts: ClientOptions, runtime: &Handle, first: Option<oneshot::Sender<Result<()>>>) -> Client {
        let (queue, requests) = mpsc::channel(opts.max_pending.max(1));
        let connected = Arc::new(AtomicBool::new(false));
        let command_timeout = opts.command_timeout;
        runtime.spawn(connection_task(opts, requests, connected.clone(), first));
        Client { shared: Arc::new(Shared { queue, connected, command_timeout }) }
    }

    /// Whether the connection is up (authenticated and on the right database) right now.
    pub fn is_connected(&self) -> bool {
        // A closed queue means the connection task is gone with its runtime, flag and all.
        self.shared.connected.load(Ordering::Acquire) && !self.shared.queue.is_closed()
    }

    /// Sends any command and returns its reply, e.g. `client.cmd(&[b"INCRBY", b"hits", b"5"])`.
    ///
    /// Commands that change the state of the shared connection or block it (`SELECT`, `AUTH`,
    /// `MULTI`/`EXEC`, `SUBSCRIBE`, `BLPOP`, `XREAD BLOCK`, ...) are refused with
    /// [`Error::InvalidCommand`]: use the options, Lua scripts or [`Client::subscribe`] instead.
    pub async fn cmd(&self, args: &[&[u8]]) -> Result<Value> {
        check_shareable(args)?;
        self.request(args).await
    }

    /// Sends a command known to be safe on a shared connection.
    pub(crate) async fn request<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value> {
        let mut frame = BytesMut::new();
        encode_command(&mut frame, args);
        self.send(frame.freeze()).await
    }

    async fn send(&self, frame: Bytes) -> Result<Value> {
        let shared = &*self.shared;
        if !shared.connected.load(Ordering::Acquire) {
            return Err(Error::Disconnected);
        }
        let (reply, response) = oneshot::channel();
        shared.queue.try_send(Request { frame, reply }).map_err(|e| match e {
            TrySendError::Full(_) => Error::QueueFull,
            TrySendError::Closed(_) => Error::Disconnected,
        })?;
        match tokio::time::timeout(shared.command_timeout, response).await {
            Ok(Ok(result)) => result,
            // The connection task is gone (its runtime shut down).
            Ok(Err(_)) => Err(Error::Disconnected),
            Err(_) => Err(Error::Timeout),
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("connected", &self.is_connected()).finish_non_exhaustive()
    }
}

/// Refuses commands that would break the request/reply pairing or the connection state that
/// every caller shares.
fn check_shareable(args: &[&[u8]]) -> Result<()> {
    let Some(name) = args.first() else { return Err(Error::InvalidCommand("empty command".into())) };
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    let reason = if ["AUTH", "SELECT", "HELLO", "RESET", "QUIT"].into_iter().any(is) {
        "changes connection state; set it in ClientOptions"
    } else if ["MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"].into_iter().any(is) {
        "transactions need a dedicated connection; use a Lua script (Client::eval)"
    } else if ["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR"]
        .into_iter()
        .any(is)
    {
        "needs a dedicated connection; use Client::subscribe"
    } else if ["BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "WAIT", "WAITAOF"]
        .into_iter()
        .any(is)
        || (["XREAD", "XREADGROUP"].into_iter().any(is) && args.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK")))
    {
        "blocking commands would stall every other command on the shared connection"
    } else {
        return Ok(());
    };
    Err(Error::InvalidCommand(format!("{}: {reason}", String::from_utf8_lossy(name).to_ascii_uppercase())))
}

/// Owns the connection for the life of the client: connect, serve, and after a failure back off
/// and connect again, refusing commands while there is no connection.
async fn connection_task(
    opts: ClientOptions,
    mut requests: mpsc::Receiver<Request>,
    connected: Arc<AtomicBool>,
    mut first: Option<oneshot::Sender<Result<()>>>,
) {
    let mut backoff = Backoff::new(&opts);
    let mut failed_attempts = 0u32;
    loop {
        let attempt = tokio::select! {
            conn = Conn::open(&opts) => conn,
            () = refuse_all(&mut requests) => return,
        };
        match attempt {
            Ok(mut conn) => {
                info!(addr = %opts.addr, "redis connected");
                backoff.reset();
                failed_attempts = 0;
                connected.store(true, Ordering::Release);
                if let Some(first) = first.take() {
                    let _ = first.send(Ok(()));
                }
                match serve(&mut conn, &mut requests, &opts, &connected).await {
                    Exit::ClientsGone => return,
                    Exit::Lost(error) => warn!(addr = %opts.addr, %error, "redis connection lost"),
                }
            }
            Err(error) => {
                if failed_attempts == 0 {
                    warn!(addr = %opts.addr, %error, "redis connect failed; retrying in the background");
                } else {
                    debug!(addr = %opts.addr, %error, attempt = failed_attempts + 1, "redis connect failed");
                }
                failed_attempts += 1;
                if let Some(first) = first.take() {
                    let _ = first.send(Err(error));
                }
            }
        }
        let delay = backoff.next_delay();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = refuse_all(&mut requests) => return,
        }
    }
}

/// Answers every request with [`Error::Disconnected`] until all clients are gone. Only requests
/// queued just before the connection broke get here: callers check the connected flag first.
async fn refuse_all(requests: &mut mpsc::Receiver<Request>) {
    while let Some(request) = requests.recv().await {
        let _ = request.reply.send(Err(Error::Disconnected));
    }
}

/// Serves one connection until it breaks, then fails whatever was in flight.
async fn serve(
    conn: &mut Conn,
    requests: &mut mpsc::Receiver<Request>,
    opts: &ClientOptions,
    connected: &AtomicBool,
) -> Exit {
    let mut in_flight = VecDeque::new();
    let exit = pump(conn, requests, opts, &mut in_flight).await;
    // Flip the flag first, so callers retrying right away are refused without queueing.
    connected.store(false, Ordering::Release);
    let mut first_error = match &exit {
        // The reply that broke the parser belongs to the oldest command.
        Exit::Lost(Error::Protocol(msg)) => Some(Error::Protocol(msg.clone())),
        _ => None,
    };
    let stalled = matches!(exit, Exit::Lost(Error::Timeout));
    for pending in in_flight {
        let error = first_error.take().unwrap_or(if stalled { Error::Timeout } else { Error::Disconnected });
        if let Some(reply) = pending.reply {
            let _ = reply.send(Err(error));
        }
    }
    exit
}

/// The connection's event loop: batch queued commands into one write, match replies to commands
/// in order, ping when idle, and give up on a connection whose oldest command is overdue.
async fn pump(
    conn: &mut Conn,
    requests: &mut mpsc::Receiver<Request>,
    opts: &ClientOptions,
    in_flight: &mut VecDeque<Pending>,
) -> Exit {
    let max_in_flight = opts.max_pending.max(1);
    let Conn { stream, rbuf, parser } = conn;
    let (mut rd, mut wr) = stream.split();
    let mut wbuf = BytesMut::with_capacity(16 * 1024);
    let mut last_read = Instant::now();
    let timer = tokio::time::sleep_until(opts.health_check_due(last_read));
    tokio::pin!(timer);
    let mut armed_for = None;
    loop {
        let wake = match in_flight.front() {
            Some(oldest) => oldest.deadline,
            None => opts.health_check_due(last_read),
        };
        if armed_for != Some(wake) {
            timer.as_mut().reset(wake);
            armed_for = Some(wake);
        }
        // Take new commands only once the previous batch is written: they pile up in the queue
        // meanwhile and go out together in the next write.
        let accepting = wbuf.is_empty() && in_flight.len() < max_in_flight;
        tokio::select! {
            biased;
            read = tokio::io::AsyncReadExt::read_buf(&mut rd, rbuf) => {
                match read {
                    Ok(0) => return Exit::Lost(Error::Disconnected),
                    Ok(_) => last_read = Instant::now(),
                    Err(e) => return Exit::Lost(Error::Io(e)),
                }
                loop {
                    let reply = match parser.parse(rbuf) {
                        Ok(None) => break,
                        Ok(Some(value)) => Ok(value),
                        Err(e) if e.keeps_connection() => Err(e),
                        Err(e) => return Exit::Lost(e),
                    };
                    let Some(pending) = in_flight.pop_front() else {
                        return Exit::Lost(Error::Protocol("reply without a pending command".into()));
                    };
                    if let Some(reply_to) = pending.reply {
                        // The caller may have timed out and gone; the reply is dropped then.
                        let _ = reply_to.send(reply);
                    }
                }
                reserve_read_space(rbuf);
            }
            written = tokio::io::AsyncWriteExt::write_all_buf(&mut wr, &mut wbuf), if !wbuf.is_empty() => {
                if let Err(e) = written {
                    return Exit::Lost(Error::Io(e));
                }
                if wbuf.capacity() > WBUF_KEEP {
                    wbuf = BytesMut::with_capacity(16 * 1024);
                }
            }
            request = requests.recv(), if accepting => {
                let Some(request) = request else { return Exit::ClientsGone };
                let deadline = Instant::now() + opts.command_timeout;
                enqueue(request, &mut wbuf, in_flight, deadline);
                while in_flight.len() < max_in_flight {
                    let Ok(request) = requests.try_recv() else { break };
                    enqueue(request, &mut wbuf, in_flight, deadline);
                }
            }
            () = &mut timer => {
                if !in_flight.is_empty() {
                    return Exit::Lost(Error::Timeout);
                }
                encode_command(&mut wbuf, &[b"PING"]);
                in_flight.push_back(Pending { reply: None, deadline: Instant::now() + opts.command_timeout });
            }
        }
    }
}

fn enqueue(request: Request, wbuf: &mut BytesMut, in_flight: &mut VecDeque<Pending>, deadline: Instant) {
    if request.reply.is_closed() {
        // The caller timed out while the command was queued: do not run it late.
        return;
    }
    wbuf.extend_from_slice(&request.frame);
    in_flight.push_back(Pending { reply: Some(request.reply), deadline });
}
