//! systemd's service protocol (sd_notify(3)) through the sd-notify crate, for `Type=notify`
//! units: `READY=1` once the listeners serve, `RELOADING=1` with `MONOTONIC_USEC` then `READY=1`
//! around a reload, `STOPPING=1` when draining starts, `WATCHDOG=1` at half the unit's
//! `WatchdogSec`, and `MAINPID` from a process that took over in a binary upgrade. Without
//! `NOTIFY_SOCKET` (not run by systemd) every call does nothing.

use sd_notify::NotifyState;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Set once a message could not be sent, so the failure is logged once.
static FAILED: AtomicBool = AtomicBool::new(false);

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        if !FAILED.swap(true, Relaxed) {
            tracing::warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET)");
        }
    }
}

/// The listeners serve; `upgrade`: this process took over from another, and is the main one now.
pub fn ready(upgrade: bool) {
    if upgrade {
        send(&[NotifyState::MainPid(std::process::id()), NotifyState::Ready]);
    } else {
        send(&[NotifyState::Ready, NotifyState::Status("serving")]);
    }
}

/// A reload starts.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// A reload ended (applied or refused: the node serves either way).
pub fn reloaded(applied: bool) {
    let status = if applied { "serving" } else { "serving; the last reload was refused" };
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// Draining starts.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

/// Pings systemd's watchdog at half the unit's `WatchdogSec`, when it is set, on the control
/// runtime until the process ends (drain included): a control runtime that stops running stops
/// the pings, and systemd restarts the node.
pub fn watchdog() {
    let Some(interval) = sd_notify::watchdog_enabled() else { return };
    let every = (interval / 2).max(std::time::Duration::from_millis(10));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            send(&[NotifyState::Watchdog]);
        }
    });
}
