-- A turn's repository, so a claim leaves a thread to the machines that
-- fetch its repository (DESIGN.md, "Sandbox and authorization"): repo is
-- the thread's workspace repository ('' without one), repo_declared
-- whether the thread's workflow declares that very repository. Turns
-- queued before this migration have repo '': they pass every filter,
-- and the serving daemon still refuses what it does not fetch.

ALTER TABLE khala_turns ADD COLUMN repo text NOT NULL DEFAULT '';
ALTER TABLE khala_turns ADD COLUMN repo_declared boolean NOT NULL DEFAULT false;
