-- Priorities (DESIGN.md, The Khala HTTP API): claims take higher priority
-- first, then oldest first. A turn carries its thread's priority; the
-- queue's index leads with it, so a claim still walks one index in order
-- and stops at the first turns it can lock: no sort of the queue.

ALTER TABLE khala_turns ADD COLUMN priority integer NOT NULL DEFAULT 0;

DROP INDEX khala_turns_queue;
CREATE INDEX khala_turns_queue ON khala_turns (priority DESC, first_queued, thread, step) WHERE state = 'queued';
