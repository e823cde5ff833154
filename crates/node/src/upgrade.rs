//! Binary upgrade without downtime, on SIGUSR2 as with nginx: the running process starts its binary
//! again (the file at the path it was started from, so a build installed there since is the one
//! that runs) with the same arguments and its listening sockets inherited, waits until the new
//! process says it is ready, then stops accepting and drains. The sockets never close, so
//! connections waiting in their accept queues are accepted by the new process instead of being
//! reset; if the new process fails to start, the old one goes on as before.
//!
//! The hand-over travels in one environment variable, `GATEHOUSE_UPGRADE`, as JSON:
//! `{"sockets": {"listener:web": {"bind": "0.0.0.0:443", "fds": [5, 6]}, "admin": {…}}, "ready_fd": 9}`.
//! Sockets go to the listener (or admin, or demo backend) of the same name and configured address;
//! the new process writes a line to `ready_fd` once it serves, and closes what nobody took. An
//! HTTP/3 listener's UDP sockets go too (`"udp": {"udp:web": {"bind": …, "fds": [10, 11],
//! "pairs": [12, 13]}}`), each with one end of a Unix datagram pair on which the new process
//! sends the packets of the old one's QUIC connections, told apart by the generation in their
//! connection ids (`quic_generation`, the old process's; see `gatehouse_http3::handover`).
//!
//! Sockets passed by systemd's socket activation (`LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`)
//! are taken over the same way when the process was not started by an upgrade: each goes to
//! the listener (or admin) whose name its `FileDescriptorName=` gives, else to the one whose
//! configured address it is bound to; stream sockets serve TCP, datagram sockets HTTP/3.

use crate::error::{NotReady, UpgradeError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

pub(crate) const ENV: &str = "GATEHOUSE_UPGRADE";
/// How long the new process may take to become ready (loading many certificates takes a while).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// What the new process writes when it serves.
const READY_LINE: &[u8] = b"ready\n";

#[derive(Serialize, Deserialize)]
struct Handover {
    sockets: BTreeMap<String, Entry>,
    ready_fd: RawFd,
    #[serde(default)]
    udp: BTreeMap<String, UdpEntry>,
    #[serde(default)]
    quic_generation: u8,
}

#[derive(Serialize, Deserialize)]
struct UdpEntry {
    bind: String,
    fds: Vec<RawFd>,
    pairs: Vec<RawFd>,
}

/// A listener's QUIC sockets to hand over: key, configured address, and each socket with the
/// end of its pair that the new process writes to.
pub type UdpHandover<'a> = (String, String, Vec<(&'a UdpSocket, UnixDatagram)>);

#[derive(Serialize, Deserialize)]
struct Entry {
    bind: String,
    fds: Vec<RawFd>,
}

/// The executable and arguments this process was started with, resolved at start: after the file
/// is replaced, `/proc/self/exe` names the deleted old one, the path names the new one.
static STARTED_AS: OnceLock<Option<(PathBuf, Vec<OsString>)>> = OnceLock::new();

/// Sockets handed down by the process this one replaces, by key.
#[derive(Default)]
pub struct Inherited {
    sockets: BTreeMap<String, (String, Vec<TcpListener>)>,
    udp: BTreeMap<String, (String, Vec<(UdpSocket, UnixDatagram)>)>,
    ready: Option<OwnedFd>,
    activated: Vec<Activated>,
}

/// A socket passed by systemd: its `FileDescriptorName=`, the address it is bound to, and itself.
struct Activated {
    name: String,
    addr: SocketAddr,
    socket: ActivatedSocket,
}

enum ActivatedSocket {
    Stream(TcpListener),
    Datagram(UdpSocket),
}

impl Activated {
    /// Whether this socket is the one of `key` (`listener:NAME`, `udp:NAME`, `admin`…) for the
    /// configured address `bind`: by name when systemd gave one other than its default
    /// (`unknown`), else by address.
    fn is_for(&self, key: &str, bind: &str) -> bool {
        let name = key.split_once(':').map_or(key, |(_, n)| n);
        if !self.name.is_empty() && self.name != "unknown" && self.name == name {
            return true;
        }
        bind.parse::<SocketAddr>().is_ok_and(|b| b == self.addr)
    }
}

