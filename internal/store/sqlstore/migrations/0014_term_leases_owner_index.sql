-- The leases by holder, without the "held" condition: a renewal changes
-- lease_until only, and an index whose columns or condition name
-- lease_until is rewritten at every renewal of every row (SQLite rewrites
-- the entry; PostgreSQL cannot update the row in place). Released rows
-- stay in this index under their last owner; a dead owner's release reads
-- them and writes only the held ones.
DROP INDEX term_leases_held;
CREATE INDEX term_leases_owner ON term_leases (owner, kind, id);
