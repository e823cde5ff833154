//! Pub/sub stage: a [`Subscription`] owns a dedicated connection that subscribes to a fixed set
//! of channels, re-subscribes after every reconnect, and tells the consumer when messages may have
//! been missed.

use crate::client::Client;
use crate::conn::{Backoff, Conn};
use crate::error::{Error, Result};
use crate::options::ClientOptions;
use crate::resp::encode_command;
use crate::value::Value;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, info, warn};

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
    /// The connection broke and all channels are subscribed again on a new one. Messages
    /// published in between were lost: re-sync the state they update.
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
    /// If the consumer falls behind, reading from Redis pauses; Redis may then drop the connection
    /// (its pub/sub output buffer limit), which shows up as [`Event::Reconnected`].
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
    /// subscribed. Fails only if `channels` is empty.
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
        let (tx, events) = mpsc::channel(opts.max_pending.max(1));
        let connected = Arc::new(AtomicBool::new(false));
        tokio::spawn(subscriber_task(opts, list, tx, connected.clone()));
        Ok(Subscription { events, connected })
    }
}

/// Connects, subscribes and listens until the subscription is dropped, reconnecting with backoff.
async fn subscriber_task(
    opts: ClientOptions,
    channels: Vec<Bytes>,
    events: mpsc::Sender<Event>,
    connected: Arc<AtomicBool>,
) {
    let mut backoff = Backoff::new(&opts);
    let mut subscribed_before = false;
    let mut failed_attempts = 0u32;
    loop {
        let attempt = tokio::select! {
            attempt = open_subscribed(&opts, &channels) => attempt,
            () = events.closed() => return,
        };
        match attempt {
            Ok((mut conn, early)) => {
                info!(addr = %opts.addr, channels = channels.len(), "redis subscription active");
                backoff.reset();
                failed_attempts = 0;
                connected.store(true, Ordering::Release);
                let marker = if subscribed_before { Event::Reconnected } else { Event::Subscribed };
                subscribed_before = true;
                if events.send(marker).await.is_err() {
                    return;
                }
                for message in early {
                    if events.send(Event::Message(message)).await.is_err() {
                        return;
                    }
                }
                let lost = listen(&mut conn, &events, &opts).await;
                connected.store(false, Ordering::Release);
                match lost {
                    Some(error) => warn!(addr = %opts.addr, %error, "redis subscription connection lost"),
                    None => return,
                }
            }
            Err(error) => {
                if failed_attempts == 0 {
                    warn!(addr = %opts.addr, %error, "redis subscribe failed; retrying in the background");
                } else {
                    debug!(addr = %opts.addr, %error, attempt = failed_attempts + 1, "redis subscribe failed");
                }
                failed_attempts += 1;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = events.closed() => return,
        }
    }
}

/// A connection with every channel confirmed subscribed, and any messages that came with the
/// confirmations.
async fn open_subscribed(opts: &ClientOptions, channels: &[Bytes]) -> Result<(Conn, Vec<Message>)> {
    let mut conn = Conn::open(opts).await?;
    let subscribe = async {
        let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        args.extend(channels.iter().map(|c| &c[..]));
        let mut out = BytesMut::new();
        encode_command(&mut out, &args);
        conn.stream.write_all(&out).await?;
        // Redis confirms all channels of one SUBSCRIBE before running any later PUBLISH, so this
        // holds no messages in practice; keep them in order anyway.
        let mut early = Vec::new();
        let mut confirmed = 0;
        while confirmed < channels.len() {
            match classify(conn.read_value().await?)? {
                Push::Subscribed => confirmed += 1,
                Push::Message(message) => early.push(message),
                Push::Pong | Push::Other => {}
            }
        }
        Ok::<_, Error>(early)
    };
    let early = tokio::time::timeout(opts.connect_timeout, subscribe).await.map_err(|_| Error::Timeout)??;
    Ok((conn, early))
}

/// Forwards messages until the connection breaks (`Some(error)`) or the subscription is dropped
/// (`None`). An idle connection is checked with `PING`.
async fn listen(conn: &mut Conn, events: &mpsc::Sender<Event>, opts: &ClientOptions) -> Option<Error> {
    let mut last_read = Instant::now();
    let mut pong_due: Option<Instant> = None;
    let timer = tokio::time::sleep_until(opts.health_check_due(last_read));
    tokio::pin!(timer);
    let mut armed_for = None;
    loop {
        let wake = pong_due.unwrap_or_else(|| opts.health_check_due(last_read));
        if armed_for != Some(wake) {
            timer.as_mut().reset(wake);
            armed_for = Some(wake);
        }
        tokio::select! {
            biased;
            read = conn.read_value() => {
                last_read = Instant::now();
                match read.and_then(classify) {
                    Ok(Push::Message(message)) => {
                        if events.send(Event::Message(message)).await.is_err() {
                            return None;
                        }
                    }
                    Ok(Push::Pong) => pong_due = None,
                    Ok(Push::Subscribed | Push::Other) => {}
                    Err(error) => return Some(error),
                }
            }
            () = &mut timer => {
                if pong_due.is_some() {
                    return Some(Error::Timeout);
                }
                let mut ping = BytesMut::new();
                encode_command(&mut ping, &[b"PING"]);
                match tokio::time::timeout(opts.command_timeout, conn.stream.write_all(&ping)).await {
                    Ok(Ok(())) => pong_due = Some(Instant::now() + opts.command_timeout),
                    Ok(Err(e)) => return Some(Error::Io(e)),
                    Err(_) => return Some(Error::Timeout),
                }
            }
            () = events.closed() => return None,
        }
    }
}

/// A frame received in subscribed mode.
enum Push {
    Message(Message),
    Subscribed,
    Pong,
    Other,
}

fn classify(frame: Value) -> Result<Push> {
    let Value::Array(items) = frame else {
        return Err(Error::Protocol("expected an array in subscribed mode".into()));
    };
    let mut items = items.into_iter();
    let kind = items.next();
    Ok(match kind.as_ref().and_then(Value::as_bytes) {
        Some(b"message") => match (items.next(), items.next()) {
            (Some(Value::Bulk(channel)), Some(Value::Bulk(payload))) => Push::Message(Message { channel, payload }),
            _ => return Err(Error::Protocol("malformed pub/sub message".into())),
        },
        Some(b"subscribe") => Push::Subscribed,
        Some(b"pong") => Push::Pong,
        _ => Push::Other,
    })
}
