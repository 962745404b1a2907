-- The usage rollup (DESIGN.md, Usage, budgets and back-off): the totals of
-- every answer with usage, by UTC day, workflow, role, agent, adapter and
-- model, added to in the statement that records each answer, so GET
-- /v1/usage reads a few rows instead of every message. Each key is spread
-- over shards (by thread) so concurrent answers of one workflow do not
-- queue on one row's lock; a query sums them.

CREATE TABLE khala_usage (
    day               date NOT NULL,
    workflow          text NOT NULL,
    role              text NOT NULL,
    agent             text NOT NULL,
    adapter           text NOT NULL,
    model             text NOT NULL,
    shard             smallint NOT NULL,
    messages          bigint NOT NULL,
    input_tokens      bigint NOT NULL,
    output_tokens     bigint NOT NULL,
    cache_read_tokens bigint NOT NULL,
    cost_usd          double precision NOT NULL,  -- the sum of the costs known
    unpriced          bigint NOT NULL,            -- messages whose cost is unknown
    duration_ms       bigint NOT NULL,
    PRIMARY KEY (day, workflow, role, agent, adapter, model, shard)
);
CREATE INDEX khala_usage_workflow ON khala_usage (workflow, day);

-- The answers recorded before the rollup existed.
INSERT INTO khala_usage
SELECT day, workflow, role, agent, adapter, model, 0, count(*), sum(input), sum(output), sum(cache_read),
       coalesce(sum(cost), 0), count(*) FILTER (WHERE cost IS NULL), sum(duration)
FROM (
    SELECT ((m.r->>'at')::timestamptz AT TIME ZONE 'UTC')::date AS day,
           t.workflow, coalesce(m.r->>'role', '') AS role, coalesce(m.r->>'agent', '') AS agent,
           coalesce(m.r->>'adapter', '') AS adapter, coalesce(m.r->'usage'->>'model', '') AS model,
           coalesce((m.r->'usage'->>'input_tokens')::bigint, 0) AS input,
           coalesce((m.r->'usage'->>'output_tokens')::bigint, 0) AS output,
           coalesce((m.r->'usage'->>'cache_read_tokens')::bigint, (m.r->'usage'->>'cached_tokens')::bigint, 0) AS cache_read,
           (m.r->'usage'->>'cost_usd')::double precision AS cost,
           coalesce((m.r->'usage'->>'duration_ms')::bigint, 0) AS duration
    FROM (SELECT thread, convert_from(record, 'UTF8')::jsonb AS r FROM khala_messages) m
    JOIN khala_threads t ON t.n = m.thread
    WHERE jsonb_typeof(m.r->'usage') = 'object'
) old
GROUP BY day, workflow, role, agent, adapter, model;
