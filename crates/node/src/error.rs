//! Why the node could not start, apply a configuration or hand its sockets to a new binary: one
//! error for the node, each variant a fact with its cause. `gatehouse run` prints it and exits;
//! a reload or a revision that fails is logged and refused, and the running configuration stays.

use std::net::SocketAddr;
use std::path::PathBuf;

/// A boxed cause, for settings whose failures come from several libraries.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why the node could not do what it was asked.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeError {
    /// A file could not be read, opened, created or written.
    File {
        /// The setting that names it (`access log`, `admin.token_file`, ...), if not the
        /// configuration file itself.
        setting: Option<&'static str>,
        /// `read`, `open`, `create` or `write`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration does not compile; every error is listed.
    Config {
        /// What it was read from (a path, or the built-in quick start).
        file: String,
        /// The published revision merged into it, if any.
        revision: Option<u64>,
        /// The errors.
        errors: gatehouse_config::ConfigErrors,
    },
    /// A published revision does not merge into this node's file.
    Document(gatehouse_control::document::DocumentError),
    /// The merged configuration of a published revision does not compile.
    Revision(gatehouse_config::ConfigErrors),
    /// A part of the process could not be started (the runtime, a signal handler, the workers,
    /// the compile thread, the readiness pipe of an upgrade).
    Start {
        /// What.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The compile thread is gone (only while the process exits).
    CompileThread {
        /// Whether it stopped (else it dropped the job).
        stopped: bool,
    },
    /// A socket of the node's own (admin, demo backend) could not be bound or set up.
    Socket {
        /// Which (`admin`, `demo`).
        key: String,
        /// The address, when binding failed.
        addr: Option<SocketAddr>,
        /// Why.
        source: std::io::Error,
    },
    /// A listener's sockets could not be bound or taken over.
    Listener(gatehouse_listener::BindError),
    /// The snapshot did not build.
    Snapshot(gatehouse_proxy::SnapshotError),
    /// The revision store cannot be opened or followed.
    Store(gatehouse_control::StoreError),
    /// The cluster's Redis settings cannot be used.
    Cluster(gatehouse_cluster::ClusterError),
    /// Settings that cannot be used (certificates, CA files, TLS of listeners and admin, token
    /// files), every one listed.
    Settings(Vec<Setting>),
    /// The system gave no random bytes for a key or token.
    NoRandomness(&'static str),
    /// The admin API is on but there is no revision store for it.
    NoRevisionStore,
    /// The configuration has no certificate store to manage.
    NoCertStore,
    /// Handing the sockets to a new binary failed.
    Upgrade(UpgradeError),
    /// The trace exporter could not start (`tracing:`).
    Tracing(gatehouse_otel::ExportError),
    /// The process log could not be set up (`log:`).
    Log(gatehouse_telemetry::process_log::InitError),
}

/// A setting that cannot be used: where, and why.
#[derive(Debug)]
pub struct Setting {
    /// The setting and, where there is one, its file (`tls.certificates[0]: cert.pem`).
    pub at: String,
    /// Why.
    pub cause: Cause,
}

impl Setting {
    /// A setting at `at` refused for `cause`.
    pub fn new(at: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Setting { at: at.into(), cause: cause.into() }
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.cause)
    }
}

/// Why a binary upgrade could not hand over or take over the sockets.
#[derive(Debug)]
#[non_exhaustive]
pub enum UpgradeError {
    /// The hand-over variable is not one a gatehouse process wrote.
    NotAHandover(serde_json::Error),
    /// The hand-over names a descriptor twice, or a standard stream.
    Descriptor {
        /// The descriptor.
        fd: i32,
    },
    /// A handed-down descriptor is not open.
    NotOpen {
        /// The descriptor.
        fd: i32,
        /// Why.
        source: std::io::Error,
    },
    /// A handed-down descriptor is not of the kind expected.
    WrongKind {
        /// The descriptor.
        fd: i32,
        /// What it is.
        is: PathBuf,
        /// What it should be (`socket:`, `pipe:`).
        kind: &'static str,
    },
    /// A handed-down descriptor could not be made this process's own.
    Inherited {
        /// The descriptor.
        fd: i32,
        /// Why.
        source: std::io::Error,
    },
    /// The readiness pipe could not be made.
    Pipe(std::io::Error),
    /// The sockets systemd passed (`LISTEN_FDS`) could not be read.
    Activation(std::io::Error),
    /// A socket systemd passed is not an IP stream or datagram socket.
    NotInet {
        /// The descriptor.
        fd: i32,
    },
    /// The path of the running binary is unknown.
    UnknownBinary,
    /// A socket could not be duplicated for the new process.
    Dup(std::io::Error),
    /// The hand-over could not be written.
    Encode(serde_json::Error),
    /// The new binary could not be started.
    Spawn {
        /// The binary.
        exe: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The task waiting for the new process ended abnormally.
    Task(tokio::task::JoinError),
    /// The new process did not say it was ready.
    NotReady {
        /// Its id.
        pid: u32,
        /// What happened instead.
        why: NotReady,
    },
}

/// What a new process did instead of saying it was ready.
#[derive(Debug)]
#[non_exhaustive]
pub enum NotReady {
    /// It wrote something else on the readiness pipe.
    Garbled,
    /// It exited first (its log says why).
    Exited,
    /// Waiting for it failed.
    Wait(tokio::task::JoinError),
    /// It took longer than allowed, and was killed.
    Timeout(std::time::Duration),
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeError::File { setting, action, path, source } => {
                if let Some(s) = setting {
                    write!(f, "{s}: ")?;
                }
                write!(f, "cannot {action} {}: {source}", path.display())
            }
            NodeError::Config { file, revision: None, errors } => {
                write!(f, "invalid configuration in {file}:\n{errors}")
            }
            NodeError::Config { file, revision: Some(n), errors } => {
                write!(f, "invalid configuration in {file} with revision {n}:\n{errors}")
            }
            NodeError::Document(e) => e.fmt(f),
            NodeError::Revision(errors) => errors.fmt(f),
            NodeError::Start { what, source } => write!(f, "cannot {what}: {source}"),
            NodeError::CompileThread { stopped: true } => f.write_str("the compile thread has stopped"),
            NodeError::CompileThread { stopped: false } => f.write_str("the compile thread dropped a job"),
            NodeError::Socket { key, addr: Some(addr), source } => write!(f, "{key}: cannot bind {addr}: {source}"),
            NodeError::Socket { key, addr: None, source } => write!(f, "{key}: {source}"),
            NodeError::Listener(e) => e.fmt(f),
            NodeError::Snapshot(e) => e.fmt(f),
            NodeError::Store(e) => e.fmt(f),
            NodeError::Cluster(e) => write!(f, "redis: {e}"),
            NodeError::Settings(list) => {
                for (i, s) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    s.fmt(f)?;
                }
                Ok(())
            }
            NodeError::NoRandomness(what) => write!(f, "{what}: no system randomness"),
            NodeError::NoRevisionStore => f.write_str("the admin API needs a revision store"),
            NodeError::NoCertStore => f.write_str("the configuration has no certificate store (tls.store)"),
            NodeError::Upgrade(e) => e.fmt(f),
            NodeError::Log(e) => e.fmt(f),
            NodeError::Tracing(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for NodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NodeError::File { source, .. } | NodeError::Start { source, .. } | NodeError::Socket { source, .. } => {
                Some(source)
            }
            NodeError::Document(e) => Some(e),
            NodeError::Listener(e) => Some(e),
            NodeError::Snapshot(e) => Some(e),
            NodeError::Store(e) => Some(e),
            NodeError::Cluster(e) => Some(e),
            NodeError::Upgrade(e) => Some(e),
            NodeError::Log(e) => Some(e),
            NodeError::Tracing(e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env = crate::upgrade::ENV;
        match self {
            UpgradeError::NotAHandover(e) => write!(f, "{env} is not a hand-over from a gatehouse process: {e}"),
            UpgradeError::Descriptor { fd } => write!(f, "{env} names descriptor {fd} twice or a standard stream"),
            UpgradeError::NotOpen { fd, source } => write!(f, "inherited descriptor {fd} is not open: {source}"),
            UpgradeError::WrongKind { fd, is, kind } => {
                write!(f, "inherited descriptor {fd} is {}, not a {kind}", is.display())
            }
            UpgradeError::Inherited { fd, source } => write!(f, "inherited descriptor {fd}: {source}"),
            UpgradeError::Pipe(e) => write!(f, "cannot make the readiness pipe: {e}"),
            UpgradeError::Activation(e) => write!(f, "cannot take the sockets systemd passed (LISTEN_FDS): {e}"),
            UpgradeError::NotInet { fd } => {
                write!(f, "socket {fd} passed by systemd is not an IP stream or datagram socket")
            }
            UpgradeError::UnknownBinary => f.write_str("the path of the running binary is unknown"),
            UpgradeError::Dup(e) => write!(f, "cannot hand a socket over: {e}"),
            UpgradeError::Encode(e) => e.fmt(f),
            UpgradeError::Task(e) => e.fmt(f),
            UpgradeError::Spawn { exe, source } => write!(f, "cannot start {}: {source}", exe.display()),
            UpgradeError::NotReady { pid, why } => match why {
                NotReady::Garbled => write!(f, "process {pid} sent something else than ready"),
                NotReady::Exited => write!(f, "process {pid} exited before it was ready (its log says why)"),
                NotReady::Wait(e) => write!(f, "waiting for process {pid}: {e}"),
                NotReady::Timeout(t) => write!(f, "process {pid} was not ready within {t:?}; killed"),
            },
        }
    }
}

impl std::error::Error for UpgradeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpgradeError::NotAHandover(e) | UpgradeError::Encode(e) => Some(e),
            UpgradeError::Dup(e)
            | UpgradeError::Pipe(e)
            | UpgradeError::Activation(e)
            | UpgradeError::Spawn { source: e, .. } => Some(e),
            UpgradeError::NotOpen { source: e, .. } | UpgradeError::Inherited { source: e, .. } => Some(e),
            UpgradeError::NotReady { why: NotReady::Wait(e), .. } | UpgradeError::Task(e) => Some(e),
            _ => None,
        }
    }
}

impl From<UpgradeError> for NodeError {
    fn from(e: UpgradeError) -> Self {
        NodeError::Upgrade(e)
    }
}
