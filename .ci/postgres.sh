# shellcheck shell=bash
# Installs (Debian package) and starts a throw-away PostgreSQL server on loopback for the tests,
# and exports what they read:
#   NETACL_TEST_DATABASE_URL  postgres://postgres@127.0.0.1:PORT/netacl_test
#   NETACL_TEST_PG_BINDIR     the server's bin directory (pg_ctl, ...)
#   NETACL_TEST_PG_DATA       its data directory (the outage test stops and starts it)
#   NETACL_TEST_PG_USER       the account the server runs as ("postgres" when we are root)
# Source it (`. .ci/postgres.sh`); call `netacl_pg_stop` when done (.ci/run does, in a trap).
# Idempotent: sourcing it again while its server runs changes nothing.

netacl_pg_stop() {
    if [[ -n "${NETACL_TEST_PG_DATA:-}" && -f "${NETACL_TEST_PG_DATA}/postmaster.pid" ]]; then
        netacl_pg_as "$NETACL_TEST_PG_BINDIR/pg_ctl" -D "$NETACL_TEST_PG_DATA" -m fast -w stop >/dev/null || true
    fi
    # Remove the throw-away cluster (only ever one this script made).
    case "${NETACL_TEST_PG_DATA:-}" in
        /tmp/netacl-pg.*/data) rm -rf "$(dirname "$NETACL_TEST_PG_DATA")" ;;
    esac
    unset NETACL_TEST_DATABASE_URL NETACL_TEST_PG_DATA
}

netacl_pg_as() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u "$NETACL_TEST_PG_USER" -- "$@"
    else
        "$@"
    fi
}

netacl_pg_start() {
    local bindir version root port
    if [[ -n "${NETACL_TEST_PG_DATA:-}" && -f "${NETACL_TEST_PG_DATA}/postmaster.pid" ]] \
        && [[ -n "${NETACL_TEST_DATABASE_URL:-}" ]]; then
        echo "postgres.sh: already running (${NETACL_TEST_DATABASE_URL})"
        return 0
    fi
    bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -z "$bindir" || ! -x "$bindir/initdb" ]]; then
        if [[ "$(id -u)" != 0 ]]; then
            echo "postgres.sh: PostgreSQL is not installed and we are not root" >&2
            return 1
        fi
        echo "postgres.sh: installing PostgreSQL (Debian package)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
        bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    fi
    version="$("$bindir/postgres" --version)"
    if [[ "$(id -u)" == 0 ]]; then
        NETACL_TEST_PG_USER=postgres
    else
        NETACL_TEST_PG_USER="$(id -un)"
    fi
    root="$(mktemp -d /tmp/netacl-pg.XXXXXX)"
    mkdir -p "$root/sock"
    chmod 755 "$root"
    [[ "$(id -u)" == 0 ]] && chown -R "$NETACL_TEST_PG_USER" "$root"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    NETACL_TEST_PG_BINDIR="$bindir"
    NETACL_TEST_PG_DATA="$root/data"
    export NETACL_TEST_PG_BINDIR NETACL_TEST_PG_DATA NETACL_TEST_PG_USER
    netacl_pg_as "$bindir/initdb" -D "$root/data" -U postgres --auth=trust -E UTF8 --no-locale >"$root/initdb.log" \
        || { cat "$root/initdb.log" >&2; return 1; }
    # Settings live in the data directory, so a plain `pg_ctl start -D DATA` restarts it as it was.
    cat >>"$root/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$root/sock'
max_connections = 200
fsync = on
CONF
    netacl_pg_as "$bindir/pg_ctl" -D "$root/data" -l "$root/server.log" -w start >/dev/null \
        || { cat "$root/server.log" >&2; return 1; }
    netacl_pg_as "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres netacl_test
    export NETACL_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/netacl_test"
    echo "postgres.sh: $version on 127.0.0.1:$port (data $root/data)"
}

netacl_pg_start
