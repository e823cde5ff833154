//! The README's tour, run as a newcomer types it: the shell blocks of its "A five-minute tour"
//! section, parsed from README.md in order, run against the built binary from a copy of
//! `examples/`, each checked for what the text says it shows. A command of the tour that this
//! file does not know, or one it knows that the tour lost, fails the test, so the two cannot
//! drift apart.
//!
//! The tour uses the fixed ports it documents (8080, 8443, 9080, 9001, 6379), so it runs in a
//! network namespace of its own (`unshare --user --net`), where nothing else listens.

use gatehouse_testkit::TempDir;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_gatehouse");
const INSIDE: &str = "GATEHOUSE_TOUR_NETNS";

/// How long a server may take to be ready, and a command's output to show what it should.
const DEADLINE: Duration = Duration::from_secs(30);

/// What the tour says a command shows.
#[derive(Clone, Copy)]
enum Expect {
    /// Its output (stdout and stderr) contains this.
    Out(&'static str),
    /// It exits with this status (0 unless said).
    Status(i32),
    /// The gateway that runs logs this.
    Log(&'static str),
}

/// What a command of the tour is.
#[derive(Clone, Copy)]
enum Kind {
    /// Run it and check it; `again`: its effect may show a moment later (a watched directory, a
    /// release, a signal), so it is run again until it shows, within [`DEADLINE`].
    Run { expect: &'static [Expect], again: bool },
    /// It keeps running (its own terminal): ready once its output says this, or its port accepts.
    Server { ready: Ready },
    /// It prepares the machine (build, install): the test's own build and CI did it.
    Setup,
}

#[derive(Clone, Copy)]
enum Ready {
    Says(&'static str),
    Port(u16),
}

use Expect::{Log, Out, Status};

const GATEWAY: Kind = Kind::Server { ready: Ready::Says("gatehouse ready") };

const fn run(expect: &'static [Expect]) -> Kind {
    Kind::Run { expect, again: false }
}

const fn eventually(expect: &'static [Expect]) -> Kind {
    Kind::Run { expect, again: true }
}

/// Every command of the tour, as written in README.md (a trailing comment left out).
const TOUR: &[(&str, Kind)] = &[
    (r#"cargo build --release -p gatehouse && export PATH="$PWD/target/release:$PATH""#, Kind::Setup),
    ("gatehouse run", GATEWAY),
    (
        "curl -i http://127.0.0.1:8080/hello",
        run(&[Out("HTTP/1.1 200"), Out("You asked for GET /hello"), Out("x-forwarded-for: 127.0.0.1"), Out("x-request-id: ")]),
    ),
    ("curl -i --http2-prior-knowledge http://127.0.0.1:8080/hello", run(&[Out("HTTP/2 200"), Out("You asked for GET /hello")])),
    ("curl -ik https://127.0.0.1:8443/hello", run(&[Out("HTTP/2 200"), Out("alt-svc: h3=\":8443\"; ma=86400")])),
    (
        "openssl s_client -connect 127.0.0.1:8443 -servername localhost </dev/null",
        run(&[Out("s:CN = localhost"), Out("TLSv1.3")]),
    ),
    ("pip install aioquic==1.2.0", Kind::Setup),
    (
        "python3 crates/gatehouse/tests/h3/client.py --port 8443 --sni localhost --path /hello",
        run(&[Out(r#""alpn": "h3""#), Out(r#""status": 200"#)]),
    ),
    (
        "curl -s http://127.0.0.1:9080/metrics | grep gatehouse_requests_total",
        run(&[Out("gatehouse_requests_total{")]),
    ),
    ("curl -s http://127.0.0.1:9080/status", run(&[Out(r#""listeners""#)])),
    ("gatehouse check examples/basic.yaml", run(&[Out("configuration examples/basic.yaml is valid")])),
    (
        r#"printf 'listeners:\n  web: { bind: "127.0.0.1:99999" }\nsites: { s: { hosts: [a.test], routes: [{ path: /, upstream: nope }] } }\n' > broken.yaml"#,
        run(&[]),
    ),
    (
        "gatehouse check broken.yaml",
        run(&[Status(1), Out("listeners.web.bind"), Out("sites.s.routes[0].upstream"), Out("has 2 error(s)")]),
    ),
    ("python3 -m http.server 9001 --bind 127.0.0.1", Kind::Server { ready: Ready::Port(9001) }),
    ("gatehouse run --config examples/basic.yaml", GATEWAY),
    (
        "curl -i -H 'Host: shop.example.com' http://127.0.0.1:8080/",
        eventually(&[Out("HTTP/1.1 200"), Out("Directory listing for /")]),
    ),
    ("sed -i 's/max_body: 1m/max_body: 2m/' examples/basic.yaml", run(&[])),
    (
        "pkill -HUP -x gatehouse",
        eventually(&[Log("configuration reloaded")]),
    ),
    ("gatehouse run --config examples/https.yaml", GATEWAY),
    (
        "curl --cacert examples/tls/example-ca.pem --resolve www.example.com:8443:127.0.0.1 https://www.example.com:8443/hello",
        run(&[Out("You asked for GET /hello (Host: www.example.com:8443")]),
    ),
    (
        "gatehouse cert --config examples/https.yaml import examples/tls/shop.example.net.pem",
        run(&[Out("imported shop.example.net")]),
    ),
    ("gatehouse cert --config examples/https.yaml list", run(&[Out("shop.example.net"), Out("api.example.org")])),
    (
        "curl -v --cacert examples/tls/example-ca.pem --resolve shop.example.net:8443:127.0.0.1 https://shop.example.net:8443/ 2>&1 | grep 'subject:'",
        eventually(&[Out("subject: CN=shop.example.net")]),
    ),
    ("redis-server --port 6379 --save ''", Kind::Server { ready: Ready::Says("Ready to accept connections") }),
    ("gatehouse run --config examples/gateway.yaml", GATEWAY),
    (
        "curl -i http://127.0.0.1:8080/mws/~crm-2f6c1a9e/orders/7",
        run(&[Out("HTTP/1.1 200"), Out("You asked for GET /orders/7 "), Out("x-app-id: crm")]),
    ),
    ("curl -i http://127.0.0.1:8080/mws/orders/7", run(&[Out("HTTP/1.1 401")])),
    (
        "gatehouse convert --from hyperapi examples/hyperapi/hyperapi.yaml -o converted/gatehouse.yaml",
        run(&[Out("converted examples/hyperapi/hyperapi.yaml to converted/gatehouse.yaml")]),
    ),
    ("gatehouse check converted/gatehouse.yaml", run(&[Out("configuration converted/gatehouse.yaml is valid")])),
    ("cat > next.yaml <<'EOF'", run(&[])),
    ("gatehouse admin apply next.yaml -m \"a /v2 route\"", run(&[Out("revision 1")])),
    ("gatehouse admin release 1", run(&[Out("1")])),
    ("curl -s http://127.0.0.1:8080/v2/hello", eventually(&[Out("You asked for GET /hello ")])),
    ("gatehouse admin nodes", run(&[Out("revision 1")])),
];

/// The tour's commands in order: each with its text as a key (a here-document by its first
/// line) and the whole text to run.
fn commands(readme: &str) -> Vec<(String, String)> {
    let start = readme.find("## A five-minute tour").expect("README.md has the tour");
    let section = &readme[start + 1..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut out = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let fence = line.trim_start();
        if fence != "```sh" {
            continue;
        }
        let indent = line.len() - fence.len();
        let mut block = Vec::new();
        for l in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            block.push(l.get(indent..).unwrap_or(l.trim_start()).to_string());
        }
        let mut block = block.into_iter();
        while let Some(line) = block.next() {
            if line.trim().is_empty() {
                continue;
            }
            let key = without_comment(&line).to_string();
            let mut text = key.clone();
            if let Some(at) = key.find("<<'") {
                let end = key[at + 3..].trim_end_matches('\'').to_string();
                for l in block.by_ref() {
                    text.push('\n');
                    text.push_str(&l);
                    if l.trim() == end {
                        break;
                    }
                }
            }
            out.push((key, text));
        }
    }
    out
}

/// `cmd   # what it shows` → `cmd` (a comment is set off by at least two spaces).
fn without_comment(line: &str) -> &str {
    match line.find("  #") {
        Some(at) => line[..at].trim_end(),
        None => line.trim_end(),
    }
}

#[test]
fn the_tour_and_this_test_name_the_same_commands() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("read README.md");
    let written: Vec<String> = commands(&readme).into_iter().map(|(k, _)| k).collect();
    for w in &written {
        assert!(TOUR.iter().any(|(c, _)| c == w), "README.md's tour has a command this test does not check: {w}");
    }
    for (c, _) in TOUR {
        assert!(written.iter().any(|w| w == c), "the tour no longer has this command: {c}");
    }
}

#[test]
fn the_readme_tour_runs_as_written() {
    let me = std::env::current_exe().expect("the test binary");
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--net", "--"])
        .arg(me)
        .args(["--exact", "inside_a_network_namespace_the_tour_runs", "--ignored", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .output()
        .expect("unshare (util-linux) runs the tour in a network namespace of its own");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "the tour failed:\n{text}");
}

#[test]
#[ignore = "run by the_readme_tour_runs_as_written, inside a network namespace"]
fn inside_a_network_namespace_the_tour_runs() {
    assert!(std::env::var_os(INSIDE).is_some(), "run by the_readme_tour_runs_as_written");
    let up = Command::new("ip").args(["link", "set", "lo", "up"]).status().expect("ip (iproute2)");
    assert!(up.success(), "loopback up in the namespace");
    let dir = TempDir::new();
    let tour = dir.path();
    copy_dir(&root().join("examples"), &tour.join("examples"));
    std::os::unix::fs::symlink(root().join("crates"), tour.join("crates")).expect("link crates/");
    let bin = tour.join(".bin");
    std::fs::create_dir(&bin).expect("bin dir");
    std::os::unix::fs::symlink(BIN, bin.join("gatehouse")).expect("link the binary");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());

    let readme = std::fs::read_to_string(root().join("README.md")).expect("read README.md");
    let mut servers: Vec<Server> = Vec::new();
    let mut gateway: Option<usize> = None;
    for (key, text) in commands(&readme) {
        let kind = TOUR.iter().find(|(c, _)| *c == key).map(|(_, k)| *k).unwrap_or_else(|| panic!("unknown: {key}"));
        eprintln!("tour$ {key}");
        match kind {
            Kind::Setup => {}
            Kind::Server { ready } => {
                // A new gateway takes the place of the one before and of the backends started
                // for it (not of those started for itself since, nor of Redis).
                if key.starts_with("gatehouse run") {
                    if let Some(g) = gateway {
                        let mut i = 0;
                        servers.retain_mut(|s| {
                            let keep = i > g || s.command.starts_with("redis-server");
                            i += 1;
                            if !keep {
                                s.stop();
                            }
                            keep
                        });
                    }
                }
                servers.push(Server::start(&key, &text, tour, &path, ready));
                if key.starts_with("gatehouse run") {
                    gateway = Some(servers.len() - 1);
                }
            }
            Kind::Run { expect, again } => {
                let started = Instant::now();
                loop {
                    let (status, output) = shell(&text, tour, &path);
                    let log = gateway.map(|g| servers[g].output()).unwrap_or_default();
                    let missing = unmet(expect, status, &output, &log);
                    if missing.is_empty() {
                        break;
                    }
                    if !again || started.elapsed() > DEADLINE {
                        let logs: String =
                            servers.iter().map(|s| format!("--- {}:\n{}\n", s.command, s.output())).collect();
                        panic!("`{key}` did not show {missing:?}: status {status}, output:\n{output}\n{logs}");
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
    for s in &mut servers {
        let out = s.output();
        assert!(!out.contains("panicked"), "{} panicked:\n{out}", s.command);
        s.stop();
    }
}

/// What of `expect` a command with this status and output did not show.
fn unmet(expect: &[Expect], status: i32, output: &str, log: &str) -> Vec<String> {
    let mut missing = Vec::new();
    let want = expect.iter().find_map(|e| if let Status(s) = e { Some(*s) } else { None }).unwrap_or(0);
    if status != want {
        missing.push(format!("exit status {want}"));
    }
    for e in expect {
        match e {
            Out(s) if !output.contains(s) => missing.push(format!("output {s:?}")),
            Log(s) if !log.contains(s) => missing.push(format!("gateway log {s:?}")),
            _ => {}
        }
    }
    missing
}

/// Runs `text` with bash in `dir`, bounded in time: its exit status and its output.
fn shell(text: &str, dir: &Path, path: &str) -> (i32, String) {
    let out = Command::new("timeout")
        .args(["20", "bash", "-c", text])
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// A command of the tour that keeps running, its output in a file.
struct Server {
    command: String,
    child: Child,
    log: PathBuf,
}

impl Server {
    fn start(command: &str, text: &str, dir: &Path, path: &str, ready: Ready) -> Server {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = dir.join(format!(".server-{n}.log"));
        let file = std::fs::File::create(&log).expect("server log");
        let child = Command::new("bash")
            .args(["-c", &format!("exec {text}")])
            .current_dir(dir)
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("start the server");
        let mut s = Server { command: command.to_string(), child, log };
        let started = Instant::now();
        loop {
            let up = match ready {
                Ready::Says(line) => s.output().contains(line),
                Ready::Port(port) => std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
            };
            if up {
                return s;
            }
            if let Ok(Some(status)) = s.child.try_wait() {
                panic!("`{command}` exited ({status}):\n{}", s.output());
            }
            assert!(started.elapsed() < DEADLINE, "`{command}` not ready:\n{}", s.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn output(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Ctrl-C, as the tour says, and waits for it to end.
    fn stop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) {
            if started.elapsed() > DEADLINE {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

#[test]
fn every_example_passes_check_from_any_directory() {
    let mut checked = 0;
    for e in std::fs::read_dir(root().join("examples")).expect("examples/").flatten() {
        let file = e.path();
        if file.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let out = Command::new(BIN).arg("check").arg(&file).current_dir("/").output().expect("gatehouse check");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("is valid"), "{}:\n{text}", file.display());
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} examples");
}

/// Every YAML block of README.md and docs/*.md that is a whole configuration (listeners, and
/// sites or services) passes `gatehouse check`, its relative paths taken beside it.
#[test]
fn every_complete_configuration_in_the_docs_passes_check() {
    let dir = TempDir::new();
    let mut files = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).expect("docs/").flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            files.push(e.path());
        }
    }
    files.sort();
    let mut checked = 0;
    for doc in files {
        let text = std::fs::read_to_string(&doc).expect("read the doc");
        let mut lines = text.lines().enumerate();
        while let Some((at, line)) = lines.next() {
            let fence = line.trim_start();
            if fence != "```yaml" {
                continue;
            }
            let indent = line.len() - fence.len();
            let block: Vec<&str> = lines
                .by_ref()
                .map(|(_, l)| l)
                .take_while(|l| l.trim() != "```")
                .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
                .collect();
            let top = |key: &str| block.iter().any(|l| l.starts_with(key));
            if !(top("listeners:") && (top("sites:") || top("services:"))) {
                continue;
            }
            let file = dir.join(&format!("block-{checked}.yaml"));
            std::fs::write(&file, block.join("\n")).expect("write the block");
            let out = Command::new(BIN).arg("check").arg(&file).output().expect("gatehouse check");
            assert!(out.status.success(), "{}:{}: {}", doc.display(), at + 1, String::from_utf8_lossy(&out.stderr));
            checked += 1;
        }
    }
    assert!(checked >= 2, "only {checked} configurations found");
}
