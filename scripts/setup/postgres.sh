# Sourced by scripts/test.sh: starts a throwaway PostgreSQL cluster on
# 127.0.0.1 and exports TEST_DATABASE_URL for the store's conformance suite.
# Its data lives under the cache dir ($CLAWCONNECT_CACHE/postgres-PORT); as
# root, when the postgres user cannot reach the cache (a HOME of mode 700),
# under /var/tmp/clawconnect-pg-PORT instead. stop_postgres (test.sh runs it
# on exit) stops the cluster if this script started it; a cluster already
# answering on the port is used and left running. CLAWCONNECT_PG_KEEP=1
# keeps it running after the tests; CLAWCONNECT_PG_PORT and
# CLAWCONNECT_PG_DATA override the port and the data directory.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
pg_port=${CLAWCONNECT_PG_PORT:-54329}
pg_started=""
as_pg() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
stop_postgres() {
  if [ -n "$pg_started" ] && [ "${CLAWCONNECT_PG_KEEP:-}" != 1 ]; then
    as_pg "'$pg_bin/pg_ctl' -D '$pg_data' -m fast -w stop" >/dev/null 2>&1 \
      && echo "== postgres on 127.0.0.1:$pg_port stopped (data kept in $pg_data)"
    pg_started=""
  fi
}
pg_data=${CLAWCONNECT_PG_DATA:-$CLAWCONNECT_CACHE/postgres-$pg_port}
if "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port"; then
  echo "== postgres already running on 127.0.0.1:$pg_port; using it (left running)"
else
  if [ -z "${CLAWCONNECT_PG_DATA:-}" ] && [ "$(id -u)" -eq 0 ]; then
    mkdir -p "$pg_data" && chown postgres "$pg_data"
    if ! as_pg "test -w '$pg_data'" 2>/dev/null; then
      rmdir "$pg_data" 2>/dev/null || true
      pg_data=/var/tmp/clawconnect-pg-$pg_port
      echo "== the postgres user cannot reach $CLAWCONNECT_CACHE; PostgreSQL data goes to $pg_data"
    fi
  fi
  if [ ! -s "$pg_data/PG_VERSION" ]; then
    mkdir -p "$pg_data"; [ "$(id -u)" -ne 0 ] || chown postgres "$pg_data"
    as_pg "'$pg_bin/initdb' -D '$pg_data' -A trust -U postgres" >/dev/null
  fi
  as_pg "'$pg_bin/pg_ctl' -D '$pg_data' -l '$pg_data/server.log' -w -o \"-h 127.0.0.1 -p $pg_port -k /tmp\" start" >/dev/null
  pg_started=1
  echo "== postgres started on 127.0.0.1:$pg_port (data in $pg_data; stopped when the tests end)"
fi
[ "$(as_pg "'$pg_bin/psql' -h 127.0.0.1 -p $pg_port -U postgres -tAc \"SELECT 1 FROM pg_database WHERE datname='clawconnect_test'\"")" = 1 ] \
  || as_pg "'$pg_bin/createdb' -h 127.0.0.1 -p $pg_port -U postgres clawconnect_test"
export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/clawconnect_test?sslmode=disable"
