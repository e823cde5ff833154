//! Real `redis-server` processes on free loopback ports, killed on drop: one server (which can be
//! stopped and started again on the same port, plain or with TLS and an ACL user), a Redis Cluster
//! of masters and replicas made by `redis-cli --cluster create`, and a Sentinel group.

use crate::free_port;
use crate::gateway::TempDir;
use crate::wait::wait_until;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a server, a Cluster or a Sentinel group may take to come up.
const READY: Duration = Duration::from_secs(20);

/// A free port whose Cluster bus port (`port + 10000`) is free too.
fn free_cluster_port() -> u16 {
    for _ in 0..200 {
        let Ok(l) = TcpListener::bind("127.0.0.1:0") else { continue };
        let Ok(port) = l.local_addr().map(|a| a.port()) else { continue };
        // Ephemeral ports are often too high for a bus port; try the same offset lower down.
        for candidate in [port, port.wrapping_sub(30000)] {
            if candidate < 1024 || u32::from(candidate) + 10000 > 65535 {
                continue;
            }
            if TcpListener::bind(("127.0.0.1", candidate)).is_ok()
                && TcpListener::bind(("127.0.0.1", candidate + 10000)).is_ok()
            {
                return candidate;
            }
        }
    }
    panic!("no free port pair for a Redis Cluster node");
}

/// TLS material for a Redis with `--tls-port`: a test CA, the server's certificate (for
/// `127.0.0.1` and `localhost`) and a client certificate, all made with `openssl`.
#[derive(Debug)]
pub struct RedisTlsFiles {
    /// The CA certificate (PEM).
    pub ca: PathBuf,
    /// The server certificate and key.
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
}

impl RedisTlsFiles {
    /// Makes the files in `dir`.
    pub fn make(dir: &TempDir) -> RedisTlsFiles {
        let p = |name: &str| dir.join(name);
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl").args(args).output().expect("run openssl");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let s = |path: PathBuf| path.to_string_lossy().into_owned();
        let (ca, ca_key) = (s(p("redis-ca.pem")), s(p("redis-ca.key")));
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=Redis test CA",
            "-keyout",
            &ca_key,
            "-out",
            &ca,
        ]);
        let ext = p("redis-ext.cnf");
        std::fs::write(&ext, "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:redis.test\n").expect("write ext");
        let issue = |name: &str, cn: &str| {
            let (key, csr, cert) =
                (s(p(&format!("{name}.key"))), s(p(&format!("{name}.csr"))), s(p(&format!("{name}.pem"))));
            openssl(&[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                &format!("/CN={cn}"),
                "-keyout",
                &key,
                "-out",
                &csr,
            ]);
            openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &s(ext.clone()),
                "-out",
                &cert,
            ]);
            (PathBuf::from(cert), PathBuf::from(key))
        };
        let (server_cert, server_key) = issue("redis-server", "redis.test");
        let (client_cert, client_key) = issue("redis-client", "gatehouse");
        RedisTlsFiles { ca: PathBuf::from(ca), server_cert, server_key, client_cert, client_key }
    }

    /// `redis-cli` arguments for a TLS connection with the client certificate.
    fn cli_args(&self) -> Vec<String> {
        let s = |p: &PathBuf| p.to_string_lossy().into_owned();
        vec![
            "--tls".into(),
            "--cacert".into(),
            s(&self.ca),
            "--cert".into(),
            s(&self.client_cert),
            "--key".into(),
            s(&self.client_key),
        ]
    }

    /// [`RedisTlsFiles::cli_args`] logged in as ACL user `user`.
    fn cli_args_as(&self, user: &str, password: &str) -> Vec<String> {
        let mut cli = self.cli_args();
        cli.extend(["--user".into(), user.into(), "--pass".into(), password.into(), "--no-auth-warning".into()]);
        cli
    }

    /// `redis-server` arguments serving TLS only, on `port`, asking clients for certificates.
    fn server_args(&self, port: u16) -> Vec<String> {
        let s = |p: &PathBuf| p.to_string_lossy().into_owned();
        vec![
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            s(&self.server_cert),
            "--tls-key-file".into(),
            s(&self.server_key),
            "--tls-ca-cert-file".into(),
            s(&self.ca),
            "--tls-auth-clients".into(),
            "yes".into(),
        ]
    }
}

