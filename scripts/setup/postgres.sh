# Sourced by scripts/test.sh: starts a throwaway PostgreSQL cluster on
# 127.0.0.1 (data under the cache dir, owned by the postgres user) and exports
# TEST_DATABASE_URL for the store's conformance suite.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
pg_port=${CLAWCONNECT_PG_PORT:-54329}
pg_data=${CLAWCONNECT_PG_DATA:-/var/tmp/clawconnect-pg-$pg_port}
as_pg() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
if [ ! -s "$pg_data/PG_VERSION" ]; then
  mkdir -p "$pg_data"; [ "$(id -u)" -ne 0 ] || chown postgres "$pg_data"
  as_pg "'$pg_bin/initdb' -D '$pg_data' -A trust -U postgres" >/dev/null
fi
if ! as_pg "'$pg_bin/pg_ctl' -D '$pg_data' status" >/dev/null 2>&1; then
  as_pg "'$pg_bin/pg_ctl' -D '$pg_data' -l '$pg_data/server.log' -w -o \"-h 127.0.0.1 -p $pg_port -k /tmp\" start" >/dev/null
fi
as_pg "'$pg_bin/psql' -h 127.0.0.1 -p $pg_port -U postgres -tAc \"SELECT 1 FROM pg_database WHERE datname='clawconnect_test'\"" | grep -q 1 \
  || as_pg "'$pg_bin/createdb' -h 127.0.0.1 -p $pg_port -U postgres clawconnect_test"
export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/clawconnect_test?sslmode=disable"
echo "== postgres ready at 127.0.0.1:$pg_port"
