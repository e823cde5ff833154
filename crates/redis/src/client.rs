//! Command stage: the [`Client`] handle that callers on any runtime share, and the connection task
//! that keeps one live redis-rs connection for them.
//!
//! ```text
//! caller (any runtime) --clone of the live connection--> redis-rs pipeline --> Redis / Cluster
//!        |   fails at once while there is none; every command bounded by command_timeout
//!        +--"this connection is broken"--> connection task: reconnect with backoff, PING when idle
//! ```

use crate::connect::{Backoff, Conn, Connector};
use crate::error::{Error, Result};
use crate::options::{ClientOptions, Deployment};
use crate::value::Value;
use arc_swap::ArcSwapOption;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch, Notify};
use tracing::{debug, info, warn};

/// A handle to the deployment's connection. Cheap to clone; all clones share it.
///
/// The connection task runs on the runtime that created the client; any task on any Tokio runtime
/// (with the time driver enabled) can send commands. Every command either gets its reply or fails
/// within [`ClientOptions::command_timeout`], and fails at once while there is no connection.
/// Commands are never queued to be replayed after a reconnect. The connection task stops when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    state: Arc<State>,
    command_timeout: Duration,
    /// Dropped with the last client, which ends the connection task.
    _alive: watch::Sender<()>,
}

/// What the callers and the connection task share.
struct State {
    live: ArcSwapOption<Live>,
    connected: AtomicBool,
    /// The generation of a connection a caller found broken; the task replaces it if it is still
    /// the live one.
    broken: AtomicU64,
    wake: Notify,
}

/// The connection commands go out on now.
struct Live {
    generation: u64,
    conn: Conn,
}

impl Client {
    /// A client whose connection task runs on the current Tokio runtime. Returns at once: it
    /// connects in the background, and commands fail with [`Error::Disconnected`] until it has.
    /// Fails only for options that cannot work (see [`Error::Config`]).
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, like [`tokio::spawn`]; see [`Client::with_runtime`].
    pub fn new(opts: ClientOptions) -> Result<Client> {
        Client::spawn(opts, &Handle::current(), None)
    }

    /// A client whose connection task runs on `runtime`, e.g. a control runtime that outlives
    /// the workers. Returns at once, like [`Client::new`].
    pub fn with_runtime(opts: ClientOptions, runtime: &Handle) -> Result<Client> {
        Client::spawn(opts, runtime, None)
    }

