-- F3: inputs a function's schema does not name are refused. Declarations now store the
-- schema as it is enforced (schemas.closed_inputs): a top level that says nothing about
-- other properties gets "unevaluatedProperties": false. Functions declared before get
-- the same, so what ListFunctions shows is what Call checks.
UPDATE functions
SET input_schema = input_schema || '{"unevaluatedProperties": false}'::jsonb
WHERE NOT (input_schema ? 'additionalProperties' OR input_schema ? 'unevaluatedProperties');
