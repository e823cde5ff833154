"""Load generators for bench/run-all and bench/quick: ab, wrk, h2load and gatehouse-loadgen (or
tls_load.py), run pinned or not, with a hard time limit, their output parsed into one dict per run.

Every dict has: ok (no failed request, no non-2xx answer, exit 0), requests (completed), rps,
mean_ms, p99_ms (None where the tool has no percentile: h2load), wall_s, cmd, and the tool's
failure counts.  Standard library only.
"""

import json
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class LoadError(Exception):
    """The load generator could not run or its output could not be read."""


def _run(cmd, cpu, limit):
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        raise LoadError(f"{' '.join(cmd)}: no end after {limit} s") from e
    return r, time.monotonic() - t0


def _ms(text):
    """wrk's durations: 850.00us, 1.23ms, 2.00s, 1.5m."""
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not m:
        raise LoadError(f"unreadable duration {text!r}")
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[m.group(2)]


def ab(url, n, c, keepalive=False, headers=(), cpu=None, limit=600):
    cmd = ["ab", "-q", "-n", str(n), "-c", str(c), "-r"] + (["-k"] if keepalive else [])
    for h in headers:
        cmd += ["-H", h]
    cmd.append(url)
    r, wall = _run(cmd, cpu, limit)
    out = r.stdout

    def field(name, cast=float, default=None):
        m = re.search(rf"^{re.escape(name)}:\s+([\d.]+)", out, re.M)
        if not m:
            if default is not None:
                return default
            raise LoadError(f"ab printed no '{name}' (exit {r.returncode}): {r.stderr.strip()[-500:]}")
        return cast(m.group(1))

    p99 = re.search(r"^\s+99%\s+(\d+)", out, re.M)
    res = {
        "tool": "ab", "cmd": " ".join(cmd), "wall_s": wall,
        "requests": field("Complete requests", int), "failed": field("Failed requests", int),
        "non2xx": field("Non-2xx responses", int, 0), "rps": field("Requests per second"),
        "mean_ms": field("Time per request"), "p99_ms": float(p99.group(1)) if p99 else None,
        "elapsed_s": field("Time taken for tests"), "exit": r.returncode,
    }
    proto = re.search(r"^SSL/TLS Protocol:\s+(\S+)", out, re.M)
    if proto:
        res["protocol"] = proto.group(1)
    res["ok"] = r.returncode == 0 and res["failed"] == 0 and res["non2xx"] == 0 and res["requests"] == n
    return res


def wrk(url, c, duration, threads=1, headers=(), script=None, cpu=None):
    cmd = ["wrk", "-t", str(threads), "-c", str(c), "-d", f"{duration}s", "--latency", "--timeout", "10s"]
    for h in headers:
        cmd += ["-H", h]
    if script:
        cmd += ["-s", script]
    cmd.append(url)
    r, wall = _run(cmd, cpu, duration + 60)
    out = r.stdout
    m_req = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    m_rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    m_avg = re.search(r"Latency\s+(\S+)", out)
    m_p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    if not (m_req and m_rps and m_avg and m_p99):
        raise LoadError(f"wrk output unreadable (exit {r.returncode}): {out[-500:]} {r.stderr[-300:]}")
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = sum(int(x) for x in sock.groups()) if sock else 0
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    res = {
        "tool": "wrk", "cmd": " ".join(cmd), "wall_s": wall, "requests": int(m_req.group(1)),
        "rps": float(m_rps.group(1)), "mean_ms": _ms(m_avg.group(1)), "p99_ms": _ms(m_p99.group(1)),
        "socket_errors": errors, "non2xx": int(non2xx.group(1)) if non2xx else 0, "exit": r.returncode,
    }
    # wrk stops mid-request: a few read errors at the end of a Connection: close run are its own.
    res["ok"] = r.returncode == 0 and res["non2xx"] == 0 and errors <= max(c, res["requests"] // 1000)
    return res


def h2load(url, c, duration=None, warmup=0.5, streams=1, h1=False, cpu=None, threads=1, n=None):
    """A timed run (DURATION s after WARMUP s), or N requests in all when N is given: with thousands
    of streams in flight a request takes longer than a short timed run lasts."""
    cmd = ["h2load", "-c", str(c), "-m", str(streams), "-t", str(threads)]
    if n:
        cmd += ["-n", str(n)]
    else:
        cmd += ["-D", f"{int(duration * 1000)}ms", "--warm-up-time", f"{int(warmup * 1000)}ms"]
    cmd += (["--h1"] if h1 else []) + [url]
    r, wall = _run(cmd, cpu, (duration or 0) + warmup + 60)
    out = r.stdout
    fin = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
    reqs = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                     r"(\d+) errored, (\d+) timeout", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    treq = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)
    proto = re.search(r"Application protocol: (\S+)", out)
    if not (fin and reqs and codes and treq):
        raise LoadError(f"h2load output unreadable (exit {r.returncode}): {out[-600:]} {r.stderr[-300:]}")
    failed = int(reqs.group(5)) + int(reqs.group(6)) + int(reqs.group(7))
    non2xx = sum(int(codes.group(i)) for i in (2, 3, 4))
    res = {
        "tool": "h2load", "cmd": " ".join(cmd), "wall_s": wall, "requests": int(reqs.group(4)),
        "rps": float(fin.group(3)), "mean_ms": _ms(treq.group(3)), "p99_ms": None, "failed": failed,
        "non2xx": non2xx, "protocol": proto.group(1) if proto else None, "exit": r.returncode,
    }
    want = "http/1.1" if h1 else "h2"
    res["ok"] = failed == 0 and non2xx == 0 and res["requests"] > 0 and (
        url.startswith("http:") or res["protocol"] == want)
    return res


def tls_client():
    """The TLS client of the session and certs experiments: gatehouse-loadgen (LOADGEN_BIN, which
    bench/run-all and bench/quick build), fast enough to keep the server under test busy; without
    it, tls_load.py (Python and OpenSSL, the same flags and output, about a fifth of the rate)."""
    return os.environ.get("LOADGEN_BIN") or None


def tls_client_name():
    return "gatehouse-loadgen" if tls_client() else "tls_load.py"


def tls_load(port, n, c, cpu=None, extra=(), limit=300):
    """N new TLS connections, C at a time, one GET each, with tls_client()."""
    binary = tls_client()
    head = [binary] if binary else ["python3", os.path.join(HERE, "tls_load.py")]
    cmd = head + ["--port", str(port), "-n", str(n), "-c", str(c),
                  "--max-seconds", str(max(limit - 30, limit / 2))] + list(extra)
    r, wall = _run(cmd, cpu, limit)
    try:
        j = json.loads(r.stdout)
    except ValueError as e:
        raise LoadError(f"{tls_client_name()} printed no JSON (exit {r.returncode}): {r.stderr[-500:]}") from e
    # As the report shows it: the client by name, ports and the per-run seed as placeholders.
    shown, args = [tls_client_name(), "-n", str(n), "-c", str(c)], list(extra)
    for i, arg in enumerate(args[:-1]):
        if arg in ("--origin-port", "--seed"):
            args[i + 1] = "A_PORT" if arg == "--origin-port" else "REP"
    shown += args + ["--port", str(port)]
    j.update({"tool": "loadgen" if binary else "tls_load", "cmd": " ".join(shown), "wall_s": wall, "exit": r.returncode,
              "requests": j.get("ok", 0), "rps": j.get("conn_per_s", 0.0), "mean_ms": j.get("mean_ms"),
              "p99_ms": j.get("p99_ms")})
    j["ok"] = r.returncode == 0
    return j
