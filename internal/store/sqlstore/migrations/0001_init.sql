-- Tasks in every state. Keys and the columns that are indexed or counted
-- atomically are real columns; everything else is the JSON "data" column.
CREATE TABLE tasks (
  id           TEXT PRIMARY KEY,
  agent        TEXT NOT NULL,
  session_key  TEXT NOT NULL,
  status       TEXT NOT NULL,
  started_at   BIGINT NOT NULL,
  ended_at     BIGINT NOT NULL DEFAULT 0,
  owner        TEXT NOT NULL DEFAULT '',
  lease_until  BIGINT NOT NULL DEFAULT 0,
  version      BIGINT NOT NULL,
  log_count    BIGINT NOT NULL DEFAULT 0,
  poll_count   BIGINT NOT NULL DEFAULT 0,
  last_poll_at BIGINT NOT NULL DEFAULT 0,
  data         TEXT NOT NULL
);
CREATE INDEX tasks_by_session ON tasks (agent, session_key, started_at DESC, id DESC);
CREATE INDEX tasks_running ON tasks (agent, lease_until, id) WHERE status = 'running';
CREATE INDEX tasks_ended ON tasks (ended_at) WHERE status <> 'running';

CREATE TABLE task_logs (
  task_id  TEXT NOT NULL,
  seq      BIGINT NOT NULL,
  ts       BIGINT NOT NULL,
  type     TEXT NOT NULL,
  text     TEXT NOT NULL,
  is_error INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (task_id, seq)
);

CREATE TABLE sessions (
  agent       TEXT NOT NULL,
  session_key TEXT NOT NULL,
  last_job_id TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL,
  PRIMARY KEY (agent, session_key)
);
CREATE INDEX sessions_recent ON sessions (agent, updated_at DESC, session_key DESC);

CREATE TABLE attachment_sessions (
  agent       TEXT NOT NULL,
  session_key TEXT NOT NULL,
  current_id  TEXT NOT NULL DEFAULT '',
  version     BIGINT NOT NULL,
  PRIMARY KEY (agent, session_key)
);

CREATE TABLE attachments (
  agent             TEXT NOT NULL,
  session_key       TEXT NOT NULL,
  id                TEXT NOT NULL,
  seq               BIGINT NOT NULL,
  observation_token BIGINT NOT NULL DEFAULT 0,
  data              TEXT NOT NULL,
  PRIMARY KEY (agent, session_key, id)
);
CREATE INDEX attachments_token ON attachments (observation_token);
