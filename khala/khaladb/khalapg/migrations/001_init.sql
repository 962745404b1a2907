-- Khala's first schema. Applied by the server at start (see pg_migrate.go),
-- inside one transaction, under an advisory lock.
--
-- Times are Unix nanoseconds (0: none), as Go keeps them, so every value
-- reads back exactly as the bbolt backend gives it; to_timestamp(x / 1e9)
-- shows one. Records nobody queries by field (a thread, a message, a
-- webhook's payload) are JSON in bytea: the database stores them and
-- hands them back, and never spends a parse on them.
--
-- Rows updated in place (threads, turns, counters) leave room in their
-- pages (fillfactor), so an update that changes no indexed column stays
-- on its page and touches no index (a HOT update).
--
-- There are no foreign keys on purpose: their checks take KEY SHARE locks
-- on the parent rows, which the claim and thread-update paths must not
-- wait for (see pg_queue.go on the lock order).

CREATE TABLE khala_enroll_tokens (
    hash       bytea PRIMARY KEY,        -- SHA-256 of the token
    uses       integer NOT NULL,
    expires_at bigint NOT NULL,
    created_at bigint NOT NULL
);

CREATE TABLE khala_agents (
    name        text PRIMARY KEY,
    token       bytea NOT NULL UNIQUE,   -- SHA-256 of the agent's token
    enrolled_at bigint NOT NULL
);

CREATE TABLE khala_sources (
    hash   text PRIMARY KEY,             -- SHA-256 of the source, hex
    source bytea NOT NULL
);

CREATE TABLE khala_workflows (
    name        text PRIMARY KEY,
    source_hash text NOT NULL,
    updated_at  bigint NOT NULL,
    updated_by  text NOT NULL
);

-- thread-N takes N from here: shared by every replica, never reused.
CREATE SEQUENCE khala_thread_ids;

CREATE TABLE khala_threads (
    n        bigint PRIMARY KEY,
    workflow text NOT NULL,
    status   text NOT NULL,
    version  bigint NOT NULL,            -- grows with every change
    pending  integer[] NOT NULL,         -- steps of its open turns (also in record)
    record   bytea NOT NULL              -- the thread, JSON
) WITH (fillfactor = 80);
CREATE INDEX khala_threads_running ON khala_threads (n) WHERE status = 'running';
CREATE INDEX khala_threads_workflow ON khala_threads (workflow, n);

-- A thread's last event number, apart from the thread row: a claim
-- appends an event without waiting for a moderator that holds the thread.
CREATE TABLE khala_event_seqs (
    thread   bigint PRIMARY KEY,
    last_seq bigint NOT NULL
) WITH (fillfactor = 50);

CREATE TABLE khala_turns (
    thread        bigint NOT NULL,
    step          integer NOT NULL,
    workflow      text NOT NULL,
    role          text NOT NULL,
    state         text NOT NULL CHECK (state IN ('queued', 'claimed', 'answered', 'cancelled')),
    rev           bigint NOT NULL,       -- grows with every write of the turn
    attempt       integer NOT NULL,
    max_attempts  integer NOT NULL,
    lease         bigint NOT NULL,       -- nanoseconds
    idle          bigint NOT NULL,       -- nanoseconds; 0: never idle
    claim         text NOT NULL,
    agent         text NOT NULL,
    first_queued  bigint NOT NULL,
    queued_at     bigint NOT NULL,
    claimed_at    bigint NOT NULL,
    lease_expires bigint NOT NULL,
    idle_at       bigint NOT NULL,
    instruction   text NOT NULL,
    prompt        text NOT NULL,         -- '' once the turn is closed
    PRIMARY KEY (thread, step)
) WITH (fillfactor = 80);
-- The queue, oldest first; the leases and idle deadlines the sweeper reads.
CREATE INDEX khala_turns_queue ON khala_turns (first_queued, thread, step) WHERE state = 'queued';
CREATE INDEX khala_turns_leases ON khala_turns (lease_expires) WHERE state = 'claimed';
CREATE INDEX khala_turns_idle ON khala_turns (idle_at) WHERE state = 'queued' AND idle_at > 0;

CREATE TABLE khala_messages (
    thread bigint NOT NULL,
    step   integer NOT NULL,
    record bytea NOT NULL,               -- the message, JSON
    PRIMARY KEY (thread, step)
);

CREATE TABLE khala_events (
    thread  bigint NOT NULL,
    seq     bigint NOT NULL,
    at      bigint NOT NULL,
    type    text NOT NULL,
    step    integer NOT NULL,
    role    text NOT NULL,
    agent   text NOT NULL,
    adapter text NOT NULL,
    message text NOT NULL,
    status  text NOT NULL,
    turn    text NOT NULL,
    claim   text NOT NULL,
    attempt integer NOT NULL,
    PRIMARY KEY (thread, seq)
);

-- The webhook outbox; id is the X-Khala-Delivery header.
CREATE TABLE khala_webhooks (
    id         bigserial PRIMARY KEY,
    url        text NOT NULL,
    payload    bytea NOT NULL,           -- JSON
    attempts   integer NOT NULL,
    next_at    bigint NOT NULL,
    last_error text NOT NULL,
    created    bigint NOT NULL
);
CREATE INDEX khala_webhooks_due ON khala_webhooks (next_at, id);

-- khala_stale aborts the transaction it runs in. A conditional write
-- whose row moved since it was read calls it, so a change and its COMMIT
-- go to the server in one round trip and still never commit half-checked.
CREATE FUNCTION khala_stale() RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'khala: a row changed since it was read' USING ERRCODE = 'KH001';
END
$$;
