-- Fencing, the process registry and the SQLite change log.
--
-- fence is the fencing token of a running task's lease: 1 at creation,
-- raised by every claim. Every write of a follower carries the token it
-- holds and matches only while the token is unchanged, so a process that
-- lost the task (paused past its lease, then woken) can never change it.
-- Existing rows get 1, as if just created.
ALTER TABLE tasks ADD COLUMN fence BIGINT NOT NULL DEFAULT 1;
-- What a process holds (renewal, release, doctor's listing).
CREATE INDEX tasks_owner ON tasks (owner, id) WHERE status = 'running';

-- The processes that share the store and follow work, with what proves one
-- dead to another process on the same host (host + pid + start identity).
CREATE TABLE processes (
  id           TEXT PRIMARY KEY,
  host         TEXT NOT NULL,
  pid          BIGINT NOT NULL,
  start_id     TEXT NOT NULL,
  role         TEXT NOT NULL,
  started_at   BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL
);

-- Task change log for SQLite: each write of a task appends the task's id in
-- its own transaction, and a process waiting on a task that another process
-- follows reads the new rows when the database file changes (PostgreSQL
-- announces changes with NOTIFY instead and never writes here).
CREATE TABLE task_changes (
  seq     INTEGER PRIMARY KEY,
  task_id TEXT NOT NULL
);
