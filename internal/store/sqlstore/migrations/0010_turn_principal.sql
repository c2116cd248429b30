-- The principal (the HTTP credential's name) that sent each terminal Turn
-- through MCP, so one personal token cannot read or steer another's Turn.
-- The Turn's JSON "data" carries it too; this column is what WriteTurn
-- compares, so no write can hand a Turn to another caller. '' is a caller
-- with no credential (the CLI, the plugin, stdio) and every Turn created
-- before this migration.
ALTER TABLE term_turns ADD COLUMN principal TEXT NOT NULL DEFAULT '';
