-- A credential lists its own sessions, most recent first: one index range
-- per (agent, principal), so the page stays a keyed read however many
-- sessions other principals have.
CREATE INDEX sessions_principal_recent ON sessions (agent, principal, updated_at DESC, session_key DESC);
