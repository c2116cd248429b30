-- A version on each terminal's dispatch ledger entry, bumped by every
-- write of it: a watch's follower reads the entry at each re-check only
-- when its version moved, as it does the watch and its Session, instead of
-- reading and decoding every watched terminal's entry every time.
ALTER TABLE term_dispatch ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
