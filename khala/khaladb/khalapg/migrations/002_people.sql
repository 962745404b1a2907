-- People and child workflows as turns (DESIGN.md).
--
-- People answer human turns with their own tokens, stored hashed like an
-- agent's. A human turn waits in state 'waiting' and a turn that runs a
-- child thread in state 'child' (its thread in child, its next check in
-- lease_expires): the claim takes only 'queued' turns, so no claim ever
-- returns either.

CREATE TABLE khala_people (
    name     text PRIMARY KEY,
    token    bytea NOT NULL UNIQUE,      -- SHA-256 of the person's token
    added_at bigint NOT NULL
);

ALTER TABLE khala_turns DROP CONSTRAINT khala_turns_state_check;
ALTER TABLE khala_turns ADD CONSTRAINT khala_turns_state_check
    CHECK (state IN ('queued', 'claimed', 'answered', 'cancelled', 'waiting', 'child'));
ALTER TABLE khala_turns ADD COLUMN child text NOT NULL DEFAULT '';

-- A waiting human turn goes idle like a queued one.
DROP INDEX khala_turns_idle;
CREATE INDEX khala_turns_idle ON khala_turns (idle_at) WHERE state IN ('queued', 'waiting') AND idle_at > 0;
-- The inbox, oldest first; the child turns the sweeper checks on.
CREATE INDEX khala_turns_waiting ON khala_turns (first_queued, thread, step) WHERE state = 'waiting';
CREATE INDEX khala_turns_children ON khala_turns (lease_expires) WHERE state = 'child';
