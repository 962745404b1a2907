-- Token scopes and workflow owners (DESIGN.md, "Sandbox and authorization").
--
-- scopes is a comma-separated list; NULL marks a token issued before
-- tokens had scopes, which keeps what it could do (the legacy set).
-- owner is who first published a workflow; '' in older rows, where
-- updated_by stands in.

ALTER TABLE khala_agents ADD COLUMN scopes text;
ALTER TABLE khala_enroll_tokens ADD COLUMN scopes text;
ALTER TABLE khala_people ADD COLUMN scopes text;
ALTER TABLE khala_workflows ADD COLUMN owner text NOT NULL DEFAULT '';