/// Arguments that turn the default user off and add ACL user `user` allowed everything.
fn acl_args(user: &str, password: &str) -> Vec<String> {
    ["--user", "default", "off", "--user", user, "on", &format!(">{password}"), "~*", "&*", "+@all"]
        .iter()
        .map(|a| a.to_string())
        .collect()
}

/// One `redis-server` process.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    args: Vec<String>,
    cli_args: Vec<String>,
    /// The server's working directory (a replica's or a master's replication file lands there).
    dir: TempDir,
}

/// Runs `redis-cli` against `port` with `extra` connection arguments; its standard output.
fn cli_at(port: u16, extra: &[String], args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(extra)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl RedisServer {
    /// Starts a server (no persistence) on a free port and waits until it answers.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(args: &[&str]) -> RedisServer {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        RedisServer::launch(|port| {
            (["--port".to_string(), port.to_string()].into_iter().chain(args.clone()).collect(), Vec::new())
        })
    }

    /// Starts a TLS-only server (client certificates required) with an ACL user `gatehouse`
    /// whose password is `password`; the default user is turned off.
    pub fn start_tls(tls: &RedisTlsFiles, password: &str) -> RedisServer {
        RedisServer::start_tls_with(tls, password, &[])
    }

    /// [`RedisServer::start_tls`] with extra `redis-server` arguments (replication over TLS,
    /// say).
    pub fn start_tls_with(tls: &RedisTlsFiles, password: &str, extra: &[&str]) -> RedisServer {
        let acl =
            acl_args("gatehouse", password).into_iter().chain(extra.iter().map(|a| a.to_string())).collect::<Vec<_>>();
        let cli = tls.cli_args_as("gatehouse", password);
        RedisServer::launch(|port| (tls.server_args(port).into_iter().chain(acl.clone()).collect(), cli.clone()))
    }

    fn launch(args_for: impl Fn(u16) -> (Vec<String>, Vec<String>)) -> RedisServer {
        let mut last = String::new();
        // The free port may be taken by someone else before the server binds it: try another.
        for _ in 0..3 {
            let port = free_port();
            let (args, cli_args) = args_for(port);
            let mut server = RedisServer { child: None, port, args, cli_args, dir: TempDir::new() };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(&self.args)
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server (is it installed?): {e}"))?;
        self.child = Some(child);
        let ready = wait_until(READY, || {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Some(Err(format!("redis-server on port {} exited at start: {status}", self.port)));
            }
            self.cli(&["PING"]).starts_with("PONG").then_some(Ok(()))
        });
        match ready {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                self.child = None;
                Err(e)
            }
            None => {
                self.stop();
                Err(format!("redis-server on port {} not ready in {READY:?}", self.port))
            }
        }
    }

    /// `redis://127.0.0.1:PORT/0` (`rediss://` for a TLS server).
    pub fn url(&self) -> String {
        let scheme = if self.cli_args.is_empty() { "redis" } else { "rediss" };
        format!("{scheme}://127.0.0.1:{}/0", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server (its data is gone).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!("{e}");
        }
    }

    /// Whether the process is running.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Runs one command with `redis-cli` and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        cli_at(self.port, &self.cli_args, args)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Redis Cluster on loopback: masters with one replica each, slots spread evenly by
/// `redis-cli --cluster create`.
#[derive(Debug)]
pub struct RedisCluster {
    /// Every node, masters first as created (roles change after a failover).
    pub nodes: Vec<RedisServer>,
    _dir: TempDir,
}

impl RedisCluster {
    /// `masters` masters with `replicas` replicas each; returns once every node reports
    /// `cluster_state:ok` and knows every other node.
    pub fn start(masters: usize, replicas: usize) -> RedisCluster {
        let dir = TempDir::new();
        let total = masters * (1 + replicas);
        let mut nodes = Vec::with_capacity(total);
        for i in 0..total {
            let conf = dir.join(&format!("nodes-{i}.conf")).to_string_lossy().into_owned();
            let node = RedisServer::launch_at(free_cluster_port(), |port| cluster_node_args(port, &conf));
            nodes.push(node);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(n.addr());
        }
        let out = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(out.status.success(), "cluster create: {}", String::from_utf8_lossy(&out.stdout));
        let cluster = RedisCluster { nodes, _dir: dir };
        cluster.wait_ok(total);
        for node in &cluster.nodes {
            if node.cli(&["ROLE"]).starts_with("slave") {
                node.wait_synced();
            }
        }
        cluster
    }