    /// A client on the current runtime, returned once the first connection attempt (with `AUTH`
    /// and `SELECT`) has succeeded; its error otherwise (`Error::Server` for a wrong password).
    pub async fn connect(opts: ClientOptions) -> Result<Client> {
        let (first_tx, first_rx) = oneshot::channel();
        let client = Client::spawn(opts, &Handle::current(), Some(first_tx))?;
        match first_rx.await {
            Ok(Ok(())) => Ok(client),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Disconnected),
        }
    }

    fn spawn(opts: ClientOptions, runtime: &Handle, first: Option<oneshot::Sender<Result<()>>>) -> Result<Client> {
        let connector = Connector::new(&opts)?;
        let state = Arc::new(State {
            live: ArcSwapOption::empty(),
            connected: AtomicBool::new(false),
            broken: AtomicU64::new(0),
            wake: Notify::new(),
        });
        let (alive, gone) = watch::channel(());
        runtime.spawn(connection_task(connector, state.clone(), gone, first));
        Ok(Client { shared: Arc::new(Shared { state, command_timeout: opts.command_timeout, _alive: alive }) })
    }

    /// Whether the connection is up (authenticated and on the right database) right now.
    pub fn is_connected(&self) -> bool {
        self.shared.state.connected.load(Ordering::Acquire)
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
        let state = &*self.shared.state;
        if !state.connected.load(Ordering::Acquire) {
            return Err(Error::Disconnected);
        }
        let Some(live) = state.live.load_full() else { return Err(Error::Disconnected) };
        let mut cmd = redis::Cmd::new();
        for arg in args {
            cmd.arg(arg.as_ref());
        }
        let mut conn = live.conn.clone();
        let result = match tokio::time::timeout(self.shared.command_timeout, conn.send(&cmd)).await {
            Ok(Ok(value)) => return Value::from_redis(value),
            Ok(Err(e)) => Error::from_redis(e),
            Err(_) => Error::Timeout,
        };
        // A Cluster connection mends itself node by node; one server's connection is replaced.
        if result.breaks_connection() && matches!(live.conn, Conn::Single(_)) {
            if state.broken.swap(live.generation, Ordering::AcqRel) != live.generation {
                warn!(error = %result, "redis command failed; replacing the connection");
            }
            state.wake.notify_one();
        }
        Err(result)
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

/// Owns the connection for the life of the client: connect, watch it, and after a failure back
/// off and connect again, refusing commands while there is no connection.
async fn connection_task(
    mut connector: Connector,
    state: Arc<State>,
    mut gone: watch::Receiver<()>,
    mut first: Option<oneshot::Sender<Result<()>>>,
) {
    let target = connector.options().deployment.to_string();
    let mut backoff = Backoff::new(connector.options());
    let mut failed_attempts = 0u32;
    let mut generation = 0u64;
    // However the task ends (its runtime may shut down under it), callers are refused from then on.
    let _offline = Offline(state.clone());
    loop {
        let attempt = tokio::select! {
            conn = connector.connect() => conn,
            _ = gone.changed() => return,
        };
        match attempt {
            Ok(conn) => {
                info!(redis = %target, "redis connected");
                backoff.reset();
                failed_attempts = 0;
                generation += 1;
                state.live.store(Some(Arc::new(Live { generation, conn: conn.clone() })));
                state.connected.store(true, Ordering::Release);
                if let Some(first) = first.take() {
                    let _ = first.send(Ok(()));
                }
                let lost = tokio::select! {
                    error = watch_connection(conn, generation, &state, connector.options()) => error,
                    _ = gone.changed() => return,
                };
                // Flip the flag first, so callers are refused at once rather than sent to a dead
                // connection.
                state.connected.store(false, Ordering::Release);
                state.live.store(None);
                warn!(redis = %target, error = %lost, "redis connection lost");
            }
            Err(error) => {
                if failed_attempts == 0 {
                    warn!(redis = %target, %error, "redis connect failed; retrying in the background");
                } else {
                    debug!(redis = %target, %error, attempt = failed_attempts + 1, "redis connect failed");
                }
                failed_attempts += 1;
                if let Some(first) = first.take() {
                    let _ = first.send(Err(error));
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            _ = gone.changed() => return,
        }
    }
}

/// Takes the connection out of service when dropped.
struct Offline(Arc<State>);

impl Drop for Offline {
    fn drop(&mut self) {
        self.0.connected.store(false, Ordering::Release);
        self.0.live.store(None);
    }
}

/// Returns once the connection is of no more use: a caller found it broken, or a health-check
/// `PING` failed or went unanswered within the command timeout.
async fn watch_connection(mut conn: Conn, generation: u64, state: &State, opts: &ClientOptions) -> Error {
    let cluster = matches!(opts.deployment, Deployment::Cluster { .. });
    loop {
        let due = opts.health_check_due(tokio::time::Instant::now());
        tokio::select! {
            () = tokio::time::sleep_until(due) => {}
            () = state.wake.notified() => {
                if state.broken.load(Ordering::Acquire) == generation {
                    return Error::Disconnected;
                }
                continue;
            }
        }
        // A Cluster's PING goes to every node; one primary down is the Cluster's own business
        // (its slots fail until a replica takes over), so only a Cluster that answers nowhere
        // counts as lost.
        let ping = if cluster { redis::cmd("ECHO").arg("gatehouse").clone() } else { redis::cmd("PING") };
        match tokio::time::timeout(opts.command_timeout, conn.send(&ping)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Error::from_redis(e),
            Err(_) => return Error::Timeout,
        }
    }
}
