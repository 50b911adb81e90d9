"""The benchmark's code on tiny data, one repetition: it must keep running and keep reporting.

Not a benchmark: the figures of a run this small are start-up costs. The real runs are `make bench`.
Everything the report needs is measured with the session ``spark`` fixture, except what by
definition needs processes of its own: spark-submit start-up (measured, once) and the Airflow DAG
run, left out here (its own end-to-end test is tests/e2e/test_hourly_dag.py).
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the top-level bench package

from bench import ysb_bench as bench  # noqa: E402


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("bench")
    master = spark.sparkContext.master
    tiny = bench.ensure_dataset(work / "data", hours=1, eps=0.3, files_per_hour=4, workers=1)
    # The backfill's code is the same for 2 hours as for the 24 of `make bench`.
    hours = bench.ensure_dataset(work / "data", hours=2, eps=0.05, files_per_hour=2, workers=1)
    pipeline = bench.measure_pipeline(spark, tiny, work / "pipeline", reps=1, master=master, profile=True)
    growth = bench.measure_growth(spark, work / "growth", runs=2, eps=0.05, master=master, idle_reps=1)
    return {
        "command": "pytest tests/bench",
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine_info(),
        "params": {"reps": 1},
        "pipeline": [pipeline],
        "backfill": bench.measure_backfill(spark, hours, work / "backfill", reps=1, master=master),
        "growth": growth,
        "spark_submit": bench.measure_spark_submit(reps=1),
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
    report = bench.render_report(results)

    for number in range(1, 10):
        assert re.search(rf"^## {number}\. ", report, re.M), f"section {number} missing:\n{report}"
    assert "Not measured" not in report
    for row in bench.throughput_rows(results["pipeline"][0]):
        assert row["incremental"]["median"] > 0 and row["batch"]["median"] > 0, row
        assert row["incremental_eps_core"]["median"] > 0 and row["batch_eps_core"]["median"] > 0, row
    growth = bench.growth_figures(results["growth"])
    assert len(growth["totals"]) == 2 and all(t > 0 for t in growth["totals"]) and growth["ratio"] > 0
    assert all(t["version"] >= 1 for t in results["growth"]["tables"].values())
    assert all(s > 0 for s in results["spark_submit"]["session"])
    assert all(run["seconds"]["silver_ad_events"] > 0 for run in results["backfill"]["runs"]["backfill"])
    assert results["pipeline"][0]["runs"]["incremental"][0]["peak_rss_mb"] > 100  # a JVM, in MiB
    assert results["pipeline"][0]["silver_profile"]["scan bronze"] > 0


def test_the_incremental_runs_report_their_query_progress(results):
    progress = results["pipeline"][0]["runs"]["incremental"][0]["progress"]
    assert set(progress) >= {"bronze_ad_events", "silver_ad_events", "gold_campaign_windows", "gold_campaign_hourly"}
    assert all(p["triggerExecution"] > 0 and p["batches"] >= 1 for p in progress.values())


def test_a_dag_runs_task_times_come_from_the_metadata_db(tmp_path):
    import sqlite3

    db = tmp_path / "airflow.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE dag_run (dag_id TEXT, run_id TEXT, logical_date TEXT)")
        conn.execute("CREATE TABLE task_instance (dag_id TEXT, run_id TEXT, task_id TEXT, start_date TEXT, end_date TEXT)")
        conn.execute("INSERT INTO dag_run VALUES ('ysb_hourly', 'r1', '2026-11-20 03:00:00.000000')")
        conn.execute(
            "INSERT INTO task_instance VALUES ('ysb_hourly', 'r1', 'bronze_ad_events', "
            "'2026-11-20 03:00:01.000000', '2026-11-20 03:00:13.500000')"
        )
    assert bench.task_durations(db, "2026-11-20T03:00:00+00:00") == {"bronze_ad_events": 12.5}
