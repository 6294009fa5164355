#!/usr/bin/env python3
"""netacl inside Pingora under load: `netacl-pingora` deciding with 10,000 rules, the same binary
with `--acl off` (the same Pingora proxy without the filter), and `netacl edge` (the hyper proxy)
with the same rules, in front of one nginx upstream (`return 200`). wrk on loopback, the
configurations in alternating rounds within one run; prints JSON (requests/s and p50/p99 latency
per configuration, per round and as medians, and the ratios).

    cargo build --release --workspace --all-targets
    python3 benches/proxies/pingora.py [--rounds 5] [--duration 8] [--connections 32]

Needs nginx and wrk (Debian packages). Figures and the machine: the book's "Inside your proxy"
performance section. Not run by CI (a timing is measured, never asserted).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import (ROOT, free_port, require_allowed, start_backend, stop, summary,  # noqa: E402
                 synthetic, wait_port, wrk)  # (the sibling bench)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netacl", default=os.path.join(ROOT, "target/release/netacl"))
    ap.add_argument("--pingora", default=os.path.join(ROOT, "target/release/netacl-pingora"))
    ap.add_argument("--rules", type=int, default=10000)
    ap.add_argument("--cidrs", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--connections", type=int, default=32)
    args = ap.parse_args()
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed (apt-get install {tool})")
    d = tempfile.mkdtemp(prefix="netacl-pingora-bench-")
    procs = []
    try:
        synthetic(d, args.rules, args.cidrs)
        up, _ = start_backend(d, procs)
        configs = {}

        def start(name, cmd):
            port = free_port()
            procs.append(subprocess.Popen([c.replace("PORT", str(port)) for c in cmd],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_port(port)
            configs[name] = port

        rules = ["--rules-file", f"{d}/rules.json"]
        common = ["--listen", "127.0.0.1:PORT", "--metrics-listen", "off"]
        start("pingora_netacl", [args.pingora, "--upstream", f"127.0.0.1:{up}"] + rules + common)
        start("pingora_acl_off", [args.pingora, "--upstream", f"127.0.0.1:{up}", "--acl", "off"]
              + common)
        start("edge_netacl", [args.netacl, "edge", "--upstream", f"http://127.0.0.1:{up}"]
              + rules + common)
        require_allowed(configs)
        rounds = {name: [] for name in configs}
        for _ in range(args.rounds):
            for name, port in configs.items():
                rounds[name].append(wrk(port, args.duration, args.connections))
        report = summary(args, rounds)
        c = report["configs"]
        rps = {name: c[name]["requests_per_second_median"] for name in c}
        report["pingora_netacl_over_acl_off"] = rps["pingora_netacl"] / rps["pingora_acl_off"]
        report["pingora_netacl_over_edge"] = rps["pingora_netacl"] / rps["edge_netacl"]
        print(json.dumps(report, indent=2))
    finally:
        stop(procs, d)


if __name__ == "__main__":
    main()
