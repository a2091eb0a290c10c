-- Runtime credentials (T2) live beside API tokens: a row with `targets` is a runtime's
-- credential, bound to its principal (an agent or a workflow) and to the targets it
-- serves; it is only exchanged for short-lived scoped identities (POST /api/v1/identity).
-- Either kind may expire (T4).
ALTER TABLE api_tokens ADD COLUMN targets text[];
ALTER TABLE api_tokens ADD COLUMN expires_at timestamptz;
