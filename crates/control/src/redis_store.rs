//! The revision store of a cluster, in its Redis. Drafts and revisions are sealed with the
//! cluster secret (they hold app secrets); release pointers and node reports are plain JSON.
//!
//! ```text
//! {prefix}:control:draft          sealed draft            {prefix}:control:draft_version  its version
//! {prefix}:control:revseq         last revision number    {prefix}:control:rev:<n>        sealed revision
//! {prefix}:control:revs           hash n → metadata       {prefix}:control:releases       hash released, stage:<label>, seq, epoch
//! {prefix}:control:history        list of events, newest first, capped at 1000
//! {prefix}:control:nodes          hash node id → report   {prefix}:control:changed        channel: releases changed
//! ```
//! A draft write and a release change are each one script, so they are atomic.

use crate::local::apply;
use crate::store::StoreError;
use crate::types::{Draft, Event, NodeReport, Releases, Revision, RevisionMeta};
use gatehouse_cluster::{Cluster, Purpose};
use gatehouse_redis::{Script, Subscription, Value};
use std::sync::Arc;

const HISTORY_CAP: i64 = 1000;

/// Compare-and-set of the draft: `KEYS` version, draft; `ARGV` expected version, sealed draft.
/// Returns the new version, or `-1 - current` on a conflict.
const PUT_DRAFT: &str = r"
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v ~= tonumber(ARGV[1]) then return -1 - v end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], v + 1)
return v + 1
";

/// One release change: `KEYS` releases, history; `ARGV` field, value (empty: delete), event,
/// channel, history cap, a fresh epoch. Returns the new sequence number. The epoch is set once, by
/// the first change: a Redis that lost its data counts `seq` from 1 again under a new epoch.
const RECORD: &str = r"
redis.call('HSETNX', KEYS[1], 'epoch', ARGV[6])
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('LPUSH', KEYS[2], ARGV[3])
redis.call('LTRIM', KEYS[2], 0, ARGV[5])
redis.call('PUBLISH', ARGV[4], seq)
return seq
";

/// The Redis store.
#[derive(Debug)]
pub struct RedisStore {
    cluster: Arc<Cluster>,
    put_draft: Script,
    record: Script,
}

fn down(e: gatehouse_redis::Error) -> StoreError {
    StoreError::Redis(e)
}

fn json(source: serde_json::Error) -> StoreError {
    StoreError::Json { path: None, source }
}

/// A random epoch for the releases hash (see [`RECORD`]).
fn new_epoch() -> Result<String, StoreError> {
    let mut bytes = [0u8; 8];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| StoreError::Damaged("no randomness for the releases' epoch"))?;
    Ok(data_encoding::HEXLOWER.encode(&bytes))
}

impl RedisStore {
    pub(crate) fn new(cluster: Arc<Cluster>) -> Self {
        RedisStore { cluster, put_draft: Script::new(PUT_DRAFT), record: Script::new(RECORD) }
    }

    fn key(&self, rest: &str) -> String {
        // One tag for all of it: the scripts touch the draft and its version, or the releases and
        // the history, together.
        self.cluster.key(&format!("control:{{control}}:{rest}"))
    }

    fn open<T: serde::de::DeserializeOwned>(&self, aad: &[u8], sealed: &[u8]) -> Result<T, StoreError> {
        let plain = self
            .cluster
            .open(Purpose::Revisions, aad, sealed)
            .ok_or(StoreError::Damaged("a stored revision does not open with this node's cluster secret"))?;
        serde_json::from_slice(&plain).map_err(json)
    }

    fn seal<T: serde::Serialize>(&self, aad: &[u8], value: &T) -> Result<Vec<u8>, StoreError> {
        let plain = serde_json::to_vec(value).map_err(json)?;
        self.cluster.seal(Purpose::Revisions, aad, &plain).ok_or(StoreError::Damaged("cannot seal"))
    }

    pub(crate) async fn draft(&self) -> Result<Option<Draft>, StoreError> {
        match self.cluster.client().get(self.key("draft")).await.map_err(down)? {
            Some(sealed) => self.open(b"draft", &sealed).map(Some),
            None => Ok(None),
        }
    }

    pub(crate) async fn put_draft(&self, expected: u64, draft: Draft) -> Result<Draft, StoreError> {
        let sealed = self.seal(b"draft", &draft)?;
        let keys = [self.key("draft_version"), self.key("draft")];
        let expected_s = expected.to_string();
        let args: [&[u8]; 2] = [expected_s.as_bytes(), &sealed];
        let v = self.cluster.client().eval(&self.put_draft, &keys, &args).await.map_err(down)?;
        match v.as_int() {
            Some(n) if n > 0 => Ok(draft),
            Some(n) => Err(StoreError::Conflict { current: (-1 - n) as u64 }),
            None => Err(StoreError::Damaged("unexpected reply to the draft script")),
        }
    }

