"""The kit's PostgreSQL schema: versioned per component, upgraded once, by one node at a time."""

import psycopg
import pytest

from archive_service import settings
from archive_service.common import postgres
from serve_process import run_command
from support import at_once


@pytest.fixture
def schema(monkeypatch):
    steps = {"demo": ["CREATE TABLE demo (n integer)", "ALTER TABLE demo ADD COLUMN m integer"]}
    monkeypatch.setattr(postgres, "SCHEMA", steps)
    yield steps
    postgres.close_all()


def test_upgrade_applies_each_step_once(database_url, schema):
    assert postgres.upgrade(database_url) == ["demo 1", "demo 2"]
    assert postgres.upgrade(database_url) == []
    schema["demo"].append("CREATE INDEX demo_n ON demo (n)")
    assert postgres.upgrade(database_url) == ["demo 3"]
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT version FROM schema_versions").fetchone() == (3,)


def test_two_nodes_upgrading_at_once_apply_each_step_once(database_url, schema):
    # A pool per process: four threads stand for four nodes once the first has its own.
    results = at_once(lambda: postgres.upgrade(database_url), 4)
    assert sorted(map(tuple, results)) == [(), (), (), ("demo 1", "demo 2")]


def test_a_schema_newer_than_the_kit_is_refused(database_url, schema):
    postgres.upgrade(database_url)
    schema["demo"].pop()
    postgres._upgraded.clear()
    with pytest.raises(postgres.DatabaseError, match="newer than this archive-service knows"):
        postgres.upgrade(database_url)


def test_a_server_that_does_not_answer_is_one_line():
    with pytest.raises(postgres.DatabaseError) as caught:
        postgres.pool("postgresql://nobody@127.0.0.1:1/none")
    assert "cannot connect" in str(caught.value) and "\n" not in str(caught.value)


def test_the_database_setting_takes_no_password():
    assert settings.database_url("") == ""
    assert settings.database_url("postgresql://archive@db/archive")
    for bad in ("postgresql://archive:s3cret@db/archive", "postgresql://db/a?password=x"):
        with pytest.raises(ValueError, match="pgpass"):
            settings.database_url(bad)
    with pytest.raises(ValueError, match="postgresql://"):
        settings.database_url("sqlite:///x")
    assert "s3cret" not in postgres.redacted("postgresql://a:s3cret@db:5433/x")


def test_db_upgrade_command(database_url, schema):
    # The child process has the kit's own schema, not this test's: a fresh database gets it.
    first = run_command(["db", "upgrade", "--database", database_url])
    assert first.returncode == 0 and "applied" in first.stdout, first
    second = run_command(["db", "upgrade", "--database", database_url])
    assert second.returncode == 0 and "up to date" in second.stdout, second
    bad = run_command(["db", "upgrade", "--database", "postgresql://a:pw@127.0.0.1:1/x"])
    assert bad.returncode != 0 and "pgpass" in bad.stderr and ":pw@" not in bad.stderr