    /// Waits until every running node reports the Cluster healthy and knows `known` nodes.
    fn wait_ok(&self, known: usize) {
        wait_until(READY, || {
            self.nodes
                .iter()
                .filter(|n| n.is_running())
                .all(|n| {
                    let info = n.cli(&["CLUSTER", "INFO"]);
                    info.contains("cluster_state:ok") && info.contains(&format!("cluster_known_nodes:{known}"))
                })
                .then_some(())
        })
        .unwrap_or_else(|| panic!("the Redis Cluster did not become healthy in {READY:?}"));
    }

    /// `["127.0.0.1:P", ...]` of the first `n` nodes, as seeds.
    pub fn seeds(&self, n: usize) -> Vec<String> {
        self.nodes.iter().take(n).map(RedisServer::addr).collect()
    }

    /// The running nodes that are masters now.
    pub fn masters(&self) -> Vec<&RedisServer> {
        self.nodes.iter().filter(|n| n.is_running() && n.cli(&["ROLE"]).starts_with("master")).collect()
    }

    /// The index of the node serving `key`'s slot as master.
    pub fn master_of(&self, key: &str) -> usize {
        let slot = self.slot_of(key);
        self.nodes.iter().position(|n| n.is_running() && n.owns_slot(slot)).expect("a master owns every slot")
    }

    /// Kills node `i` (see [`RedisCluster::wait_failover`]).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].stop();
    }

    /// Waits until the running nodes report the Cluster healthy again (after [`RedisCluster::kill`]).
    pub fn wait_failover(&self) {
        wait_until(READY, || {
            let running: Vec<_> = self.nodes.iter().filter(|n| n.is_running()).collect();
            running.iter().all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")).then_some(())
        })
        .unwrap_or_else(|| panic!("no failover within {READY:?}"));
    }

    /// Starts an empty Cluster node and joins it as a master with no slots
    /// (`redis-cli --cluster add-node`); its index in `nodes`.
    pub fn add_master(&mut self) -> usize {
        let conf = self._dir.join(&format!("nodes-{}.conf", self.nodes.len())).to_string_lossy().into_owned();
        let node = RedisServer::launch_at(free_cluster_port(), |port| cluster_node_args(port, &conf));
        let out = Command::new("redis-cli")
            .args(["--cluster", "add-node", &node.addr(), &self.nodes[0].addr()])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster add-node");
        assert!(out.status.success(), "add-node: {}", String::from_utf8_lossy(&out.stdout));
        self.nodes.push(node);
        self.wait_ok(self.nodes.iter().filter(|n| n.is_running()).count());
        self.nodes.len() - 1
    }

    /// Moves slots (and their keys) so that every master, empty ones included, serves about as
    /// many: `redis-cli --cluster rebalance --cluster-use-empty-masters`. Its output.
    pub fn rebalance(&self) -> String {
        let out = Command::new("redis-cli")
            .args(["--cluster", "rebalance", &self.nodes[0].addr(), "--cluster-use-empty-masters"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster rebalance");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "rebalance: {text}");
        self.wait_ok(self.nodes.iter().filter(|n| n.is_running()).count());
        text
    }

    /// Starts moving `slot` from master `from` to master `to` as `redis-cli --cluster reshard`
    /// does (`CLUSTER SETSLOT ... IMPORTING` on `to`, `MIGRATING` on `from`), then moves at most
    /// `keys` of its keys with `MIGRATE`; the slot stays half-moved, so clients are sent on
    /// with `ASK` for the keys that moved. The number of keys moved.
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize, keys: usize) -> usize {
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
        let slot = slot.to_string();
        let ok = |node: &RedisServer, args: &[&str]| {
            let out = node.cli(args);
            assert!(out.trim() == "OK", "{args:?} on port {}: {out}", node.port);
        };
        ok(dst, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src.node_id()]);
        ok(src, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst.node_id()]);
        self.migrate_keys(&slot, from, to, keys)
    }

    /// Ends a migration begun by [`RedisCluster::begin_migration`]: the slot's remaining keys
    /// move and every master learns that `to` serves it (`CLUSTER SETSLOT ... NODE`).
    pub fn finish_migration(&self, slot: u16, from: usize, to: usize) {
        let slot = slot.to_string();
        while self.migrate_keys(&slot, from, to, 100) > 0 {}
        let id = self.nodes[to].node_id();
        for i in [to, from] {
            let out = self.nodes[i].cli(&["CLUSTER", "SETSLOT", &slot, "NODE", &id]);
            assert!(out.trim() == "OK", "SETSLOT NODE on port {}: {out}", self.nodes[i].port);
        }
        for m in self.masters() {
            let _ = m.cli(&["CLUSTER", "SETSLOT", &slot, "NODE", &id]);
        }
    }

    /// Moves up to `count` keys of `slot` from node `from` to node `to` with `MIGRATE`; how many.
    fn migrate_keys(&self, slot: &str, from: usize, to: usize, count: usize) -> usize {
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
        let out = src.cli(&["CLUSTER", "GETKEYSINSLOT", slot, &count.to_string()]);
        let moving: Vec<&str> = out.lines().map(str::trim).filter(|k| !k.is_empty()).collect();
        if !moving.is_empty() {
            let port = dst.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(&moving);
            let out = src.cli(&args);
            assert!(out.trim() == "OK", "MIGRATE from port {}: {out}", src.port);
        }
        moving.len()
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> u16 {
        self.nodes[0].cli(&["CLUSTER", "KEYSLOT", key]).trim().parse().expect("a slot number")
    }

    /// Keys on each master now, by port.
    pub fn keys_per_master(&self) -> Vec<(u16, u64)> {
        self.masters().iter().map(|m| (m.port, m.cli(&["DBSIZE"]).trim().parse().unwrap_or(0))).collect()
    }
}

