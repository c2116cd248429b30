-- The callback outbox's attempt leases by holder: a process proven dead has
-- its delivery attempts freed at once (ReleaseLeases with no ids) instead of
-- when their 2-minute lease runs out.
CREATE INDEX term_callbacks_lease_owner ON term_callbacks (lease_owner) WHERE lease_until > 0;