impl Inherited {
    /// Takes over what the previous process handed down, when this one was started by an upgrade.
    /// Must run first in `main`, before this process opens any descriptor of its own.
    pub fn from_env() -> Result<Inherited, UpgradeError> {
        let _ = STARTED_AS
            .set(std::env::current_exe().ok().map(|exe| (exe, std::env::args_os().skip(1).collect::<Vec<_>>())));
        let Some(text) = std::env::var_os(ENV) else {
            return Inherited::activated();
        };
        let handover: Handover = serde_json::from_str(&text.to_string_lossy()).map_err(UpgradeError::NotAHandover)?;
        let mut seen = HashSet::new();
        let udp_fds = handover.udp.values().flat_map(|e| e.fds.iter().chain(e.pairs.iter()));
        let all = handover.sockets.values().flat_map(|e| e.fds.iter()).chain(udp_fds).chain([&handover.ready_fd]);
        for &fd in all {
            if fd < 3 || !seen.insert(fd) {
                return Err(UpgradeError::Descriptor { fd });
            }
        }
        let ready = Some(adopt(handover.ready_fd, "pipe:")?);
        let mut sockets = BTreeMap::new();
        for (key, entry) in handover.sockets {
            let listeners = entry
                .fds
                .iter()
                .map(|&fd| adopt(fd, "socket:").map(TcpListener::from))
                .collect::<Result<Vec<_>, _>>()?;
            sockets.insert(key, (entry.bind, listeners));
        }
        let mut udp = BTreeMap::new();
        for (key, entry) in handover.udp {
            if entry.fds.len() != entry.pairs.len() {
                return Err(UpgradeError::NotAHandover(serde::de::Error::custom("a UDP socket without its pair")));
            }
            let mut taken = Vec::new();
            for (&fd, &pair) in entry.fds.iter().zip(&entry.pairs) {
                taken.push((UdpSocket::from(adopt(fd, "socket:")?), UnixDatagram::from(adopt(pair, "socket:")?)));
            }
            udp.insert(key, (entry.bind, taken));
        }
        if !udp.is_empty() {
            gatehouse_http3::follow_generation(handover.quic_generation);
        }
        Ok(Inherited { sockets, udp, ready, activated: Vec::new() })
    }

    /// The sockets systemd passed (socket activation), none when it passed none to this process.
    fn activated() -> Result<Inherited, UpgradeError> {
        let fds = sd_notify::listen_fds_with_names().map_err(UpgradeError::Activation)?;
        let mut activated = Vec::new();
        for (fd, name) in fds {
            let owned = adopt(fd, "socket:")?;
            let sock = socket2::SockRef::from(&owned);
            let explain = |source| UpgradeError::Inherited { fd, source };
            let addr = sock.local_addr().map_err(explain)?.as_socket().ok_or(UpgradeError::NotInet { fd })?;
            let socket = match sock.r#type().map_err(explain)? {
                socket2::Type::STREAM => ActivatedSocket::Stream(TcpListener::from(owned)),
                socket2::Type::DGRAM => ActivatedSocket::Datagram(UdpSocket::from(owned)),
                _ => return Err(UpgradeError::NotInet { fd }),
            };
            activated.push(Activated { name, addr, socket });
        }
        Ok(Inherited { activated, ..Inherited::default() })
    }

    /// The sockets handed down under `key` for the configured address `bind`, if any.
    pub fn take(&mut self, key: &str, bind: &str) -> Option<Vec<TcpListener>> {
        if let Some(i) =
            self.activated.iter().position(|a| matches!(a.socket, ActivatedSocket::Stream(_)) && a.is_for(key, bind))
        {
            let a = self.activated.remove(i);
            tracing::info!(key, fd_name = a.name, addr = %a.addr, "serving on a socket passed by systemd");
            if let ActivatedSocket::Stream(s) = a.socket {
                return Some(vec![s]);
            }
        }
        match self.sockets.remove(key) {
            Some((b, sockets)) if b == bind && !sockets.is_empty() => Some(sockets),
            Some(_) => {
                tracing::info!(key, bind, "the address changed; binding anew instead of taking over");
                None
            }
            None => None,
        }
    }

    /// The QUIC sockets handed down under `key` for `bind`, each with its pair to the previous
    /// process; none when the address changed.
    /// Sockets systemd passed have no pair.
    pub fn take_udp(&mut self, key: &str, bind: &str) -> Vec<(UdpSocket, Option<UnixDatagram>)> {
        if let Some(i) =
            self.activated.iter().position(|a| matches!(a.socket, ActivatedSocket::Datagram(_)) && a.is_for(key, bind))
        {
            let a = self.activated.remove(i);
            tracing::info!(key, fd_name = a.name, addr = %a.addr, "serving on a socket passed by systemd");
            if let ActivatedSocket::Datagram(s) = a.socket {
                return vec![(s, None)];
            }
        }
        match self.udp.remove(key) {
            Some((b, sockets)) if b == bind => sockets.into_iter().map(|(s, pair)| (s, Some(pair))).collect(),
            _ => Vec::new(),
        }
    }

    /// Whether this process was started by an upgrade.
    pub fn is_upgrade(&self) -> bool {
        self.ready.is_some()
    }

    /// The one socket handed down under `key` for `bind`, if any.
    pub fn take_one(&mut self, key: &str, bind: &str) -> Option<TcpListener> {
        self.take(key, bind)?.into_iter().next()
    }

    /// Tells the previous process that this one serves (it then drains and exits), and closes the
    /// sockets no listener took.
    pub fn ready(&mut self) {
        let untaken = std::mem::take(&mut self.sockets).into_keys().chain(std::mem::take(&mut self.udp).into_keys());
        for key in untaken {
            tracing::info!(key, "closing a handed-down socket no listener took");
        }
        for a in std::mem::take(&mut self.activated) {
            tracing::warn!(name = a.name, addr = %a.addr, "closing a socket systemd passed that no listener took: no listener is named so or bound to its address");
        }
        if let Some(fd) = self.ready.take() {
            if let Err(e) = std::fs::File::from(fd).write_all(READY_LINE) {
                tracing::warn!(error = %e, "could not tell the previous process that this one is ready");
            }
        }
    }
}

