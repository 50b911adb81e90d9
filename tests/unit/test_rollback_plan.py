"""`lakehouse rollback`'s plan on small Delta tables written by delta-rs (no Spark): what is kept, reset, refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from lakehouse import catalog
from lakehouse.config import Table
from lakehouse_tools import rollback

ENTRY = catalog.get("gold.campaign_hourly")


def table_with_batches(path: Path, batches: int) -> list[datetime]:
    """A table whose version v holds batch v of the writer "stream"; the commit times, by version."""
    for batch in range(batches):
        write_deltalake(
            str(path),
            pa.table({"x": [batch]}),
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction("stream", batch)]),
        )
    history = sorted(DeltaTable(str(path)).history(), key=lambda c: c["version"])
    return [datetime.fromtimestamp(c["timestamp"] / 1000, tz=UTC) for c in history]


def paths(path: Path) -> Table:
    return Table(ENTRY, str(path), str(path.parent / "checkpoints"))


def test_a_table_goes_back_to_its_newest_version_before_the_moment_with_its_writers_transaction_ids(
    tmp_path,
):
    times = table_with_batches(tmp_path / "t", 3)
    moment = times[1] + (times[2] - times[1]) / 2
    plan = rollback.plan_table(ENTRY, paths(tmp_path / "t"), moment)
    assert (plan.keep_version, plan.latest_version, plan.txns) == (1, 2, {"stream": 1})


def test_nothing_written_since_is_no_restore_and_a_moment_before_the_table_is_refused(tmp_path):
    times = table_with_batches(tmp_path / "t", 2)
    assert rollback.plan_table(ENTRY, paths(tmp_path / "t"), times[-1].replace(year=2100)) is None
    with pytest.raises(rollback.RollbackRefused, match="did not exist before 2000-01-01 00:00:00Z"):
        rollback.plan_table(ENTRY, paths(tmp_path / "t"), datetime(2000, 1, 1, tzinfo=UTC))


def test_restoring_puts_the_transaction_id_back_so_the_redone_batch_is_written(tmp_path):
    table_with_batches(tmp_path / "t", 3)
    DeltaTable(str(tmp_path / "t")).restore(
        1, commit_properties=CommitProperties(app_transactions=[Transaction("stream", 1)])
    )
    restored = DeltaTable(str(tmp_path / "t"))
    assert restored.transaction_version("stream") == 1 and sorted(
        restored.to_pyarrow_table()["x"].to_pylist()
    ) == [0, 1]


def test_an_earlier_rollbacks_transaction_resets_are_not_batches(tmp_path):
    table_with_batches(tmp_path / "t", 3)
    DeltaTable(str(tmp_path / "t")).restore(
        1, commit_properties=CommitProperties(app_transactions=[Transaction("stream", 1)])
    )
    assert rollback._txns(str(tmp_path / "t"), range(2, 4)) == [
        ("stream", 2, False),
        ("stream", 1, True),
    ]


def reader_at(tmp_path: Path, reservoir_version: int) -> rollback.QueryRollback:
    """A reader of silver whose kept batch 4 ended at ``reservoir_version`` (Delta's offset)."""
    checkpoint = tmp_path / "gen=0"
    (checkpoint / "offsets").mkdir(parents=True)
    offset = {
        "sourceVersion": 1,
        "reservoirId": "x",
        "reservoirVersion": reservoir_version,
        "index": -1,
        "isStartingVersion": False,
    }
    (checkpoint / "offsets" / "4").write_text("v1\n{}\n" + json.dumps(offset))
    return rollback.QueryRollback(
        "gold.user_sessions", str(checkpoint), first_undone_batch=5, kept_batch=4
    )


@pytest.mark.parametrize(
    "third_commit, refused",
    [("append", True), ("replace", False), ("compaction", False)],
)
def test_a_reader_that_had_not_read_rows_its_upstream_kept_is_refused_commits_it_skips_do_not_count(
    tmp_path, third_commit, refused
):
    silver = tmp_path / "silver"
    table_with_batches(silver, 2)  # versions 0 and 1, read by the reader
    if third_commit == "append":  # rows a reader streams
        write_deltalake(str(silver), pa.table({"x": [2]}), mode="append")
    elif third_commit == "replace":  # removes rows: skipped by the reader (skipChangeCommits)
        write_deltalake(str(silver), pa.table({"x": [1]}), mode="overwrite", predicate="x = 1")
    else:  # changes no data
        DeltaTable(str(silver)).optimize.compact()
    upstream = rollback.TableRestore(
        "silver.ad_events", str(silver), keep_version=2, latest_version=4, txns={}
    )
    written = DeltaTable(str(silver)).history(1)[0]["timestamp"]
    at = datetime.fromtimestamp(written / 1000, tz=UTC)
    stamp = at.replace(tzinfo=None).isoformat(timespec="milliseconds")
    rollback._check_caught_up(reader_at(tmp_path / "caught_up", 3), upstream)
    if refused:
        with pytest.raises(rollback.RollbackRefused) as refusal:
            rollback._check_caught_up(reader_at(tmp_path / "behind", 2), upstream)
        assert str(refusal.value) == (
            "gold.user_sessions had not read the rows silver.ad_events got in version 2 "
            f"(written {at:%Y-%m-%d %H:%M:%S}Z) by that moment, and after the rollback it never "
            f"would: roll back to before they were written (--to {stamp}Z), "
            "or to the start of a run that followed a successful one"
        )
    else:
        rollback._check_caught_up(reader_at(tmp_path / "behind", 2), upstream)
