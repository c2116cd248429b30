-- Terminal turns: managed Sessions, Turns with their event logs, the
-- per-terminal dispatch ledger, monitor leases and completion claims.
-- Keys and indexed columns are real columns; the rest is the JSON "data".
CREATE TABLE term_sessions (
  session_id   TEXT PRIMARY KEY,
  agent        TEXT NOT NULL,
  terminal_key TEXT NOT NULL DEFAULT '',
  revision     BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL,
  data         TEXT NOT NULL
);
CREATE INDEX term_sessions_by_terminal ON term_sessions (terminal_key, updated_at DESC);

-- One native thread is bound by one Session (thread lower-cased).
CREATE TABLE term_native_threads (
  agent      TEXT NOT NULL,
  thread_id  TEXT NOT NULL,
  session_id TEXT NOT NULL,
  PRIMARY KEY (agent, thread_id)
);

CREATE TABLE term_turns (
  turn_id    TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  status     TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  version    BIGINT NOT NULL,
  event_count BIGINT NOT NULL DEFAULT 0,
  data       TEXT NOT NULL
);
CREATE INDEX term_turns_by_session ON term_turns (session_id, created_at DESC, turn_id DESC);
CREATE INDEX term_turns_open ON term_turns (status, turn_id);

CREATE TABLE term_turn_events (
  turn_id TEXT NOT NULL,
  seq     BIGINT NOT NULL,
  ts      BIGINT NOT NULL,
  type    TEXT NOT NULL,
  data    TEXT NOT NULL,
  PRIMARY KEY (turn_id, seq)
);

CREATE TABLE term_dispatch (
  terminal_key  TEXT PRIMARY KEY,
  generation_id TEXT NOT NULL,
  data          TEXT NOT NULL
);

CREATE TABLE term_monitor_leases (
  turn_id TEXT PRIMARY KEY,
  owner   TEXT NOT NULL,
  token   BIGINT NOT NULL,
  lease_until BIGINT NOT NULL
);

CREATE TABLE term_completion_claims (
  turn_id     TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  data        TEXT NOT NULL
);
