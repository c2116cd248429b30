-- Native thread transitions of terminal panes (new, clear, resume, adopt):
-- one row per transition, fixed fields and status in the JSON "data".
CREATE TABLE term_transitions (
  transition_id TEXT PRIMARY KEY,
  terminal_key  TEXT NOT NULL,
  status        TEXT NOT NULL,
  prepared_at   BIGINT NOT NULL,
  version       BIGINT NOT NULL,
  data          TEXT NOT NULL
);
CREATE INDEX term_transitions_by_terminal ON term_transitions (terminal_key, prepared_at DESC);
CREATE INDEX term_transitions_open ON term_transitions (status, transition_id);
