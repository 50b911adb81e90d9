"""`lakehouse rollback`: the tables a run wrote go back, the checkpoints with them; the rerun redoes it exactly once."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable
from helpers import (
    ROLLED_BACK,
    START,
    assert_tables_match_oracle,
    committed_batches,
    rollback_plan,
    rolled_back_versions,
    run_job,
    run_pipeline,
    table,
)

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse_tools import cli
from lakehouse_tools.generator import write_campaigns, write_hours

# Columns that say when a row was processed, not what it holds: a redone run writes new values.
PROCESSING_TIME = {"recorded_at", "reconciled_at", "reconciled_by", "resolved_at"}
# The run after the batch run and the backfill, as Airflow names the hourly run of hour 02:00.
RUN_ID = "scheduled__2026-11-20T02:00:00+00:00"


def snapshot(spark, lakehouse) -> dict[str, Counter]:
    tables = {}
    for name in ROLLED_BACK:
        columns = [c for c in catalog.get(name).column_names if c not in PROCESSING_TIME]
        rows = table(spark, lakehouse, name).select(*columns).collect()
        tables[name] = Counter(
            tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in row)
            for row in rows
        )
    return tables


def rollback(lakehouse, *args: str) -> int:
    return cli.main(["rollback", "--lakehouse-root", lakehouse.root, *args])


def as_run(monkeypatch, run_id: str, job, *args) -> None:
    """``job(*args)`` as a task of Airflow run ``run_id`` (the id ops.query_progress and ops.expectation_results keep)."""
    with monkeypatch.context() as airflow_task:
        airflow_task.setenv("AIRFLOW_CTX_DAG_RUN_ID", run_id)
        job(*args)
    time.sleep(1.5)  # commit times are in milliseconds, checkpoint file times in (at least) seconds


def batch_run(lakehouse, start: str, end: str) -> None:
    for job in (t.task for t in catalog.tasks() if t.batch):
        run_job(job, lakehouse, "--mode", "batch", "--start", start, "--end", end)


def dry_run(lakehouse, capsys, to: str) -> tuple[str, list[str]]:
    """The plan's first line, and its steps without the writers' transaction ids."""
    assert rollback(lakehouse, "--to", to, "--dry-run") == 0, capsys.readouterr().err
    first, *steps = capsys.readouterr().out.splitlines()
    return first, [step.split("; writers' transaction ids")[0] for step in steps]


@dataclass
class History:
    """A lakehouse after a demo, a batch run, a backfill and the next incremental run."""

    lakehouse: Lakehouse
    moment: datetime  # between the backfill and the next run
    first_batch_write: datetime  # the batch run's first commit (silver's replace)
    demo_versions: dict[str, int]
    demo_batches: dict[str, int]
    before_the_next_run: dict[str, int]
    now: dict[str, int]
    after_the_backfill: dict[str, Counter]
    after_the_next_run: dict[str, Counter]


def demo_batch_backfill_next(spark, lakehouse, monkeypatch) -> History:
    write_campaigns(lakehouse, seed=32)
    write_hours(lakehouse, START, 2, events_per_second=0.05, seed=32)
    as_run(monkeypatch, "manual__demo", run_pipeline, lakehouse)
    demo_versions, demo_batches = rolled_back_versions(lakehouse), committed_batches(lakehouse)
    batch, backfill = (
        ("2026-11-20T00:00Z", "2026-11-20T02:00Z"),
        ("2026-11-20T01:00Z", "2026-11-20T02:00Z"),
    )
    as_run(monkeypatch, "manual__batch", batch_run, lakehouse, *batch)
    as_run(monkeypatch, "backfill__one_hour", batch_run, lakehouse, *backfill)
    after_the_backfill, before_the_next_run = (
        snapshot(spark, lakehouse),
        rolled_back_versions(lakehouse),
    )
    moment = datetime.now(UTC)
    time.sleep(1.5)
    write_hours(lakehouse, START + timedelta(hours=2), 1, events_per_second=0.05, seed=32)
    as_run(monkeypatch, RUN_ID, run_pipeline, lakehouse)
    # The batch run's first write: silver's first commit after the demo (its replace of the hours).
    silver = DeltaTable(lakehouse.table("silver.ad_events").path)
    first_write = next(
        c for c in silver.history() if c["version"] == demo_versions["silver.ad_events"] + 1
    )
    return History(
        lakehouse=lakehouse,
        moment=moment,
        first_batch_write=datetime.fromtimestamp(first_write["timestamp"] / 1000, UTC),
        demo_versions=demo_versions,
        demo_batches=demo_batches,
        before_the_next_run=before_the_next_run,
        now=rolled_back_versions(lakehouse),
        after_the_backfill=after_the_backfill,
        after_the_next_run=snapshot(spark, lakehouse),
    )


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory) -> History:
    """The history of the tests below, which run in file order: the dry runs change nothing, then
    the last test rolls back the history's last run and reruns it (a run more of its own cost CI
    most of a minute, a history of its own a minute more)."""
    lakehouse = Lakehouse(root=str(tmp_path_factory.mktemp("rollback") / "lakehouse"))
    with pytest.MonkeyPatch.context() as monkeypatch:
        return demo_batch_backfill_next(spark, lakehouse, monkeypatch)


def test_a_batch_run_a_time_and_an_incremental_run_after_a_batch_run_and_a_backfill_each_plan(
    spark, history, capsys
):
    """The operator's three ways to name a moment, after a demo, a batch run and a backfill."""
    h, lakehouse = history, history.lakehouse

    # By the batch run's id: back to what the demo left; the next run's batches forgotten.
    first, steps = dry_run(lakehouse, capsys, "manual__batch")
    assert first == (
        f"Rolling back to before {h.first_batch_write:%Y-%m-%d %H:%M:%S}Z "
        "(the first write of batch run manual__batch), dry run"
    )
    assert steps == rollback_plan(h.demo_versions, h.demo_batches, lakehouse, now=h.now)
    # By a time, and by the next (incremental) run's id: the batch run and the backfill are kept;
    # the readers of silver had not read their replaces, which they skip anyway.
    first, by_time = dry_run(lakehouse, capsys, h.moment.isoformat())
    assert (
        first == f"Rolling back to before {h.moment:%Y-%m-%d %H:%M:%S}Z (the time given), dry run"
    )
    assert by_time == rollback_plan(h.before_the_next_run, h.demo_batches, lakehouse, now=h.now)
    first, by_run = dry_run(lakehouse, capsys, RUN_ID)
    assert first.endswith(f"Z (the start of run {RUN_ID}'s first streaming batch), dry run")
    assert by_run == by_time
    assert snapshot(spark, lakehouse) == h.after_the_next_run, "a dry run changes nothing"


