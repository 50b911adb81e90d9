"""The benchmark's code on tiny data, one repetition: it must keep running and keep reporting.

Not a benchmark: the figures of a run this small are start-up costs. The real runs are `make bench`.
Everything the report needs is measured with the session ``spark`` fixture, except what by
definition needs processes of its own: spark-submit start-up (measured, once) and the Airflow DAG
run, left out here (its own end-to-end test is tests/e2e/test_hourly_dag.py).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from bench.ysb import data, figures, measuring, overhead, report, worker
from bench.ysb.tasks import BATCH, PIPELINE, STREAMED, merge_table
from lakehouse import catalog
from lakehouse.flows.merge import RESOLUTION_COLUMNS

# long: the benchmark's own smoke run (minutes), not the pipeline's correctness (`make test-long`).
pytestmark = [pytest.mark.long, pytest.mark.local_driver]


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("bench")
    master = spark.sparkContext.master
    tiny = data.ensure_dataset(work / "data", hours=1, eps=0.3, files_per_hour=4, workers=1)
    # The backfill's code is the same for 2 hours as for the 24 of `make bench`.
    hours = data.ensure_dataset(work / "data", hours=2, eps=0.05, files_per_hour=2, workers=1)
    pipeline = worker.measure_pipeline(
        spark, tiny, work / "pipeline", reps=1, master=master, profile=True
    )
    growth = worker.measure_growth(
        spark, work / "growth", runs=2, eps=0.05, master=master, idle_reps=1
    )
    return {
        "command": "pytest tests/bench",
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": measuring.machine_info(),
        "params": {"reps": 1},
        "pipeline": [pipeline],
        "backfill": worker.measure_backfill(spark, hours, work / "backfill", reps=1, master=master),
        "growth": growth,
        "spark_submit": overhead.measure_spark_submit(reps=1),
        "dag_idle": None,
        "tuning": {
            "size": tiny.label,
            "master": master,
            "runs": 2,
            "variants": {
                name: {"conf": conf, "rounds": [{"pipeline": pipeline, "growth": growth}]}
                for name, conf in (("baseline", {}), ("same-again", {}))
            },
        },
    }


def test_the_report_has_every_section_with_sane_numbers(results):
    text = report.render_report(results)

    for number in range(1, 10):
        assert re.search(rf"^## {number}\. ", text, re.M), f"section {number} missing:\n{text}"
    assert "Not measured" not in text
    rows = figures.throughput_rows(results["pipeline"][0])
    assert [row["task"] for row in rows] == [*STREAMED, "end to end"]
    for row in rows:
        assert row["incremental"]["median"] > 0 and row["batch"]["median"] > 0, row
        assert row["incremental_eps_core"]["median"] > 0 and row["batch_eps_core"]["median"] > 0, (
            row
        )
    growth = figures.growth_figures(results["growth"])
    assert (
        len(growth["totals"]) == 2 and all(t > 0 for t in growth["totals"]) and growth["ratio"] > 0
    )
    assert all(t["version"] >= 1 for t in results["growth"]["tables"].values())
    assert all(s > 0 for s in results["spark_submit"]["session"])
    for run in results["backfill"]["runs"]["backfill"] + results["backfill"]["runs"]["batch"]:
        assert set(run["seconds"]) == set(BATCH) and all(s > 0 for s in run["seconds"].values()), (
            run
        )
    assert results["pipeline"][0]["runs"]["incremental"][0]["peak_rss_mb"] > 100  # a JVM, in MiB
    assert (
        next(iter(results["pipeline"][0]["profile"].values())) > 0
    )  # the scan of the MERGE table's input


def test_every_task_of_the_catalog_is_timed_in_both_runs_and_labelled(results):
    tasks = tuple(entry.task for entry in catalog.tasks())
    assert PIPELINE == tasks
    pipeline = results["pipeline"][0]["runs"]
    assert tuple(pipeline["incremental"][0]["seconds"]) == tasks
    assert (
        tuple(pipeline["batch"][0]["seconds"]) == tasks
    )  # the plain batch job runs every transform
    text = report.render_report(results)
    for entry in catalog.tasks():
        assert re.search(rf"^\| (— )?{re.escape(entry.name)} ", text, re.M), (
            f"{entry.name} has no row in the report"
        )


def test_the_plain_batch_job_writes_every_table_the_stream_does(results, spark, tmp_path):
    # The same rows, whichever way they are computed (the stream's lineage columns aside).
    tiny = data.ensure_dataset(tmp_path / "data", hours=1, eps=0.1, files_per_hour=2, workers=1)
    streamed, plain = (
        data.fresh_lakehouse(tmp_path / "stream", tiny),
        data.fresh_lakehouse(tmp_path / "plain", tiny),
    )
    worker.run_tasks(streamed, PIPELINE)
    worker.plain_batch(spark, streamed, plain)
    for entry in catalog.tables():
        if entry.layer == "ops":
            continue  # the pipeline's own records: the plain job keeps none
        # A quarantine row's resolution is set by a later backfill only: the plain job writes none.
        skipped = {*entry.lineage, "ingested_at", "ingest_date", *RESOLUTION_COLUMNS}
        columns = [c for c in entry.column_names if c not in skipped]

        def rows(lakehouse, entry=entry, columns=columns):
            return sorted(
                map(
                    tuple,
                    spark.read.format("delta")
                    .load(lakehouse.table(entry.name).path)
                    .select(*columns)
                    .collect(),
                ),
                key=repr,
            )

        assert rows(plain) == rows(streamed), entry.name


def test_the_incremental_runs_report_their_query_progress(results):
    progress = results["pipeline"][0]["runs"]["incremental"][0]["progress"]
    assert set(progress) >= set(STREAMED)
    assert all(p["triggerExecution"] > 0 and p["batches"] >= 1 for p in progress.values())
    assert merge_table().task in progress
    # Every hourly run accounts for each of its queries, the last one too (listener events lag).
    assert all(set(run["progress"]) == set(STREAMED) for run in results["growth"]["runs"]), results[
        "growth"
    ]["runs"]


def test_a_dag_runs_task_times_come_from_the_metadata_db(tmp_path):
    import sqlite3

    db = tmp_path / "airflow.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE dag_run (dag_id TEXT, run_id TEXT, logical_date TEXT)")
        conn.execute(
            "CREATE TABLE task_instance (dag_id TEXT, run_id TEXT, task_id TEXT, start_date TEXT, end_date TEXT)"
        )
        conn.execute(
            "INSERT INTO dag_run VALUES ('ysb_hourly', 'r1', '2026-11-20 03:00:00.000000')"
        )
        conn.execute(
            "INSERT INTO task_instance VALUES ('ysb_hourly', 'r1', 'bronze_ad_events', "
            "'2026-11-20 03:00:01.000000', '2026-11-20 03:00:13.500000')"
        )
    assert overhead.task_durations(db, "2026-11-20T03:00:00+00:00") == {"bronze_ad_events": 12.5}
