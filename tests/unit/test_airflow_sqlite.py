"""The embedded Airflow DB's connect args: a transaction that reads, then writes, beside another writer."""

from __future__ import annotations

import sqlite3

import pytest

from lakehouse_tools.airflow_sqlite import CONNECT_ARGS


def read_then_insert_beside_a_commit(path, **connect_args) -> None:
    """As ``airflow backfill create`` does: a savepoint, a read, another process commits, an insert."""
    ours = sqlite3.connect(path, **connect_args)
    theirs = sqlite3.connect(path, timeout=0.2, isolation_level=None)  # each statement commits
    ours.execute("SAVEPOINT creating_a_run")
    ours.execute("SELECT count(*) FROM dag_run").fetchall()
    try:
        theirs.execute("INSERT INTO dag_run VALUES ('scheduled')")
    except sqlite3.OperationalError:  # ours holds the write lock: the other writer waits for it
        pass
    ours.execute("INSERT INTO dag_run VALUES ('backfill')")
    ours.execute("RELEASE SAVEPOINT creating_a_run")
    ours.commit()


@pytest.fixture
def metadata_db(tmp_path):
    path = tmp_path / "airflow.db"
    with sqlite3.connect(path) as setup:
        setup.execute("PRAGMA journal_mode=WAL")  # as Airflow's
        setup.execute("CREATE TABLE dag_run (run_type TEXT)")
    return path


def test_a_savepoint_begins_a_transaction_that_holds_the_write_lock(metadata_db):
    read_then_insert_beside_a_commit(metadata_db, **CONNECT_ARGS)
    with sqlite3.connect(metadata_db) as check:
        assert check.execute("SELECT run_type FROM dag_run").fetchall() == [("backfill",)]


def test_without_it_the_read_snapshot_is_stale_and_the_insert_fails_at_once(metadata_db):
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        read_then_insert_beside_a_commit(metadata_db, timeout=120)
