-- A notice's last failed attempt is kept in typed columns: the status code's name and the
-- ErrorInfo reason beside the message, and whether it gave up in failed_at alone. It was
-- one string ("permanent: NOT_FOUND: ..." or "retry: UNAVAILABLE: ...") whose prefix the
-- outbox's SQL parsed.
ALTER TABLE notices
    ADD COLUMN last_error_code   text,
    ADD COLUMN last_error_reason text;
-- Notices that failed before keep their code, and their message without the prefix.
UPDATE notices
SET last_error_code = substring(last_error FROM '^(?:permanent|retry): ([A-Z_]+): '),
    last_error = regexp_replace(last_error, '^(?:permanent|retry): [A-Z_]+: ', '')
WHERE last_error ~ '^(?:permanent|retry): [A-Z_]+: ';