/// `redis-server` arguments of a Cluster node on `port` with its node file at `conf`.
fn cluster_node_args(port: u16, conf: &str) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        conf,
        "--cluster-node-timeout",
        "1000",
        // A replica takes over however long it was cut off from its master.
        "--cluster-replica-validity-factor",
        "0",
        "--repl-diskless-sync-delay",
        "0",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect()
}

impl RedisServer {
    /// This Cluster node's id (`CLUSTER MYID`).
    fn node_id(&self) -> String {
        self.cli(&["CLUSTER", "MYID"]).trim().to_string()
    }

    /// A server on `port` (already known free), with arguments made for it.
    fn launch_at(port: u16, args_for: impl Fn(u16) -> Vec<String>) -> RedisServer {
        let mut server =
            RedisServer { child: None, port, args: args_for(port), cli_args: Vec::new(), dir: TempDir::new() };
        if let Err(e) = server.spawn() {
            panic!("{e}");
        }
        server
    }

    /// Waits until this replica has its master's data and follows it (`master_link_status:up`).
    fn wait_synced(&self) {
        wait_until(READY, || self.cli(&["INFO", "replication"]).contains("master_link_status:up").then_some(()))
            .unwrap_or_else(|| panic!("the replica on port {} did not sync in {READY:?}", self.port));
    }

    /// Whether this Cluster node serves `slot` as master.
    fn owns_slot(&self, slot: u16) -> bool {
        // `CLUSTER SLOTS` through redis-cli: groups of start, end, then the nodes (master first).
        let out = self.cli(&["CLUSTER", "SLOTS"]);
        let lines: Vec<&str> = out.lines().map(str::trim).collect();
        let mut i = 0;
        while i + 3 < lines.len() {
            if let (Ok(start), Ok(end)) = (lines[i].parse::<u16>(), lines[i + 1].parse::<u16>()) {
                if (start..=end).contains(&slot) {
                    return lines[i + 3].parse::<u16>().ok() == Some(self.port);
                }
            }
            i += 1;
        }
        false
    }
}

/// A Sentinel group: a master, a replica and three Sentinels watching them as `mymaster`.
#[derive(Debug)]
pub struct RedisSentinels {
    /// The data nodes: the master as started, then the replica.
    pub servers: Vec<RedisServer>,
    /// The Sentinels.
    pub sentinels: Vec<RedisServer>,
    _dir: TempDir,
}

/// The name the Sentinels know the group by.
pub const SENTINEL_MASTER: &str = "mymaster";

impl RedisSentinels {
    /// Starts the group; returns once every Sentinel knows the replica and the other Sentinels.
    pub fn start() -> RedisSentinels {
        RedisSentinels::launch(None)
    }

    /// The group over TLS only, client certificates required everywhere: the data nodes
    /// replicate over TLS and know ACL user `gatehouse` with `password`; the Sentinels log in to
    /// them as that user, and clients log in to the Sentinels as ACL user `watcher` with
    /// `sentinel_password` (the Sentinels' default user is off).
    pub fn start_tls(tls: &RedisTlsFiles, password: &str, sentinel_password: &str) -> RedisSentinels {
        RedisSentinels::launch(Some((tls, password, sentinel_password)))
    }

