#!/usr/bin/env bash
# API conformance: schemathesis over the OpenAPI document of a running `netacl serve`.
#
# Starts `netacl serve` on a free loopback port with a throw-away data directory and a bootstrap
# client holding every scope, takes a token, and runs schemathesis (the pinned version of
# requirements.txt, in a virtualenv under target/) against /_netacl/v1/openapi.json: every
# check, every phase (examples, coverage with negative data, fuzzing, stateful links), a fixed
# number of examples per operation and a time limit. Any finding fails the run. Operations are
# taken from the document, so new endpoints are tested as soon as the route table has them.
#
# The rate limit is raised (not turned off: the X-RateLimit-* headers the document promises
# stay on every answer) so that schemathesis is never answered 429.
#
# Knobs (environment): SCHEMATHESIS_MAX_EXAMPLES (per operation, default 30),
# SCHEMATHESIS_MAX_TIME (seconds for the whole run, default 240), SCHEMATHESIS_SEED (default
# 20261125), SCHEMATHESIS_VENV (default target/schemathesis-venv), NETACL_BIN (default: built
# with cargo). Reports (JUnit, NDJSON) and the server's log go to target/schemathesis/.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
out="$target/schemathesis"
venv="${SCHEMATHESIS_VENV:-$target/schemathesis-venv}"
max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-30}"
max_time="${SCHEMATHESIS_MAX_TIME:-240}"
seed="${SCHEMATHESIS_SEED:-20261125}"
started=$(date +%s)

# --- schemathesis, pinned (requirements.txt holds every package of the environment) ---
if [ ! -x "$venv/bin/schemathesis" ] || ! cmp -s tests/schemathesis/requirements.txt "$venv/requirements.txt"; then
    rm -rf "$venv"
    if ! python3 -c 'import ensurepip' 2>/dev/null && [ "$(id -u)" = 0 ]; then
        # Debian splits venv's pip bootstrap into python3-venv.
        echo "schemathesis: installing python3-venv (Debian package)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-deps -r tests/schemathesis/requirements.txt
    cp tests/schemathesis/requirements.txt "$venv/requirements.txt"
fi
"$venv/bin/schemathesis" --version

# --- the server ---
if [ -z "${NETACL_BIN:-}" ]; then
    cargo build --release -q -p netacl
    NETACL_BIN="$target/release/netacl"
fi
rm -rf "$out"
mkdir -p "$out"
data=$(mktemp -d)
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
secret=$("$venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))')
"$NETACL_BIN" serve --listen "127.0.0.1:$port" --data-dir "$data" \
    --bootstrap-client-id schemathesis --bootstrap-client-secret "$secret" \
    --rate-limit-burst 1000000000 --rate-limit-per-second 1000000000 \
    >"$out/serve.log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT

token=$(NETACL_BASE="$base" NETACL_SECRET="$secret" "$venv/bin/python" - <<'PY'
import json, os, time, urllib.request
base = os.environ["NETACL_BASE"]
for _ in range(300):
    try:
        urllib.request.urlopen(base + "/_netacl/v1/openapi.json", timeout=2).read()
        break
    except OSError:
        time.sleep(0.1)
request = urllib.request.Request(
    base + "/oauth/token",
    data=json.dumps({
        "grant_type": "client_credentials", "client_id": "schemathesis",
        "client_secret": os.environ["NETACL_SECRET"],
        "audience": "https://localhost:%s/api/v2/" % base.rsplit(":", 1)[1],
    }).encode(),
    headers={"content-type": "application/json"},
)
print(json.load(urllib.request.urlopen(request, timeout=10))["access_token"])
PY
)
"$venv/bin/python" -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1]).read())' \
    "$base/_netacl/v1/openapi.json" "$out/openapi.json"

# --- the run ---
# Operations left out, by operation id, each with its reason: only those that would lock the run
# out (the run's token and client must stay valid to the end). schemathesis only warns about an
# id the document does not have, so each is checked against the served document first: an id
# that names no operation (renamed, or never there) stops the run here.
excluded=(
    # PUT /api/v2/keys/signing/{kid}/revoke: after a rotation, revoking the previous key, the one
    # that signed the run's token, makes every later request a 401.
    put_signing_keys
    # The operator API on tenants (/_netacl/v1/tenants): it takes the operator token, not the
    # tenant token this run holds, and a tenant it created would switch the deployment to strict
    # host routing (every later request on 127.0.0.1 refused with 421). Tested in Rust instead
    # (crates/cli/tests/tenant_cli.rs, tenant_isolation.rs, edge_platform.rs;
    # crates/server/tests/tenancy_directory.rs). The operator endpoints edges report to
    # (/_netacl/v1/tenants/edge/...) are run, with the operator token (schemathesis.toml).
    netacl_list_tenants
    netacl_create_tenant
    netacl_get_tenant
    netacl_delete_tenant
    netacl_watch_tenants
    # POST /_netacl/v1/tenants/{id}/edge-clients (operator token too): tested in Rust
    # (crates/cli/tests/edge_signatures.rs, crates/server/tests/tenancy_directory.rs).
    netacl_create_edge_client
)
"$venv/bin/python" - "$out/openapi.json" "${excluded[@]}" <<'PY'
import json, sys
with open(sys.argv[1], encoding="utf-8") as document_file:
    document = json.load(document_file)
ids = {op.get("operationId"): "%s %s" % (method.upper(), path)
       for path, item in document["paths"].items() for method, op in item.items()}
missing = [name for name in sys.argv[2:] if name not in ids]
for name in sys.argv[2:]:
    if name in ids:
        print("schemathesis: leaving out %s (%s)" % (name, ids[name]))
if missing:
    sys.exit("schemathesis: excluded operation id(s) not in the served document: %s" % ", ".join(missing))
PY
exclude_args=()
for id in "${excluded[@]}"; do
    exclude_args+=(--exclude-operation-id "$id")
done
# The operator token (generated by the server in its data directory) for the operations
# schemathesis.toml gives it to.
NETACL_OPERATOR_TOKEN=$(cat "$data/operator-token")
export NETACL_OPERATOR_TOKEN
set +e
NETACL_OPENAPI_JSON="$out/openapi.json" NETACL_ST_DROPPED="$out/dropped.ndjson" \
SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$root/tests/schemathesis" \
timeout $((max_time + 180)) "$venv/bin/schemathesis" \
    --config-file "$root/tests/schemathesis/schemathesis.toml" \
    run "$base/_netacl/v1/openapi.json" \
    --url "$base" \
    --header "Authorization: Bearer $token" \
    "${exclude_args[@]}" \
    --checks all \
    --phases examples,coverage,fuzzing,stateful \
    --max-examples "$max_examples" \
    --max-time "$max_time" \
    --seed "$seed" \
    --workers 1 \
    --request-timeout 70 \
    --generation-database none \
    --no-color \
    --report junit,ndjson --report-dir "$out" \
    2>&1 | tee "$out/schemathesis.log"
status=${PIPESTATUS[0]}
set -e
elapsed=$(( $(date +%s) - started ))
cases=$(grep -Eo '[0-9]+ generated' "$out/schemathesis.log" | tail -1 | grep -Eo '[0-9]+' || echo "?")
dropped=0
if [ -f "$out/dropped.ndjson" ]; then
    dropped=$(wc -l <"$out/dropped.ndjson")
fi
echo "schemathesis: $cases cases in ${elapsed}s (seed $seed, at most $max_examples examples per operation, ${max_time}s budget); $dropped failures explained by the document (see $out/dropped.ndjson); exit status $status"
exit "$status"
