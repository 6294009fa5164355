#!/usr/bin/env python3
"""HAProxy 3.x for the doors tests, beside Debian 12's 2.6: Debian unstable's `haproxy` package
(3.1 and later carry SPOE's rewritten multiplexer, which talks to an agent differently), unpacked
with the shared libraries it needs from unstable into DIR, and run through unstable's own dynamic
loader, since Debian 12's C library is older than the one it was built against. Nothing is
installed on the machine: apt reads its own lists and cache under DIR.

    python3 .ci/haproxy_next.py DIR      # prints DIR/haproxy, an executable wrapper

.ci/run exports NETACL_TEST_HAPROXY="haproxy:$(python3 .ci/haproxy_next.py target/haproxy-next)"
(crates/doors/tests/doors/haproxy.rs). Fails, naming what is missing, when the package or a
library cannot be fetched or the unpacked HAProxy does not report a version of 3.1 or later.
"""
import os
import re
import subprocess
import sys

SUITE = "sid"
# The libraries are followed from the package's Depends; other packages (adduser, lsb-base,
# debconf) are its installation's, not its binary's.
LIBRARY = re.compile(r"^(lib[a-z0-9.+-]+|zlib1g)$")


def apt(base, *args):
    options = [
        "-o", f"Dir::Etc::SourceList={base}/sources.list",
        "-o", f"Dir::Etc::SourceParts={base}/empty",
        "-o", f"Dir::State::Lists={base}/lists",
        "-o", f"Dir::Cache={base}/cache",
        "-o", "Dir::Etc::Preferences=/dev/null",
        "-o", f"Dir::Etc::PreferencesParts={base}/empty",
        "-o", "Debug::NoLocking=1",
        "-o", "APT::Sandbox::User=root",
        "-qq",
    ]
    subprocess.run(["apt-get", *options, *args], check=True, cwd=f"{base}/debs", timeout=600)


def depends(control):
    """Package names of a Depends line (first of each alternative, no versions)."""
    names = []
    for clause in control.split(","):
        first = clause.split("|")[0].strip()
        name = re.split(r"[\s(:]", first, maxsplit=1)[0]
        if name:
            names.append(name)
    return names


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = os.path.abspath(sys.argv[1])
    base = f"{out}/apt"
    for d in ("lists/partial", "cache/archives/partial", "debs", "empty"):
        os.makedirs(f"{base}/{d}", exist_ok=True)
    with open(f"{base}/sources.list", "w") as f:
        f.write(f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                f"http://deb.debian.org/debian {SUITE} main\n")
    apt(base, "update")
    wanted, fetched = ["haproxy"], set()
    while wanted:
        name = wanted.pop()
        if name in fetched:
            continue
        fetched.add(name)
        apt(base, "download", name)
        deb = next(f for f in os.listdir(f"{base}/debs")
                   if f.startswith(f"{name}_") and f.endswith(".deb"))
        control = subprocess.run(["dpkg-deb", "-f", f"{base}/debs/{deb}", "Depends",
                                  "Pre-Depends"], check=True, capture_output=True,
                                 text=True).stdout
        for line in control.splitlines():
            _, _, value = line.partition(":")
            wanted.extend(n for n in depends(value) if LIBRARY.match(n) and n not in fetched)
    root = f"{out}/root"
    os.makedirs(root, exist_ok=True)
    for deb in sorted(os.listdir(f"{base}/debs")):
        if deb.endswith(".deb"):
            subprocess.run(["dpkg-deb", "-x", f"{base}/debs/{deb}", root], check=True)
    libs = f"{root}/usr/lib/x86_64-linux-gnu"
    wrapper = f"{out}/haproxy"
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                f'exec "{libs}/ld-linux-x86-64.so.2" --library-path "{libs}" '
                f'"{root}/usr/sbin/haproxy" "$@"\n')
    os.chmod(wrapper, 0o755)
    version = subprocess.run([wrapper, "-v"], check=True, capture_output=True,
                             text=True).stdout.split("\n")[0]
    found = re.search(r"version (\d+)\.(\d+)", version)
    if not found or (int(found.group(1)), int(found.group(2))) < (3, 1):
        sys.exit(f"Debian {SUITE}'s HAProxy is not 3.1 or later: {version!r}")
    print(f"haproxy_next: {version} ({len(fetched)} packages from {SUITE})", file=sys.stderr)
    print(wrapper)


if __name__ == "__main__":
    main()