    fn launch(tls: Option<(&RedisTlsFiles, &str, &str)>) -> RedisSentinels {
        let dir = TempDir::new();
        // No delay before a replica's first full sync (5 s by default): until it has synced, a
        // failover would promote an empty replica and lose everything.
        let master_args = ["--repl-diskless-sync-delay", "0"];
        let master = match tls {
            None => RedisServer::start_with(&master_args),
            Some((files, password, _)) => RedisServer::start_tls_with(
                files,
                password,
                &[&master_args[..], &["--tls-replication", "yes"]].concat(),
            ),
        };
        let master_port = master.port.to_string();
        let replica_of = ["--replicaof", "127.0.0.1", &master_port];
        let replica = match tls {
            None => RedisServer::start_with(&replica_of),
            Some((files, password, _)) => RedisServer::start_tls_with(
                files,
                password,
                &[
                    &replica_of[..],
                    &["--tls-replication", "yes", "--masteruser", "gatehouse", "--masterauth", password],
                    &master_args,
                ]
                .concat(),
            ),
        };
        replica.wait_synced();
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let conf = dir.join(&format!("sentinel-{i}.conf"));
            let sentinel = RedisServer::launch(|port| {
                let (listen, secure, cli) = match tls {
                    None => (format!("port {port}\n"), String::new(), Vec::new()),
                    Some((files, password, sentinel_password)) => {
                        let s = |p: &PathBuf| p.to_string_lossy().into_owned();
                        (
                            format!(
                                "port 0\ntls-port {port}\ntls-cert-file {}\ntls-key-file {}\n\
                                 tls-ca-cert-file {}\ntls-auth-clients yes\ntls-replication yes\n",
                                s(&files.server_cert),
                                s(&files.server_key),
                                s(&files.ca)
                            ),
                            format!(
                                "user default off\nuser watcher on >{sentinel_password} ~* &* +@all\n\
                                 sentinel sentinel-user watcher\nsentinel sentinel-pass {sentinel_password}\n\
                                 sentinel auth-user {SENTINEL_MASTER} gatehouse\n\
                                 sentinel auth-pass {SENTINEL_MASTER} {password}\n"
                            ),
                            files.cli_args_as("watcher", sentinel_password),
                        )
                    }
                };
                std::fs::write(
                    &conf,
                    format!(
                        "{listen}bind 127.0.0.1\nsentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 2\n\
                         sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                         sentinel failover-timeout {SENTINEL_MASTER} 10000\n{secure}"
                    ),
                )
                .expect("write the sentinel configuration");
                (vec![conf.to_string_lossy().into_owned(), "--sentinel".into()], cli)
            });
            sentinels.push(sentinel);
        }
        let group = RedisSentinels { servers: vec![master, replica], sentinels, _dir: dir };
        wait_until(READY, || {
            group
                .sentinels
                .iter()
                .all(|s| {
                    let replicas = s.cli(&["SENTINEL", "REPLICAS", SENTINEL_MASTER]);
                    let others = s.cli(&["SENTINEL", "SENTINELS", SENTINEL_MASTER]);
                    replicas.contains("slave") && others.matches("127.0.0.1").count() >= 2
                })
                .then_some(())
        })
        .unwrap_or_else(|| panic!("the Sentinels did not find each other and the replica in {READY:?}"));
        group
    }

    /// `["127.0.0.1:P", ...]` of the Sentinels.
    pub fn nodes(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::addr).collect()
    }

    /// The port of the master the Sentinels name now.
    pub fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let out = s.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER]);
            out.lines().nth(1)?.trim().parse().ok()
        })
    }

    /// The data node that is master now.
    pub fn master(&self) -> Option<&RedisServer> {
        let port = self.master_port()?;
        self.servers.iter().find(|s| s.port == port)
    }

    /// Kills the current master and waits until the Sentinels name another one that answers as
    /// master; returns its port.
    pub fn fail_over(&mut self) -> u16 {
        let old = self.master_port().expect("a master");
        if let Some(s) = self.servers.iter_mut().find(|s| s.port == old) {
            s.stop();
        }
        wait_until(Duration::from_secs(30), || {
            let new = self.master_port().filter(|&p| p != old)?;
            let server = self.servers.iter().find(|s| s.port == new)?;
            server.cli(&["ROLE"]).starts_with("master").then_some(new)
        })
        .unwrap_or_else(|| panic!("the Sentinels did not promote the replica in 30 s"))
    }
}
