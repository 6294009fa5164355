#!/usr/bin/env bash
# Offline advisory audit of Cargo.lock and fuzz/Cargo.lock (run by .ci/run; run it by hand with `bash .ci/audit.sh`).
#
# - Installs cargo-audit (pinned, --locked) unless that version is already on PATH.
# - Builds the advisory database in a temporary directory: the RustSec snapshot in
#   ../shared/reference-data/advisory-db (no network), with the project's own advisories in
#   .ci/advisories/crates laid over it (advisories published after the snapshot, handled by name:
#   GHSA-h395-gr6q-cpjc for jsonwebtoken < 10.3.0).
# - Self-test: the audit must refuse .ci/advisories/selftest/Cargo.lock (the dependency versions
#   of before issue 11 and an unsound anyhow), naming each advisory, so that a database that
#   silently failed to load, or an overlay the tool skipped, cannot pass for a clean audit.
# - Audits Cargo.lock and fuzz/Cargo.lock (the fuzz targets' own workspace): fails on any vulnerability or unsound advisory. There is no ignore list.
#   Unmaintained crates are reported (warnings) without failing.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_AUDIT_VERSION=0.22.2
SNAPSHOT="${NETACL_ADVISORY_DB:-../shared/reference-data/advisory-db}"

if ! cargo audit --version 2>/dev/null | grep -q " $CARGO_AUDIT_VERSION$"; then
    echo "audit: installing cargo-audit $CARGO_AUDIT_VERSION (about 10 minutes on 2 cores)"
    timeout 1800 cargo install --locked --quiet --no-default-features --version "$CARGO_AUDIT_VERSION" cargo-audit
fi

if [[ ! -d "$SNAPSHOT/crates" ]]; then
    echo "audit: no advisory database at $SNAPSHOT (set NETACL_ADVISORY_DB)" >&2
    exit 1
fi
db="$(mktemp -d /tmp/netacl-advisory-db.XXXXXX)"
trap 'rm -rf "$db"' EXIT
cp -R "$SNAPSHOT/crates" "$db/crates"
cp -R .ci/advisories/crates/. "$db/crates/"

audit() {
    timeout 300 cargo audit --db "$db" --no-fetch --no-yanked --deny unsound "$@"
}

# Self-test: every advisory below must be reported, and the audit must fail.
selftest_out="$(audit --file .ci/advisories/selftest/Cargo.lock 2>&1)" && {
    echo "$selftest_out"
    echo "audit: the self-test lock file passed the audit; the database is not working" >&2
    exit 1
}
for id in GHSA-h395-gr6q-cpjc RUSTSEC-2025-0132 RUSTSEC-2023-0071 RUSTSEC-2026-0190; do
    if ! grep -q "$id" <<<"$selftest_out"; then
        echo "$selftest_out"
        echo "audit: the self-test did not report $id" >&2
        exit 1
    fi
done
echo "audit: self-test refused as expected (GHSA-h395-gr6q-cpjc, RUSTSEC-2025-0132, RUSTSEC-2023-0071, RUSTSEC-2026-0190)"

audit
echo "audit: fuzz/Cargo.lock"
audit --file fuzz/Cargo.lock
