-- When each agent was last seen (GET /v1/agents): written by each replica
-- about once a minute for the agents it saw, never per request. 0: not yet.

ALTER TABLE khala_agents ADD COLUMN last_seen bigint NOT NULL DEFAULT 0;
