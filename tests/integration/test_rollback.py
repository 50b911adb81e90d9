"""`lakehouse rollback`: the tables a run wrote go back, the checkpoints with them; the rerun redoes it exactly once."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from helpers import START, assert_tables_match_oracle, run_pipeline, table

from lakehouse import catalog
from lakehouse_tools import cli
from lakehouse_tools.generator import write_campaigns, write_hours

# Columns that say when a row was processed, not what it holds: a redone run writes new values.
PROCESSING_TIME = {"recorded_at", "reconciled_at", "reconciled_by", "resolved_at"}
RUN_ID = "scheduled__2026-11-20T03:00:00+00:00"
ROLLED_BACK = [
    t.name
    for q in catalog.tasks()
    if q.streamed and not q.source
    for t in catalog.written_by_task(q)
]  # silver and gold with their side tables (bronze, the raw log, stays)


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


def test_rolling_back_the_last_run_then_rerunning_it_gives_the_same_tables(
    spark, lakehouse, capsys, monkeypatch
):
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 2, events_per_second=0.05, seed=31)
    run_pipeline(lakehouse)
    before_the_run = snapshot(spark, lakehouse)

    time.sleep(1.5)  # commit times are in milliseconds, checkpoint file times in (at least) seconds
    moment = datetime.now(UTC)
    time.sleep(1.5)
    write_hours(lakehouse, START + timedelta(hours=2), 1, events_per_second=0.05, seed=31)
    with (
        monkeypatch.context() as airflow_task
    ):  # what Airflow sets in a task's process (ops.query_progress keeps it)
        airflow_task.setenv("AIRFLOW_CTX_DAG_RUN_ID", RUN_ID)
        run_pipeline(lakehouse)
    after_the_run = snapshot(spark, lakehouse)
    assert after_the_run != before_the_run
    bronze = table(spark, lakehouse, "bronze.ad_events").count()

    assert rollback(lakehouse, "--to", moment.isoformat(), "--dry-run") == 0
    planned = capsys.readouterr().out
    assert "would: silver.ad_events: restore version" in planned and "forgets batches" in planned, (
        planned
    )
    assert (
        "would: gold.user_sessions: reads silver.ad_events on from after its RESTORE commit"
        in planned
    ), planned
    assert snapshot(spark, lakehouse) == after_the_run, "a dry run changes nothing"

    assert (
        rollback(lakehouse, "--to", RUN_ID) == 0
    )  # the run's first query started after the moment
    done = capsys.readouterr().out
    assert (
        "done: gold.user_sessions: checkpoint back to batch" in done
        and "reads silver.ad_events on from version" in done
    ), done
    assert snapshot(spark, lakehouse) == before_the_run
    assert table(spark, lakehouse, "bronze.ad_events").count() == bronze, (
        "bronze, the raw log, is not rolled back"
    )

    run_pipeline(lakehouse)
    assert snapshot(spark, lakehouse) == after_the_run
    assert_tables_match_oracle(spark, lakehouse)

    # Before the tables existed there is nothing to go back to; an unknown run id is not a moment.
    assert rollback(lakehouse, "--to", "2026-01-01T00:00Z") == 2
    assert "did not exist before 2026-01-01 00:00:00Z" in capsys.readouterr().err
    assert rollback(lakehouse, "--to", "manual__nope") == 2
    assert "No query of run 'manual__nope'" in capsys.readouterr().err
