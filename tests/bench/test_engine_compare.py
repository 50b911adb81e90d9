"""bench/engine_compare.py on tiny data, one repetition: every contender runs, is measured, and every
table the catalog declares is counted: equal to the project's (the project's to the oracle's), or
reported as not implemented by the contender.

Not a benchmark (at 20k events the figures are start-up costs; `make bench-compare` measures). The
benchmark runs as a process of its own, as `make bench-compare` runs it: it becomes a child
subreaper and reaps every process it inherits, which the test process (holding the session's Spark
JVM) must not do. The project runs the work tree's code (``--code worktree``), so a change to the
pipeline that makes its tables differ from the minimal jobs' fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare import (
    BATCH,
    CONTENDERS,
    LABELS,
    MINIMAL_TABLES,
    declared_tables,
    implemented,
    spec_for,
)
from bench.compare.check import compare_tables
from bench.compare.project import pipeline_tasks
from lakehouse import catalog
from lakehouse_tools.oracle import GOLD

PROJECT_DIR = Path(__file__).resolve().parents[2]

# long: it runs every contender (Spark, Polars) once; a benchmark's harness, not the pipeline's
# correctness (`make test-long`; the suite outgrew CI's budget).
pytestmark = pytest.mark.long

SIZE = "20k"
MINIMAL = ("plain_spark", "polars")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("compare")
    results = work / "results"
    results.mkdir()
    (results / "summary.json").write_text(json.dumps({"someone_elses_key": 1.5}))
    report = work / "BENCHMARKS.md"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PROJECT_DIR / "include"), str(PROJECT_DIR)]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.engine_compare",
            "--sizes",
            SIZE,
            "--reps",
            "1",
            "--code",
            "worktree",
            "--data-dir",
            str(work / "data"),
            "--work-dir",
            str(work / "compare"),
            "--keep",
            "--out",
            str(report),
            "--summary",
            str(results / "summary.json"),
        ],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return {
        "work": work,
        "stdout": done.stdout,
        "report": report.read_text(),
        "summary": json.loads((results / "summary.json").read_text()),
        "saved": json.loads((results / "engine_compare.json").read_text()),
        "results": json.loads((work / "compare" / "results.json").read_text()),
    }


def test_every_contender_ran_once_and_was_measured(run):
    runs = run["results"]["runs"]
    assert [r["contender"] for r in runs] == list(CONTENDERS)
    for r in runs:
        assert r["ok"] and r["size"] == SIZE and r["rep"] == 0, r
        assert r["cpu"] > 0 and r["wall"] > 0, r
    project = runs[0]["job"]
    # Every task of the DAG, in DAG order: the sessions too.
    assert list(project["tasks"]) == pipeline_tasks() == [spec.task for spec in catalog.tasks()]
    assert "gold_user_sessions" in project["tasks"]
    assert {t["layer"] for t in project["tasks"].values()} == {"dims", "bronze", "silver", "gold"}
    # The driver JVM was found, so each task's CPU includes it.
    assert project["jvm_found"] and all(t["cpu"] > 0 for t in project["tasks"].values())
    for contender in CONTENDERS:
        line = re.search(
            rf"^\[..:..:..\] {SIZE} rep 1/1 {contender}: [0-9.]+ CPU-s, [0-9.]+ wall-s$",
            run["stdout"],
            re.M,
        )
        assert line, f"no progress line for {contender}:\n{run['stdout']}"


def test_every_declared_table_is_counted_for_every_contender(run):
    checked = run["results"]["checks"][SIZE]
    assert "error" not in checked
    assert run["results"]["catalog"] == declared_tables()
    oracle = checked["oracle"]
    assert oracle["ok"], oracle
    assert list(oracle["tables"]) == declared_tables()
    # The project's every table the oracle knows equals it: the sessions, open and closed, too.
    for name in declared_tables():
        if name in MINIMAL_TABLES or name in GOLD:
            assert oracle["tables"][name]["status"] == "equal", (name, oracle["tables"][name])
    assert set(checked["contenders"]) == set(CONTENDERS) - {"project"}
    for contender, outcome in checked["contenders"].items():
        assert outcome["ok"], (contender, outcome)
        assert list(outcome["tables"]) == declared_tables(), contender
        statuses = {name: v["status"] for name, v in outcome["tables"].items()}
        if contender in MINIMAL:
            # What the minimal jobs write equals the project's; the rest is reported, not failed.
            assert {n for n, s in statuses.items() if s == "equal"} == set(MINIMAL_TABLES)
            assert {n for n, s in statuses.items() if s == "not implemented"} == set(
                declared_tables()
            ) - set(MINIMAL_TABLES)
        else:  # the batch form: its tables equal the stream's; the stream's side tables it leaves
            assert "differs" not in statuses.values(), statuses
            for spec in catalog.tables():
                if spec.batch:
                    assert statuses[spec.name] == "equal", spec.name
                elif spec.written_by and catalog.get(spec.written_by).batch:
                    assert statuses[spec.name] == "not implemented", spec.name


def test_the_report_has_every_contender_and_every_table(run):
    report = run["report"]
    assert report.startswith("# Benchmarks")
    section = report[report.index("## Per-event cost") :]
    section = section[: section.index("\n## ", 1)]
    for contender in CONTENDERS:
        row = re.search(
            rf"^\| {re.escape(LABELS[contender])} \| ([0-9.]+) \| ([0-9.]+) \| ([0-9,]+) \| ([0-9.]+)× \| (.*) \|$",
            section,
            re.M,
        )
        assert row, f"no row for {contender}:\n{section}"
        if contender == "project":
            assert re.match(rf"\d+ of {len(declared_tables())} = oracle", row.group(5))
            assert "differ" not in row.group(5)
        elif contender in MINIMAL:
            missing = len(declared_tables()) - len(MINIMAL_TABLES)
            assert row.group(5) == (
                f"{len(MINIMAL_TABLES)} of {len(declared_tables())} = project, {missing} not implemented"
            )
    for name in declared_tables():
        assert f"| `{name}` |" in section, name
    sessions = re.search(r"^\| `gold.user_sessions` \| (.*) \|$", section, re.M).group(1)
    assert sessions.split(" | ") == ["= oracle", "= project", "= project", "= project"]
    progress = re.search(r"^\| `ops.query_progress` \| (.*) \|$", section, re.M).group(1)
    assert progress.split(" | ")[2:] == ["not implemented"] * 2
    assert "**Sessions at 20k:** the project's `gold_user_sessions` task" in section
    assert "every check passed." in section
    for task in run["results"]["runs"][0]["job"]["tasks"]:
        assert f"| `{task}` |" in section
    # Rendered from the results files: the benchmarks that did not run here say what measures them.
    assert "no `bench/results/small_hour.json`): `make bench-small-hour` measures it" in report


def test_the_summary_gets_this_benchmarks_keys_and_keeps_the_others(run):
    summary = run["summary"]
    assert summary["someone_elses_key"] == 1.5
    assert summary["events"] == [20_000]
    assert summary["tables_counted"] == len(declared_tables())
    for contender in MINIMAL:
        assert summary[f"tables_not_implemented_{contender}"] == sorted(
            set(declared_tables()) - set(MINIMAL_TABLES)
        )
    assert summary[f"tables_not_implemented_{BATCH}"] == sorted(
        set(declared_tables()) - set(implemented(BATCH))
    )
    assert "silver.quarantine_ad_events" in summary[f"tables_not_implemented_{BATCH}"]
    ratios = {
        "cpu_ratio_project_to_plain_spark_20k",
        "cpu_ratio_project_to_polars_20k",
        "events_per_cpu_s_20k",
        "incremental_to_batch_ratio_20k",
        "incremental_to_batch_ratio",
        "compare_sessions_cpu_s_20k",
        "sessions_ratio_to_native_spark_warm_20k",
    }
    assert ratios <= set(summary) and all(summary[key] > 0 for key in ratios)
    assert sorted(run["saved"]["summary_keys"]) == sorted(set(summary) - {"someone_elses_key"})


def test_the_check_catches_a_contender_that_does_less(run):
    import polars as pl

    runs = run["work"] / "compare" / "runs" / SIZE
    reference = spec_for(str(runs / "project"), "project")["tables"]
    cheat = run["work"] / "cheat"
    shutil.copytree(runs / "polars" / "tables", cheat / "tables")
    spec = spec_for(str(cheat), "polars")
    tables = spec["tables"]
    claims = implemented("polars")
    assert all(outcome["ok"] for outcome in compare_tables(reference, tables, claims).values())

    def rewrite(name: str, change) -> None:
        changed = change(pl.read_delta(tables[name]))
        changed.write_delta(
            tables[name],
            mode="overwrite",
            delta_write_options={"partition_by": spec["partition_by"][name]},
        )

    rewrite("gold.campaign_hourly", lambda rows: rows.slice(1))  # one campaign-hour fewer
    rewrite("silver.ad_events", lambda rows: pl.concat([rows, rows.head(1)]))  # a duplicate kept
    rewrite(
        "silver.quarantine_ad_events",
        lambda rows: rows.with_columns(reason=pl.lit("malformed_json")),
    )
    # A session that lost an event.
    rewrite("gold.user_sessions", lambda rows: rows.with_columns(events=pl.col("events") - 1))
    outcome = compare_tables(reference, tables, claims)
    assert {name for name, o in outcome.items() if not o["ok"]} == {
        "gold.campaign_hourly",
        "silver.ad_events",
        "silver.quarantine_ad_events",
        "gold.user_sessions",
    }
    # A table the catalog declares tomorrow: counted, reported as not implemented, not failed.
    tomorrow = {**reference, "gold.campaign_weekly": reference["gold.campaign_hourly"]}
    added = compare_tables(tomorrow, tables, claims)["gold.campaign_weekly"]
    assert added == {"status": "not implemented", "ok": True, "detail": ""}
