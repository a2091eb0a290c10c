-- Internal conversations (L5): a conversation an agent started in a turn of another
-- conversation is tied to that conversation (its origin) and the origin's target; the
-- other side's replies are queued there as `conversation_reply` deliveries.

ALTER TABLE conversations
    ADD COLUMN origin_conversation_id uuid REFERENCES conversations (id),
    ADD COLUMN origin_target_kind     text,
    ADD COLUMN origin_target_name     text,
    ADD FOREIGN KEY (origin_target_kind, origin_target_name) REFERENCES targets (kind, name),
    ADD CHECK ((origin_conversation_id IS NULL) = (origin_target_kind IS NULL)
               AND (origin_target_kind IS NULL) = (origin_target_name IS NULL));

ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_check
    CHECK (kind IN ('message', 'wake_up', 'schedule', 'webhook', 'function_completed',
                    'conversation_reply'));
