#!/usr/bin/env python3
"""netacl behind the real proxies under load: nginx asking the forward-auth door, HAProxy asking
the SPOE agent, each against the same proxy with the same shipped configuration asking a
do-nothing auth server (nginx) or with no filter at all (HAProxy). wrk on loopback, the
configurations in alternating rounds within one run; and in each round, Envoy's view of the
ext_authz service (`Check` over one persistent channel, one at a time, timed by the
`ext_authz_latency` example). Prints JSON: requests/s and p50/p99 latency per configuration, per
round and as medians, the ratios, the Check latencies, and netacl's own time per check at each
door from the `netacl_edge_door_check_seconds` histogram on /metrics. With `--cpu`, also the CPU
time (user + system, from /proc and wrk's resource usage) that each process spent per request
in each round: the proxy, netacl, the upstream nginx and wrk, so that a ratio can be read as
where the machine's time went.

    cargo build --release --workspace --all-targets
    python3 benches/proxies/run.py [--rounds 5] [--duration 8] [--connections 32]

Needs nginx, haproxy and wrk (Debian packages). Figures and the machine: the book's
"Inside your proxy" performance section. Not run by CI (a timing is measured, never asserted).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import resource
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLACEHOLDERS = ["NETACL_ADDR", "UPSTREAM_ADDR", "LISTEN_ADDR", "LISTEN_HOST", "LISTEN_PORT",
                "NETACL_DEPLOY_DIR"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render(template, values, out):
    text = open(os.path.join(ROOT, template)).read()
    for name in PLACEHOLDERS:
        text = text.replace("${%s}" % name, values[name])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    return text


def wait_port(port, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port} after {seconds} s")


def status(port):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/authorize?client_id=bench",
                                     headers={"Host": "app.example.test"})
    try:
        return urllib.request.urlopen(request, timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def cpu_seconds(pid):
    """User + system CPU time of every thread of process `pid`, in seconds."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def process_tree(pid):
    """`pid` and its children (nginx's and HAProxy's workers)."""
    found = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            for child in f.read().split():
                found.extend(process_tree(int(child)))
    except OSError:
        pass
    return found


def wrk(port, duration, connections, watched=None):
    """One wrk run; with `watched` (a name → pid map), each one's CPU µs per request too."""
    before = {name: sum(cpu_seconds(p) for p in process_tree(pid))
              for name, pid in (watched or {}).items()}
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency",
         "-H", "Host: app.example.test", f"http://127.0.0.1:{port}/authorize?client_id=bench"],
        capture_output=True, text=True, timeout=duration + 30, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {}
    for pct in ("50", "99"):
        value, unit = re.search(r"\s%s%%\s+([\d.]+)(us|ms|s)" % pct, out).groups()
        lat[pct] = float(value) * UNITS[unit]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    result = {"requests_per_second": rps, "p50_ms": lat["50"], "p99_ms": lat["99"],
              "non_2xx": int(non2xx.group(1)) if non2xx else 0}
    if watched is not None:
        requests = rps * duration
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        per = {name: round((sum(cpu_seconds(p) for p in process_tree(pid)) - before[name])
                           / requests * 1e6, 2)
               for name, pid in watched.items()}
        per["wrk"] = round((after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime)
                           / requests * 1e6, 2)
        per["total"] = round(sum(per.values()), 2)
        result["cpu_us_per_request"] = per
    return result


def synthetic(d, rules, cidrs):
    """The rule set and request mix of `synthetic_files` in `d` (rules.json, requests.jsonl)."""
    subprocess.run([os.path.join(ROOT, "target/release/examples/synthetic_files"), str(rules),
                    str(cidrs), "10", f"{d}/rules.json", f"{d}/requests.jsonl"], check=True,
                   stdout=subprocess.DEVNULL)


