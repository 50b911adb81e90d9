"""The sessions' note of what their last reconciliation depended on (issue 60): from files alone,
it says "unchanged" until any of silver, the late events, the written tables or the checkpoint's
newest batch moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.config import Lakehouse
from lakehouse.flows.sessions.late import (
    Reconciled,
    record_reconciled,
    unchanged_since_reconciled,
)


def commit(table_path: str, version: int) -> None:
    log = Path(table_path) / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text('{"commitInfo":{}}\n')


@pytest.fixture
def sessions(tmp_path):
    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    target = lakehouse.table("gold.user_sessions")
    for table in (*target.upstream_tables(), *target.written_by_its_task()):
        commit(table.path, 0)
    checkpoint = target.checkpoint(0)
    (Path(checkpoint) / "commits").mkdir(parents=True)
    (Path(checkpoint) / "commits" / "0").write_text("v1\n{}\n")
    return target, checkpoint


def test_no_note_means_reconcile(sessions):
    target, checkpoint = sessions
    assert unchanged_since_reconciled(target, checkpoint) is None


def test_the_note_holds_until_an_input_moves(sessions):
    target, checkpoint = sessions
    record_reconciled(target, checkpoint, Reconciled(late_pending=4))
    unchanged = unchanged_since_reconciled(target, checkpoint)
    assert unchanged is not None and unchanged.late_pending == 4
    assert unchanged.dirty_users is None  # nothing cached, nothing to release

    for moved in (*target.upstream_tables(), *target.written_by_its_task()):
        record_reconciled(target, checkpoint, Reconciled(late_pending=4))
        commit(moved.path, 1 + len(list((Path(moved.path) / "_delta_log").iterdir())))
        assert unchanged_since_reconciled(target, checkpoint) is None, moved.name

    record_reconciled(target, checkpoint, Reconciled(late_pending=4))
    (Path(checkpoint) / "commits" / "1").write_text("v1\n{}\n")  # the query ran a batch
    assert unchanged_since_reconciled(target, checkpoint) is None