/// Makes `fd`, left open across exec by the previous process, an owned descriptor of this one,
/// after checking that it is open and of the expected kind (`socket:` or `pipe:`).
fn adopt(fd: RawFd, kind: &'static str) -> Result<OwnedFd, UpgradeError> {
    let link =
        std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|source| UpgradeError::NotOpen { fd, source })?;
    if !link.to_string_lossy().starts_with(kind) {
        return Err(UpgradeError::WrongKind { fd, is: link, kind });
    }
    // SAFETY: `fd` is open (checked above) and owned by nothing else in this process: it was left
    // open across exec for us by the process that started this one, `from_env` runs before this
    // process opens any descriptor of its own, and each number is adopted once (duplicates are
    // refused by the caller). Inherited descriptors can only be taken over this way.
    #[allow(unsafe_code)]
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC)
        .map_err(|e| UpgradeError::Inherited { fd, source: e.into() })?;
    Ok(owned)
}

/// A new process started by [`start`], not yet ready.
pub struct Starting {
    /// Its process id.
    pub pid: u32,
    ready: std::fs::File,
}

/// Starts the binary again with `sockets` (key, configured address, sockets) and the QUIC
/// sockets `udp` inherited.
pub fn start(
    sockets: Vec<(String, String, Vec<&TcpListener>)>,
    udp: Vec<UdpHandover<'_>>,
) -> Result<Starting, UpgradeError> {
    let Some(Some((exe, args))) = STARTED_AS.get() else {
        return Err(UpgradeError::UnknownBinary);
    };
    // Plain dup(2) copies lack close-on-exec, so the new process inherits exactly these; they are
    // closed here once it has started.
    let mut keep: Vec<OwnedFd> = Vec::new();
    let mut dup = |fd: std::os::fd::BorrowedFd<'_>| -> Result<RawFd, UpgradeError> {
        let copy = rustix::io::dup(fd).map_err(|e| UpgradeError::Dup(e.into()))?;
        let raw = copy.as_raw_fd();
        keep.push(copy);
        Ok(raw)
    };
    let mut entries = BTreeMap::new();
    for (key, bind, listeners) in sockets {
        let fds = listeners.iter().map(|l| dup(l.as_fd())).collect::<Result<Vec<_>, _>>()?;
        entries.insert(key, Entry { bind, fds });
    }
    let mut udp_entries = BTreeMap::new();
    for (key, bind, pairs) in udp {
        let mut entry = UdpEntry { bind, fds: Vec::new(), pairs: Vec::new() };
        for (socket, pair) in &pairs {
            entry.fds.push(dup(socket.as_fd())?);
            entry.pairs.push(dup(pair.as_fd())?);
        }
        udp_entries.insert(key, entry);
    }
    let (reader, writer) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| UpgradeError::Pipe(e.into()))?;
    let ready_fd = dup(writer.as_fd())?;
    drop(writer);
    let quic_generation = gatehouse_http3::quic_generation();
    let handover = Handover { sockets: entries, ready_fd, udp: udp_entries, quic_generation };
    let handover = serde_json::to_string(&handover).map_err(UpgradeError::Encode)?;
    let child = Command::new(exe)
        .args(args)
        .env(ENV, handover)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|source| UpgradeError::Spawn { exe: exe.clone(), source })?;
    drop(keep);
    let pid = child.id();
    // Reaps the new process if it exits while this one still runs (a failed start).
    let _ = std::thread::Builder::new().name("upgrade-reaper".into()).spawn(move || {
        let mut child = child;
        if let Ok(status) = child.wait() {
            tracing::info!(pid, %status, "the process started by the upgrade exited");
        }
    });
    Ok(Starting { pid, ready: std::fs::File::from(reader) })
}

impl Starting {
    /// Waits until the new process is ready; an error if it exits or takes too long first.
    pub async fn ready(self) -> Result<u32, UpgradeError> {
        let pid = self.pid;
        let mut reader = self.ready;
        let read = tokio::task::spawn_blocking(move || {
            let mut line = [0u8; READY_LINE.len()];
            reader.read_exact(&mut line).map(|()| line == READY_LINE)
        });
        match tokio::time::timeout(READY_TIMEOUT, read).await {
            Ok(Ok(Ok(true))) => Ok(pid),
            Ok(Ok(Ok(false))) => Err(UpgradeError::NotReady { pid, why: NotReady::Garbled }),
            Ok(Ok(Err(_))) => Err(UpgradeError::NotReady { pid, why: NotReady::Exited }),
            Ok(Err(e)) => Err(UpgradeError::NotReady { pid, why: NotReady::Wait(e) }),
            Err(_) => {
                // Not ready in time: it must not take connections from the listeners it shares.
                if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                Err(UpgradeError::NotReady { pid, why: NotReady::Timeout(READY_TIMEOUT) })
            }
        }
    }
}
