//! Pub/sub stage: a [`Subscription`] owns a dedicated RESP3 connection that subscribes to a fixed
//! set of channels, subscribes again after every reconnect, and tells the consumer when messages
//! may have been missed.

use crate::client::Client;
use crate::connect::{Backoff, Connector};
use crate::error::{Error, Result};
use crate::options::ClientOptions;
use bytes::Bytes;
use redis::aio::{AsyncPushSender, MultiplexedConnection, SendError};
use redis::{PushInfo, PushKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// Pushes a connection may hold for a consumer that is behind; beyond that they are dropped and
/// the consumer is told to re-sync ([`Event::Reconnected`]).
const PUSH_BACKLOG: usize = 4096;

/// A message published to one of the subscribed channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The channel it was published to.
    pub channel: Bytes,
    /// What was published.
    pub payload: Bytes,
}

/// What a [`Subscription`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// All channels are subscribed for the first time: messages published from now on arrive.
    /// Load the state the messages update after this, not before.
    Subscribed,
    /// Messages may have been lost (the connection broke and all channels are subscribed again on
    /// a new one, or the consumer fell too far behind): re-sync the state they update.
    Reconnected,
    /// A published message.
    Message(Message),
}

/// Messages from a set of channels, on a dedicated connection that reconnects by itself. The
/// connection closes when the subscription is dropped.
#[derive(Debug)]
pub struct Subscription {
    events: mpsc::Receiver<Event>,
    connected: Arc<AtomicBool>,
}

impl Subscription {
    /// The next event; `None` only if the subscription task has stopped (its runtime shut down).
    #[allow(clippy::should_implement_trait)] // async, so not an `Iterator`
    pub async fn next(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// Whether the channels are subscribed on a live connection right now.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }
}

impl Client {
    /// Subscribes to `channels` on a new dedicated connection whose task runs on the current
    /// runtime. Returns at once; the first event is [`Event::Subscribed`] once the channels are
    /// subscribed. Fails if `channels` is empty or the options cannot work.
    ///
    /// On a Redis Cluster the subscription is classic pub/sub on one node (the seeds in turn):
    /// the Cluster carries every `PUBLISH` to every node.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub fn subscribe<C: AsRef<[u8]>>(opts: ClientOptions, channels: &[C]) -> Result<Subscription> {
        let mut list: Vec<Bytes> = Vec::with_capacity(channels.len());
        for channel in channels {
            let channel = channel.as_ref();
            if !list.iter().any(|c| c == channel) {
                list.push(Bytes::copy_from_slice(channel));
            }
        }
        if list.is_empty() {
            return Err(Error::InvalidCommand("SUBSCRIBE needs at least one channel".into()));
        }
        let connector = Connector::new(&opts)?;
        let (tx, events) = mpsc::channel(PUSH_BACKLOG);
        let connected = Arc::new(AtomicBool::new(false));
        tokio::spawn(subscriber_task(connector, list, tx, connected.clone()));
        Ok(Subscription { events, connected })
    }
}

/// Hands a connection's pushes to its subscriber task without blocking the connection.
struct Pushes {
    tx: mpsc::Sender<PushInfo>,
    overflowed: Arc<AtomicBool>,
}

impl AsyncPushSender for Pushes {
    fn send(&self, info: PushInfo) -> std::result::Result<(), SendError> {
        match self.tx.try_send(info) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.overflowed.store(true, Ordering::Release);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(SendError),
        }
    }
}

/// Connects, subscribes and listens until the subscription is dropped, reconnecting with backoff.
async fn subscriber_task(
    mut connector: Connector,
    channels: Vec<Bytes>,
    events: mpsc::Sender<Event>,
    connected: Arc<AtomicBool>,
) {
    let target = connector.options().deployment.to_string();
    let mut backoff = Backoff::new(connector.options());
    let mut subscribed_before = false;
    let mut attempt = 0usize;
    loop {
        let (push_tx, mut pushes) = mpsc::channel(PUSH_BACKLOG);
        let overflowed = Arc::new(AtomicBool::new(false));
        let sender = Pushes { tx: push_tx, overflowed: overflowed.clone() };
        let opened = tokio::select! {
            opened = open_subscribed(&mut connector, attempt, sender, &channels) => opened,
            () = events.closed() => return,
        };
        attempt += 1;
        match opened {
            Ok(conn) => {
                info!(redis = %target, channels = channels.len(), "redis subscription active");
                backoff.reset();
                connected.store(true, Ordering::Release);
                let marker = if subscribed_before { Event::Reconnected } else { Event::Subscribed };
                subscribed_before = true;
                if events.send(marker).await.is_err() {
                    return;
                }
                let lost = listen(conn, &mut pushes, &overflowed, &events, connector.options()).await;
                connected.store(false, Ordering::Release);
                match lost {
                    Some(error) => warn!(redis = %target, %error, "redis subscription connection lost"),
                    None => return,
                }
            }
            Err(error) => {
                if attempt == 1 || subscribed_before {
                    warn!(redis = %target, %error, "redis subscribe failed; retrying in the background");
                } else {
                    debug!(redis = %target, %error, attempt, "redis subscribe failed");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = events.closed() => return,
        }
    }
}

/// A connection with every channel confirmed subscribed.
async fn open_subscribed(
    connector: &mut Connector,
    attempt: usize,
    pushes: Pushes,
    channels: &[Bytes],
) -> Result<MultiplexedConnection> {
    let timeout = connector.options().connect_timeout;
    let mut conn = connector.subscriber(attempt, pushes).await?;
    let names: Vec<&[u8]> = channels.iter().map(|c| &c[..]).collect();
    match tokio::time::timeout(timeout, conn.subscribe(&names)).await {
        Ok(Ok(())) => Ok(conn),
        Ok(Err(e)) => Err(Error::from_redis(e)),
        Err(_) => Err(Error::Timeout),
    }
}

/// Forwards messages until the connection breaks (`Some(error)`) or the subscription is dropped
/// (`None`). An idle connection is checked with `PING`.
async fn listen(
    mut conn: MultiplexedConnection,
    pushes: &mut mpsc::Receiver<PushInfo>,
    overflowed: &AtomicBool,
    events: &mpsc::Sender<Event>,
    opts: &ClientOptions,
) -> Option<Error> {
    loop {
        let due = opts.health_check_due(tokio::time::Instant::now());
        tokio::select! {
            push = pushes.recv() => {
                let Some(push) = push else { return Some(Error::Disconnected) };
                if overflowed.swap(false, Ordering::AcqRel) && events.send(Event::Reconnected).await.is_err() {
                    return None;
                }
                match push.kind {
                    PushKind::Message => {
                        let mut data = push.data.into_iter();
                        let (Some(redis::Value::BulkString(channel)), Some(redis::Value::BulkString(payload))) =
                            (data.next(), data.next())
                        else {
                            return Some(Error::Protocol("malformed pub/sub message".into()));
                        };
                        let message = Message { channel: Bytes::from(channel), payload: Bytes::from(payload) };
                        if events.send(Event::Message(message)).await.is_err() {
                            return None;
                        }
                    }
                    PushKind::Disconnection => return Some(Error::Disconnected),
                    _ => {}
                }
            }
            () = tokio::time::sleep_until(due) => {
                match tokio::time::timeout(opts.command_timeout, conn.send_packed_command(&redis::cmd("PING"))).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Some(Error::from_redis(e)),
                    Err(_) => return Some(Error::Timeout),
                }
            }
            () = events.closed() => return None,
        }
    }
}
