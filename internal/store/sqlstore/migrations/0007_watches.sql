-- Terminal watches: a human-started task followed by a monitor host. The
-- monitor lease lives in term_monitor_leases keyed by watch_id; the
-- notifications in term_callbacks (turn_id = watch_id).
CREATE TABLE term_watches (
  watch_id     TEXT PRIMARY KEY,
  terminal_key TEXT NOT NULL,
  status       TEXT NOT NULL,
  revision     BIGINT NOT NULL,
  created_at   BIGINT NOT NULL,
  data         TEXT NOT NULL
);
-- One active watch per terminal.
CREATE UNIQUE INDEX term_watches_one_active ON term_watches (terminal_key) WHERE status = 'active';
CREATE INDEX term_watches_by_status ON term_watches (status, created_at);
CREATE INDEX term_watches_by_terminal ON term_watches (terminal_key, created_at DESC);
