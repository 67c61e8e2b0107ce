#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A private PostgreSQL 15 cluster for one test: initdb into a new directory
# under /tmp, listening on 127.0.0.1 on a free port and on a socket in that
# directory, trust authentication, fsync off. It never touches the host's
# own clusters (/etc/postgresql, /var/lib/postgresql, postgresql@15-main):
# no pg_createcluster, no port of theirs, nothing outside its directory.
#
# Two ways to use it:
#
#   bash tests/fleet/pg.sh [CMD ARGS...]
#       starts a cluster, runs CMD with the variables below in its
#       environment, stops and removes the cluster, exits with CMD's status.
#       Without CMD it prints the connection string and keeps the cluster
#       until it is interrupted.
#
#   source tests/fleet/pg.sh; pg_start
#       the same in the calling shell; pg_start traps EXIT to stop it, and
#       INT, TERM and HUP to exit (PG_NO_TRAP=1: the caller calls pg_stop
#       itself).
#
# Variables it sets (exported):
#   PG_CONNINFO        the database "agentfab" over TCP, no user: add "user=ROLE"
#   PG_ADMIN_CONNINFO  the same as the cluster's superuser "postgres"
#   PG_OWNER_CONNINFO  the same as role "agentfab", which owns the database
#                      (not a superuser: the fleet's schema is made by it)
#   PG_PORT, PG_SOCKET_DIR, PG_DIR
#   PG_RESTART         a command that restarts the server (pg_ctl restart -m fast)
#   PG_STOP_SERVER, PG_START_SERVER  commands that stop or start it (the data stays)
#
# As root, the server runs as the "postgres" user (initdb refuses root);
# otherwise as the caller.
#
# PG_BIN (default /usr/lib/postgresql/15/bin) names the binaries.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

pg_as_server() {
        if [ "$(id -u)" = 0 ]; then
                runuser -u postgres -- "$@"
        else
                "$@"
        fi
}

pg_free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pg_start() {
        local port tries
        if [ ! -x "$PG_BIN/initdb" ]; then
                echo "pg.sh: no PostgreSQL 15 in $PG_BIN (apt-get install postgresql)" >&2
                return 1
        fi
        PG_DIR=$(mktemp -d /tmp/agentfab-pg.XXXXXX) || return 1
        chmod 755 "$PG_DIR"
        mkdir -p "$PG_DIR/socket"
        [ "$(id -u)" = 0 ] && chown -R postgres: "$PG_DIR"
        if [ -z "${PG_NO_TRAP:-}" ]; then
                # A signal ends the shell, and its EXIT trap removes the cluster.
                trap pg_stop EXIT
                trap 'exit 130' INT
                trap 'exit 143' TERM
                trap 'exit 129' HUP
        fi

        if ! pg_as_server "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --no-sync \
                        >"$PG_DIR/initdb.log" 2>&1; then
                cat "$PG_DIR/initdb.log" >&2
                return 1
        fi
        # A port that was free a moment ago may be taken by the time the
        # server binds it: try a few.
        # The settings go into the cluster's own postgresql.conf (a later
        # line wins), so that every start, also PG_START_SERVER's, uses them.
        for tries in 1 2 3 4 5; do
                port=$(pg_free_port) || return 1
                printf '%s\n' "port = $port" "unix_socket_directories = '$PG_DIR/socket'" \
                        "listen_addresses = '127.0.0.1'" "fsync = off" "synchronous_commit = off" \
                        "full_page_writes = off" "max_connections = 200" >>"$PG_DIR/data/postgresql.conf"
                if pg_as_server "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
                                start >/dev/null 2>&1; then
                        break
                fi
                port=
        done
        if [ -z "$port" ]; then
                echo "pg.sh: the server did not start:" >&2
                tail -20 "$PG_DIR/server.log" >&2
                return 1
        fi

        export PG_DIR PG_PORT=$port PG_SOCKET_DIR=$PG_DIR/socket
        export PG_CONNINFO="host=127.0.0.1 port=$port dbname=agentfab"
        export PG_ADMIN_CONNINFO="$PG_CONNINFO user=postgres"
        export PG_OWNER_CONNINFO="$PG_CONNINFO user=agentfab"
        local ctl="$PG_BIN/pg_ctl -D $PG_DIR/data -l $PG_DIR/server.log -w -t 30"
        if [ "$(id -u)" = 0 ]; then
                ctl="runuser -u postgres -- $ctl"
        fi
        export PG_RESTART="$ctl -m fast restart >/dev/null"
        export PG_STOP_SERVER="$ctl -m fast stop >/dev/null"
        export PG_START_SERVER="$ctl start >/dev/null"

        "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "host=127.0.0.1 port=$port dbname=postgres user=postgres" \
                -c "CREATE ROLE agentfab LOGIN" -c "CREATE DATABASE agentfab OWNER agentfab" >/dev/null || return 1
}

pg_stop() {
        if [ -n "${PG_IDLE_PID:-}" ]; then
                kill "$PG_IDLE_PID" 2>/dev/null
                PG_IDLE_PID=
        fi
        [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR" ] || return 0
        if [ -f "$PG_DIR/data/postmaster.pid" ]; then
                pg_as_server "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w -t 30 stop >/dev/null 2>&1
        fi
        rm -rf "$PG_DIR"
        PG_DIR=
}

# psql as the superuser, for setting up roles in a test.
pg_psql() {
        "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$PG_ADMIN_CONNINFO" "$@"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
        set -u
        pg_start || exit 1
        if [ $# -eq 0 ]; then
                echo "$PG_CONNINFO"
                # Until a signal; the traps remove the cluster. A trap waits
                # for a command in the foreground to end, not for wait.
                sleep infinity &
                PG_IDLE_PID=$!
                wait "$PG_IDLE_PID"
        fi
        "$@"
        rc=$?
        pg_stop
        exit $rc
fi
