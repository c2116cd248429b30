-- Callback outbox of terminal turns: one row per canonical message to an
-- OpenClaw session, with its delivery state and attempt lease.
CREATE TABLE term_callbacks (
  message_id      TEXT PRIMARY KEY,
  turn_id         TEXT NOT NULL,
  status          TEXT NOT NULL,
  next_attempt_at BIGINT NOT NULL DEFAULT 0,
  lease_owner     TEXT NOT NULL DEFAULT '',
  lease_token     BIGINT NOT NULL DEFAULT 0,
  lease_until     BIGINT NOT NULL DEFAULT 0,
  created_at      BIGINT NOT NULL,
  data            TEXT NOT NULL
);
CREATE INDEX term_callbacks_by_turn ON term_callbacks (turn_id, created_at DESC);
CREATE INDEX term_callbacks_due ON term_callbacks (status, next_attempt_at);
