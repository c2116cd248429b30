-- One lease table for terminal work, the shape the tasks' leases have
-- (owner, lease_until, fence): a Turn's monitor, a watch's follower, a
-- callback's delivery attempt and a running thread transition are each one
-- row, keyed by kind and the work's id. A claim raises the fence; every
-- write of the work checks it. It replaces term_monitor_leases and the
-- callbacks' own lease columns, whose rows it carries over.
CREATE TABLE term_leases (
  kind        TEXT NOT NULL,
  id          TEXT NOT NULL,
  owner       TEXT NOT NULL DEFAULT '',
  lease_until BIGINT NOT NULL DEFAULT 0,
  fence       BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, id)
);
-- The held leases by holder: renewal, a dead owner's release, doctor.
CREATE INDEX term_leases_held ON term_leases (owner, kind, id) WHERE lease_until > 0;
INSERT INTO term_leases (kind, id, owner, lease_until, fence)
  SELECT CASE WHEN turn_id LIKE 'watch-%' THEN 'watch' ELSE 'monitor' END, turn_id, owner, lease_until, token
  FROM term_monitor_leases;
INSERT INTO term_leases (kind, id, owner, lease_until, fence)
  SELECT 'callback', message_id, lease_owner, lease_until, lease_token FROM term_callbacks WHERE lease_token > 0;
DROP TABLE term_monitor_leases;
DROP INDEX term_callbacks_lease_owner;
ALTER TABLE term_callbacks DROP COLUMN lease_owner;
ALTER TABLE term_callbacks DROP COLUMN lease_token;
ALTER TABLE term_callbacks DROP COLUMN lease_until;