    pub(crate) async fn commit(&self, mut revision: Revision) -> Result<Revision, StoreError> {
        let client = self.cluster.client();
        let n = client.incr(self.key("revseq")).await.map_err(down)?;
        revision.meta.number =
            u64::try_from(n).map_err(|_| StoreError::BadField { field: "revseq".into(), value: n.to_string() })?;
        let number = revision.meta.number.to_string();
        let sealed = self.seal(number.as_bytes(), &revision)?;
        client.set(self.key(&format!("rev:{number}")), &sealed).await.map_err(down)?;
        let meta = serde_json::to_string(&revision.meta).map_err(json)?;
        client.hset(self.key("revs"), &[(number.as_str(), meta.as_str())]).await.map_err(down)?;
        Ok(revision)
    }

    pub(crate) async fn revision(&self, number: u64) -> Result<Option<Revision>, StoreError> {
        let n = number.to_string();
        match self.cluster.client().get(self.key(&format!("rev:{n}"))).await.map_err(down)? {
            Some(sealed) => self.open(n.as_bytes(), &sealed).map(Some),
            None => Ok(None),
        }
    }

    pub(crate) async fn revisions(&self) -> Result<Vec<RevisionMeta>, StoreError> {
        let all = self.cluster.client().hgetall(self.key("revs")).await.map_err(down)?;
        let mut out: Vec<RevisionMeta> =
            all.iter().map(|(_, v)| serde_json::from_slice(v).map_err(json)).collect::<Result<_, _>>()?;
        out.sort_by_key(|m| m.number);
        Ok(out)
    }

    pub(crate) async fn revision_meta(&self, number: u64) -> Result<Option<RevisionMeta>, StoreError> {
        match self.cluster.client().hget(self.key("revs"), number.to_string()).await.map_err(down)? {
            Some(v) => serde_json::from_slice(&v).map(Some).map_err(json),
            None => Ok(None),
        }
    }

    pub(crate) async fn releases(&self) -> Result<Releases, StoreError> {
        let all = self.cluster.client().hgetall(self.key("releases")).await.map_err(down)?;
        let mut r = Releases::default();
        for (field, value) in all {
            let (field, value) = (String::from_utf8_lossy(&field), String::from_utf8_lossy(&value));
            if field == "epoch" {
                r.epoch = value.into_owned();
                continue;
            }
            let n: u64 = value
                .parse()
                .map_err(|_| StoreError::BadField { field: format!("releases.{field}"), value: value.to_string() })?;
            match field.as_ref() {
                "released" => r.released = Some(n),
                "seq" => r.seq = n,
                f => {
                    if let Some(label) = f.strip_prefix("stage:") {
                        r.staged.insert(label.to_string(), n);
                    }
                }
            }
        }
        Ok(r)
    }

    pub(crate) async fn record(&self, event: Event) -> Result<Releases, StoreError> {
        let mut after = Releases::default();
        apply(&mut after, &event);
        let (field, value) = match (&event.label, after.released) {
            (Some(label), _) => (format!("stage:{label}"), after.staged.get(label).map(u64::to_string)),
            (None, released) => ("released".to_string(), released.map(|n| n.to_string())),
        };
        let json = serde_json::to_string(&event).map_err(json)?;
        let keys = [self.key("releases"), self.key("history")];
        let cap = (HISTORY_CAP - 1).to_string();
        let args = [field, value.unwrap_or_default(), json, self.channel(), cap, new_epoch()?];
        self.cluster.client().eval(&self.record, &keys, &args).await.map_err(down)?;
        self.releases().await
    }

    pub(crate) async fn history(&self, limit: usize) -> Result<Vec<Event>, StoreError> {
        let stop = (limit.max(1) - 1).to_string();
        let key = self.key("history");
        let v = self.cluster.client().cmd(&[b"LRANGE", key.as_bytes(), b"0", stop.as_bytes()]).await.map_err(down)?;
        let Value::Array(items) = v else { return Ok(Vec::new()) };
        items.iter().filter_map(Value::as_bytes).map(|b| serde_json::from_slice(b).map_err(json)).collect()
    }

    pub(crate) async fn report(&self, report: &NodeReport) -> Result<(), StoreError> {
        let json = serde_json::to_string(report).map_err(json)?;
        self.cluster.client().hset(self.key("nodes"), &[(report.id.as_str(), json.as_str())]).await.map_err(down)?;
        Ok(())
    }

    pub(crate) async fn nodes(&self) -> Result<Vec<NodeReport>, StoreError> {
        let all = self.cluster.client().hgetall(self.key("nodes")).await.map_err(down)?;
        all.iter().map(|(_, v)| serde_json::from_slice(v).map_err(json)).collect()
    }

    fn channel(&self) -> String {
        self.key("changed")
    }

    pub(crate) fn subscribe(&self) -> Result<Subscription, StoreError> {
        gatehouse_redis::Client::subscribe(self.cluster.options().clone(), &[self.channel()])
            .map_err(StoreError::Subscribe)
    }
}