def test_rolling_back_the_last_run_then_rerunning_it_gives_the_same_tables(spark, history, capsys):
    # The history's last run, an hourly one after the batch run and the backfill (the dry runs above
    # planned its rollback and changed nothing), rolled back by its id and run again.
    lakehouse = history.lakehouse
    assert history.after_the_next_run != history.after_the_backfill
    bronze = table(spark, lakehouse, "bronze.ad_events").count()

    assert (
        rollback(lakehouse, "--to", RUN_ID) == 0
    )  # the run's first query started after the moment
    done = capsys.readouterr().out
    assert (
        "done: gold.user_sessions: checkpoint back to batch" in done
        and "reads silver.ad_events on from version" in done
    ), done
    assert snapshot(spark, lakehouse) == history.after_the_backfill
    assert table(spark, lakehouse, "bronze.ad_events").count() == bronze, (
        "bronze, the raw log, is not rolled back"
    )

    run_pipeline(lakehouse)
    assert snapshot(spark, lakehouse) == history.after_the_next_run
    assert_tables_match_oracle(spark, lakehouse)

    # Before the tables existed there is nothing to go back to; an unknown run id is not a moment.
    assert rollback(lakehouse, "--to", "2026-01-01T00:00Z") == 2
    assert "did not exist before 2026-01-01 00:00:00Z" in capsys.readouterr().err
    assert rollback(lakehouse, "--to", "manual__nope") == 2
    assert capsys.readouterr().err == (
        "lakehouse: No streaming batch (ops.query_progress) nor check (ops.expectation_results) of "
        "run 'manual__nope' is recorded: copy the run id from Airflow (a run that wrote nothing has "
        "nothing to undo), or give a UTC time, e.g. --to 2026-11-20T03:05:00Z\n"
    )


@pytest.mark.long  # CI's budget: the test above rolls the same run back, by its id, in make test
def test_rolling_back_past_a_batch_run_and_a_backfill_then_rerunning_gives_the_same_tables(
    spark, lakehouse, capsys, monkeypatch
):
    h = demo_batch_backfill_next(spark, lakehouse, monkeypatch)
    # Silver's readers move past its RESTORE though they never read the batch run's and the
    # backfill's replaces (they skip them); the rerun redoes the next run exactly once.
    assert rollback(lakehouse, "--to", h.moment.isoformat()) == 0
    capsys.readouterr()
    assert snapshot(spark, lakehouse) == h.after_the_backfill
    run_pipeline(lakehouse)
    assert snapshot(spark, lakehouse) == h.after_the_next_run
    assert_tables_match_oracle(spark, lakehouse)
