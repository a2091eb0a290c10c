-- V1: conversations are listed newest first by (created_at, id), by keyset (never
-- OFFSET): everyone's (the operator), those of a caller's inboxes, those of the targets a
-- principal owns; each with its latest message and what is new since a time.
CREATE INDEX conversations_listed ON conversations (created_at, id);
CREATE INDEX conversations_listed_by_target
    ON conversations (target_kind, target_name, created_at, id);
CREATE INDEX inboxes_by_principal ON inboxes (principal);
CREATE INDEX targets_by_owner ON targets (owner);
CREATE INDEX messages_by_time ON messages (conversation_id, created_at);