def start_backend(d, procs, noop_auth=False):
    """One nginx in `d/backend`: the upstream (`return 200`) and, with `noop_auth`, a do-nothing
    auth server (`return 204`). Its ports (upstream, auth or None), once it listens."""
    up = free_port()
    noop = free_port() if noop_auth else None
    auth = f"  server {{ listen 127.0.0.1:{noop}; location / {{ return 204; }} }}\n" if noop else ""
    os.makedirs(f"{d}/backend", exist_ok=True)
    with open(f"{d}/backend/nginx.conf", "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {d}/backend/nginx.pid;
error_log {d}/backend/error.log warn;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {d}/backend/t; proxy_temp_path {d}/backend/t;
  fastcgi_temp_path {d}/backend/t; uwsgi_temp_path {d}/backend/t; scgi_temp_path {d}/backend/t;
  server {{ listen 127.0.0.1:{up}; location / {{ return 200 "ok"; }} }}
{auth}}}
""")
    procs.append(subprocess.Popen(["nginx", "-p", f"{d}/backend/", "-c",
                                   f"{d}/backend/nginx.conf"], stderr=subprocess.DEVNULL))
    wait_port(up)
    if noop:
        wait_port(noop)
    return up, noop


def require_allowed(configs):
    """Every configuration answers the bench request with 200 (else the rounds would measure
    refusals)."""
    for name, port in configs.items():
        got = status(port)
        if got != 200:
            sys.exit(f"{name}: the bench request got {got}, not 200: the comparison would "
                     "measure refusals")


def summary(args, rounds):
    """The report's common part: the settings, the load after the rounds, and per configuration
    the medians of requests/s, p50 and p99 with every round."""
    report = {"rules": args.rules, "cidrs": args.cidrs, "rounds": args.rounds,
              "duration_s": args.duration, "connections": args.connections,
              "loadavg_after": open("/proc/loadavg").read().split()[:3], "configs": {}}
    for name, runs in rounds.items():
        report["configs"][name] = {
            "requests_per_second_median": statistics.median(r["requests_per_second"] for r in runs),
            "p50_ms_median": statistics.median(r["p50_ms"] for r in runs),
            "p99_ms_median": statistics.median(r["p99_ms"] for r in runs),
            "rounds": runs}
        if all("cpu_us_per_request" in r for r in runs):
            report["configs"][name]["cpu_us_per_request_median"] = {
                part: statistics.median(r["cpu_us_per_request"][part] for r in runs)
                for part in runs[0]["cpu_us_per_request"]}
    return report


def stop(procs, d):
    """Stops every process (SIGTERM, then SIGKILL after 10 s) and removes `d`."""
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(d, ignore_errors=True)


def check_quantiles(metrics_text):
    """Per door, from the netacl_edge_door_check_seconds histogram on /metrics: the number of
    checks and the bucket bounds (in µs) within which half and 99% of them took."""
    buckets = {}
    for line in metrics_text.splitlines():
        m = re.match(r'netacl_edge_door_check_seconds_bucket\{door="([^"]+)",le="([^"]+)"\} (\d+)',
                     line)
        if m:
            buckets.setdefault(m.group(1), []).append((float(m.group(2)), int(m.group(3))))
    out = {}
    for door, bounds in buckets.items():
        total = bounds[-1][1]
        if total == 0:
            continue

        def within(q):
            for le, count in bounds:
                if count >= q * total:
                    return le * 1e6
            return float("inf")
        at_5us = next((count for le, count in bounds if abs(le - 5e-6) < 1e-12), None)
        out[door] = {"checks": total, "p50_us_at_most": within(0.5), "p99_us_at_most": within(0.99),
                     "share_within_5us": None if at_5us is None else at_5us / total}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netacl", default=os.path.join(ROOT, "target/release/netacl"))
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--cidrs", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--checks", type=int, default=20000,
                    help="ext_authz Checks timed per round")
    ap.add_argument("--only", choices=["nginx", "haproxy"],
                    help="run one proxy's pair of configurations")
    ap.add_argument("--cpu", action="store_true",
                    help="report each process's CPU time per request in every round")
    args = ap.parse_args()
    for tool in ("nginx", "haproxy", "wrk"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed (apt-get install {tool})")
    d = tempfile.mkdtemp(prefix="netacl-proxies-")
    procs = []
    try:
        synthetic(d, args.rules, args.cidrs)
        # The upstream (200) and the do-nothing auth server (204), one nginx.
        up, noop = start_backend(d, procs, noop_auth=True)
        backend = procs[-1].pid
        fa, spoe, authz, metrics = free_port(), free_port(), free_port(), free_port()
        procs.append(subprocess.Popen(
            [args.netacl, "edge", "--rules-file", f"{d}/rules.json",
             "--forward-auth-listen", f"127.0.0.1:{fa}", "--spoe-listen", f"127.0.0.1:{spoe}",
             "--ext-authz-listen", f"127.0.0.1:{authz}",
             "--metrics-listen", f"127.0.0.1:{metrics}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in (fa, spoe, authz):
            wait_port(port)
        edge = procs[-1].pid
        configs = {}
        pids = {}

        def proxy(name, kind, netacl_addr, strip_filter=False):
            port = free_port()
            base = f"{d}/{name}"
            values = {"NETACL_ADDR": netacl_addr, "UPSTREAM_ADDR": f"127.0.0.1:{up}",
                      "LISTEN_ADDR": f"127.0.0.1:{port}", "LISTEN_HOST": "127.0.0.1",
                      "LISTEN_PORT": str(port), "NETACL_DEPLOY_DIR": base}
            if kind == "nginx":
                render("deploy/nginx/nginx.conf.template", values, f"{base}/nginx/nginx.conf")
                cmd = ["nginx", "-p", f"{base}/nginx/", "-c", f"{base}/nginx/nginx.conf"]
            else:
                text = render("deploy/haproxy/haproxy.cfg.template", values,
                              f"{base}/haproxy/haproxy.cfg")
                render("deploy/haproxy/netacl-spoe.conf.template", values,
                       f"{base}/haproxy/netacl-spoe.conf")
                if strip_filter:
                    # The same file without the filter and the rules that read its answer.
                    kept = [l for l in text.splitlines()
                            if "spoe" not in l and "txn.netacl" not in l]
                    with open(f"{base}/haproxy/haproxy.cfg", "w") as f:
                        f.write("\n".join(kept) + "\n")
                cmd = ["haproxy", "-f", f"{base}/haproxy/haproxy.cfg"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            wait_port(port)
            configs[name] = port
            pids[name] = procs[-1].pid

        if args.only != "haproxy":
            proxy("nginx_netacl", "nginx", f"127.0.0.1:{fa}")
            proxy("nginx_noop_auth", "nginx", f"127.0.0.1:{noop}")
        if args.only != "nginx":
            proxy("haproxy_netacl", "haproxy", f"127.0.0.1:{spoe}")
            proxy("haproxy_no_filter", "haproxy", f"127.0.0.1:{spoe}", strip_filter=True)
        require_allowed(configs)
        rounds = {name: [] for name in configs}
        latency = os.path.join(ROOT, "target/release/examples/ext_authz_latency")
        authz_rounds = []
        for _ in range(args.rounds):
            for name, port in configs.items():
                watched = None
                if args.cpu:
                    # The do-nothing auth server is the upstream's nginx too: its share of the
                    # nginx_noop_auth rounds is under "upstream".
                    watched = {"proxy": pids[name], "netacl": edge, "upstream": backend}
                rounds[name].append(wrk(port, args.duration, args.connections, watched))
            # Envoy's view of ext_authz: Check over one persistent channel, one at a time.
            if args.only is None:
                out = subprocess.run([latency, f"127.0.0.1:{authz}", f"{d}/requests.jsonl",
                                      "--checks", str(args.checks)],
                                     check=True, capture_output=True, text=True).stdout
                authz_rounds.append(json.loads(out))
        report = summary(args, rounds)
        c = report["configs"]
        if "nginx_netacl" in c:
            report["nginx_netacl_over_noop_auth"] = (
                c["nginx_netacl"]["requests_per_second_median"]
                / c["nginx_noop_auth"]["requests_per_second_median"])
        if "haproxy_netacl" in c:
            report["haproxy_netacl_over_no_filter"] = (
                c["haproxy_netacl"]["requests_per_second_median"]
                / c["haproxy_no_filter"]["requests_per_second_median"])
        if authz_rounds:
            report["ext_authz_check"] = {
                "p50_us_median": statistics.median(r["p50_us"] for r in authz_rounds),
                "p99_us_median": statistics.median(r["p99_us"] for r in authz_rounds),
                "rounds": authz_rounds}
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as r:
            text = r.read().decode()
        report["door_requests"] = [l for l in text.splitlines()
                                   if l.startswith("netacl_edge_door_requests_total")
                                   and not l.endswith(" 0")]
        report["door_check_time"] = check_quantiles(text)
        print(json.dumps(report, indent=2))
    finally:
        stop(procs, d)


if __name__ == "__main__":
    main()
