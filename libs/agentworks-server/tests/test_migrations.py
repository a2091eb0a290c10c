"""Per-service migrations (P1): versioned SQL, applied once, safe across replicas."""

from __future__ import annotations

import concurrent.futures

import psycopg
import pytest

from agentworks.server.db import Migration, load_migrations, migrate, with_database


@pytest.fixture
def empty_database(pg_server_url):
    import uuid

    name = f"aw_empty_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield with_database(pg_server_url, name)
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_replicas_migrating_at_once_apply_each_version_once_P1_P3(empty_database):
    """P1 P3: four replicas starting together migrate the schema exactly once."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda _: migrate(empty_database, "messaging", "agentworks_messaging.migrations"),
                range(4),
            )
        )
    applied = [versions for versions in results if versions]
    shipped = sorted(m.version for m in load_migrations("agentworks_messaging.migrations"))
    assert len(shipped) >= 2 and applied == [shipped]  # one replica applied them all
    assert migrate(empty_database, "messaging", "agentworks_messaging.migrations") == []


def test_a_changed_migration_is_refused_P1(empty_database, monkeypatch):
    """P1: editing an applied migration is caught, not silently skipped."""
    migrate(empty_database, "messaging", "agentworks_messaging.migrations")
    import agentworks.server.db as db

    original = db.load_migrations

    def edited(package):
        return [Migration(m.version, m.name, m.sql + "\n-- edited") for m in original(package)]

    monkeypatch.setattr(db, "load_migrations", edited)
    with pytest.raises(RuntimeError, match="was changed after it was applied"):
        migrate(empty_database, "messaging", "agentworks_messaging.migrations")
