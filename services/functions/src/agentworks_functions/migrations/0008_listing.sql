-- V1: calls are listed newest first by (created_at, id), by keyset (never OFFSET):
-- everyone's (the operator), a caller's own, or a target's (its owner).
CREATE INDEX calls_listed ON calls (created_at, id);
CREATE INDEX calls_listed_by_caller ON calls (caller, created_at, id);
CREATE INDEX calls_listed_by_target ON calls (target_kind, target_name, created_at, id);
-- Targets are listed by their primary key (kind, name); an owner's by owner.
CREATE INDEX targets_by_owner ON targets (owner, kind, name);
