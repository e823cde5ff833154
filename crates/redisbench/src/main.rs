//! `gatehouse-redis-bench`: the gateway's own Redis operations, from one current-thread runtime
//! (as one gateway worker sends them), against one Redis or a Redis Cluster:
//!
//! - `ratelimit`: a cluster rate-limit decision, the Lua script every request under a cluster
//!   limit runs (`gatehouse_plugins::rate_limit::cluster::decide`), over `--keys` counters;
//! - `store`: a TLS session written for the other nodes (`put_session`), over `--keys` ids;
//! - `fetch`: a TLS session read by another node (`fetch_session`), after `--keys` were stored.
//!
//! `--concurrency` operations are in flight at once. Prints one JSON line: operations, errors,
//! seconds, operations per second, and latency percentiles in microseconds.

use clap::{Parser, ValueEnum};
use gatehouse_cluster::{Cluster, RedisStats};
use gatehouse_plugins::rate_limit::cluster::decide;
use gatehouse_plugins::rate_limit::gcra::Gcra;
use gatehouse_plugins::rate_limit::redis_key;
use gatehouse_redis::{ClientOptions, Deployment};
use gatehouse_tls::cluster::{fetch_session, put_session, Fetched};
use std::cell::Cell;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Op {
    Ratelimit,
    Store,
    Fetch,
}

#[derive(Parser)]
#[command(about = "The gateway's Redis operations under load")]
struct Args {
    /// One Redis: `redis://host:port[/db]`.
    #[arg(long, conflicts_with = "cluster")]
    url: Option<String>,
    /// A Redis Cluster: seed nodes, comma-separated `host:port`.
    #[arg(long, value_delimiter = ',')]
    cluster: Vec<String>,
    /// The operation.
    #[arg(long, value_enum)]
    op: Op,
    /// Operations to run.
    #[arg(long, default_value_t = 100_000)]
    count: u64,
    /// Operations in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: u64,
    /// Distinct keys (counters or sessions) the operations go round.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// The command timeout, milliseconds.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
}

const SECRET: &[u8] = b"gatehouse-redis-bench-secret-0123456789";
const SESSION_TTL: Duration = Duration::from_secs(600);

fn main() -> ExitCode {
    let args = Args::parse();
    let mut options = match (&args.url, args.cluster.is_empty()) {
        (Some(url), true) => match ClientOptions::from_url(url) {
            Ok(o) => o,
            Err(e) => return fail(&e.to_string()),
        },
        (None, false) => ClientOptions {
            deployment: Deployment::Cluster { nodes: args.cluster.clone() },
            ..ClientOptions::default()
        },
        _ => return fail("give --url or --cluster"),
    };
    options.command_timeout = Duration::from_millis(args.timeout_ms);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&e.to_string()),
    };
    let local = tokio::task::LocalSet::new();
    match local.block_on(&rt, run(args, options)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("gatehouse-redis-bench: {msg}");
    ExitCode::FAILURE
}

fn session_id(i: u64) -> [u8; 32] {
    let mut id = [0u8; 32];
    id[..8].copy_from_slice(&i.to_be_bytes());
    id
}

async fn run(args: Args, options: ClientOptions) -> Result<String, String> {
    let cluster =
        Cluster::new(options, "gatehouse", SECRET, Arc::new(RedisStats::default())).map_err(|e| e.to_string())?;
    cluster.connected().await.map_err(|e| e.to_string())?;
    let value = [0x5au8; 200];
    if matches!(args.op, Op::Fetch) {
        for i in 0..args.keys {
            put_session(&cluster, &session_id(i), &value, SESSION_TTL).await.map_err(|e| format!("pre-store: {e}"))?;
        }
    }
    // Always admitted: a limit far above the load.
    let gcra = Gcra { emission_us: 1, tolerance_us: 1_000_000, block_us: 0, limit: 1_000_000 };
    let next = Rc::new(Cell::new(0u64));
    let errors = Rc::new(Cell::new(0u64));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency.max(1) {
        let (cluster, next, errors) = (cluster.clone(), next.clone(), errors.clone());
        let (op, count, keys) = (args.op, args.count, args.keys.max(1));
        tasks.push(tokio::task::spawn_local(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.get();
                if i >= count {
                    return latencies;
                }
                next.set(i + 1);
                let k = i % keys;
                let t = Instant::now();
                let ok = match op {
                    Op::Ratelimit => {
                        let key = redis_key("gatehouse:rl:bench#0:", "bench", &k.to_be_bytes(), b"");
                        decide(cluster.client(), &gcra, &key).await.is_ok()
                    }
                    Op::Store => put_session(&cluster, &session_id(k), &value, SESSION_TTL).await.is_ok(),
                    Op::Fetch => matches!(fetch_session(&cluster, &session_id(k), false).await, Fetched::Found(_)),
                };
                latencies.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
                if !ok {
                    errors.set(errors.get() + 1);
                }
            }
        }));
    }
    let mut all = Vec::with_capacity(usize::try_from(args.count).unwrap_or(0));
    for task in tasks {
        all.extend(task.await.map_err(|e| e.to_string())?);
    }
    let secs = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct =
        |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1))).copied().unwrap_or(0);
    Ok(format!(
        "{{\"op\":\"{:?}\",\"ops\":{},\"errors\":{},\"secs\":{secs:.3},\"ops_per_sec\":{:.0},\"p50_us\":{},\"p99_us\":{},\"max_us\":{}}}",
        args.op,
        all.len(),
        errors.get(),
        all.len() as f64 / secs,
        pct(0.50),
        pct(0.99),
        all.last().copied().unwrap_or(0)
    )
    .to_lowercase())
}
