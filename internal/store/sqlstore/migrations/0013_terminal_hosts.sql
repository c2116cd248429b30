-- Terminal hosts on several machines: each host's last publication of the
-- panes it sees (its heartbeat), and the operations on a pane queued for
-- the pane's own host, claimed by one of its processes.
CREATE TABLE term_hosts (
  host         TEXT PRIMARY KEY,
  owner        TEXT NOT NULL,
  published_at BIGINT NOT NULL,
  panes        TEXT NOT NULL
);
CREATE TABLE term_host_ops (
  op_id         TEXT PRIMARY KEY,
  host          TEXT NOT NULL,
  status        TEXT NOT NULL,
  claimed_by    TEXT NOT NULL DEFAULT '',
  claimed_until BIGINT NOT NULL DEFAULT 0,
  created_at    BIGINT NOT NULL,
  data          TEXT NOT NULL
);
CREATE INDEX term_host_ops_pending ON term_host_ops (host, status, created_at);
