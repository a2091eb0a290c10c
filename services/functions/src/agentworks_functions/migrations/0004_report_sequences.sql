-- Report retries are recognised by their exact sequence (ReportRequest.sequence: "a
-- report with a sequence already stored is a retry"), no longer by "at or below the
-- highest stored": reports a runtime sends concurrently can commit out of order, and the
-- high-water mark dropped the earlier ones without a word.
CREATE TABLE execution_reports (
    call_id  uuid NOT NULL REFERENCES calls (id),
    sequence bigint NOT NULL,
    PRIMARY KEY (call_id, sequence)
);
-- Open calls keep recognising the retries of the reports they stored before.
INSERT INTO execution_reports (call_id, sequence)
SELECT c.id, s.n
FROM calls c CROSS JOIN LATERAL generate_series(1, c.last_report_seq) AS s (n)
WHERE c.status IN ('running', 'waiting_for_input') AND c.last_report_seq > 0;
