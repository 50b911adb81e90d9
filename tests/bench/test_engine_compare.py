"""bench/engine_compare.py on tiny data, one repetition: every contender runs, is measured, and matches the project.

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

from bench.compare import BATCH, CONTENDERS, LABELS, QUARANTINE, output_tables, spec_for
from bench.compare.check import compare_tables
from bench.compare.project import compared_tasks
from bench.sections import markers

PROJECT_DIR = Path(__file__).resolve().parents[2]

# long: it runs every contender (Spark, DuckDB, Polars) once; a benchmark's harness, not the pipeline's
# correctness (`make test-long`; the suite outgrew CI's budget).
pytestmark = pytest.mark.long

SIZE = "20k"
OTHER_SECTION = "## 11. Someone else's section\n\nkept as it is\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("compare")
    report = work / "BENCHMARKS.md"
    begin, end = markers("bench/engine_compare.py")
    report.write_text(
        f"# Benchmarks\n\n{OTHER_SECTION}\n{begin}\nan old section 12\n{end}\n\n## After\n"
    )
    summary = work / "summary.json"
    summary.write_text(json.dumps({"someone_elses_key": 1.5}))
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
            str(summary),
        ],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return {
        "work": work,
        "stdout": done.stdout,
        "report": report.read_text(),
        "summary": json.loads(summary.read_text()),
        "results": json.loads((work / "compare" / "results.json").read_text()),
    }


def test_every_contender_ran_once_and_was_measured(run):
    runs = run["results"]["runs"]
    assert [r["contender"] for r in runs] == list(CONTENDERS)
    for r in runs:
        assert r["ok"] and r["size"] == SIZE and r["rep"] == 0, r
        assert r["cpu"] > 0 and r["wall"] > 0, r
    project = runs[0]["job"]
    # The tasks of the compared tables and everything upstream, in DAG order (not the sessions).
    assert list(project["tasks"]) == compared_tasks(output_tables())
    assert list(project["tasks"]) == [
        "dim_campaigns",
        "bronze_ad_events",
        "silver_ad_events",
        "gold_ad_type_hourly",
        "gold_campaign_hourly",
        "gold_campaign_windows",
    ]
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


def test_every_contender_produced_the_projects_tables_and_the_project_the_oracles(run):
    checked = run["results"]["checks"][SIZE]
    assert "error" not in checked
    assert checked["oracle"]["ok"], checked["oracle"]
    assert set(checked["oracle"]["tables"]) == set(output_tables())
    assert set(checked["contenders"]) == set(CONTENDERS) - {"project"}
    for contender, outcome in checked["contenders"].items():
        assert outcome["ok"], (contender, outcome)
        # The batch form writes silver, not its quarantine (the stream's).
        expected = set(output_tables()) - ({QUARANTINE} if contender == BATCH else set())
        assert set(outcome["tables"]) == expected, contender


def test_the_section_has_every_contender_and_replaces_only_its_own(run):
    report = run["report"]
    begin, end = markers("bench/engine_compare.py")
    assert report.startswith(f"# Benchmarks\n\n{OTHER_SECTION}\n{begin}\n## 12. ")
    assert report.endswith(f"{end}\n\n## After\n") and "an old section 12" not in report
    section = report[report.index(begin) : report.index(end)]
    expected_check = {
        "project": "= oracle",
        BATCH: "= project",
        "plain_spark": "= project",
        "duckdb": "= project",
        "polars": "= project",
    }
    for contender in CONTENDERS:
        row = re.search(
            rf"^\| {re.escape(LABELS[contender])} \| ([0-9.]+) \| ([0-9.]+) \| ([0-9,]+) \| ([0-9.]+)× \| (.*) \|$",
            section,
            re.M,
        )
        assert row, f"no row for {contender}:\n{section}"
        assert row.group(5) == expected_check[contender]
    assert "every check passed." in section
    for task in run["results"]["runs"][0]["job"]["tasks"]:
        assert f"| `{task}` |" in section


def test_the_summary_gets_this_benchmarks_keys_and_keeps_the_others(run):
    summary = run["summary"]
    assert summary["someone_elses_key"] == 1.5
    assert summary["events"] == [20_000]
    assert set(summary) == {
        "someone_elses_key",
        "events",
        "cpu_ratio_project_to_plain_spark_20k",
        "cpu_ratio_project_to_polars_20k",
        "cpu_ratio_project_to_duckdb_20k",
        "events_per_cpu_s_20k",
        "incremental_to_batch_ratio_20k",
        "incremental_to_batch_ratio",
    }
    assert all(
        summary[key] > 0
        for key in summary
        if key.startswith(("cpu_ratio", "events_per", "incremental"))
    )


def test_the_check_catches_a_contender_that_does_less(run):
    import polars as pl

    runs = run["work"] / "compare" / "runs" / SIZE
    reference = spec_for(str(runs / "project"), "project", "")["tables"]
    cheat = run["work"] / "cheat"
    shutil.copytree(runs / "polars" / "tables", cheat / "tables")
    spec = spec_for(str(cheat), "polars", "")
    tables = spec["tables"]
    assert all(outcome["ok"] for outcome in compare_tables(reference, tables).values())

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
    outcome = compare_tables(reference, tables)
    assert {name for name, o in outcome.items() if not o["ok"]} == {
        "gold.campaign_hourly",
        "silver.ad_events",
        "silver.quarantine_ad_events",
    }


def test_a_baseline_is_rendered_beside_the_project_step_by_step(run):
    from bench.engine_compare import render

    results = json.loads(json.dumps(run["results"]))
    (project,) = [r for r in results["runs"] if r["contender"] == "project"]
    slower = json.loads(json.dumps(project))
    slower.update(contender="baseline", cpu=project["cpu"] + 10)
    slower["job"]["tasks"]["silver_ad_events"]["cpu"] = (
        project["job"]["tasks"]["silver_ad_events"]["cpu"] + 10
    )
    results["runs"].append(slower)
    results["contenders"].insert(1, "baseline")
    results["baseline"] = "abc1234"

    section = render(results)
    assert f"| project at abc1234 (baseline) | {slower['cpu']:.1f} |" in section
    silver = project["job"]["tasks"]["silver_ad_events"]["cpu"]
    assert f"| `silver_ad_events` | silver | {silver + 10:.1f} | {silver:.1f} |" in section
