-- The principal (the HTTP credential's name) that started each session, so
-- one personal token cannot continue another's thread. Tasks carry theirs
-- in the JSON "data" column. '' is a single-user caller (stdio, the CLI, an
-- open loopback server) and every row written before this migration.
ALTER TABLE sessions ADD COLUMN principal TEXT NOT NULL DEFAULT '';
