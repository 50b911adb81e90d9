"""An operator's first day (issue 41), walked in headless Chromium as a person would.

`make demo`'s own entry point on the test's lakehouse and Airflow home; then, with a real scheduler
and api-server: the demo run's silver log and its summary in the UI, a batch run from the Trigger
form, a 3-hour backfill from the Backfill dialog, the maintenance DAG from the Trigger button, the
Assets page, `lakehouse status`, and rollback's three dry runs (a batch run's id, a time, an
incremental run's id). Screenshots of every page stay under the test's ``tmp_path``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from airflow_browser import AirflowBrowser
from airflow_env import (
    TERMINAL,
    airflow_environment,
    airflow_services,
    dag_runs,
    describe_failures,
    metadata_query,
    migrate,
    reserialize_and_pause,
    short_retry_delay,
    wait_for_runs,
)
from helpers import (
    assert_tables_match_oracle,
    committed_batches,
    oracle,
    rollback_plan,
    rolled_back_versions,
)

from lakehouse import catalog
from lakehouse.maintenance import DEFAULT_RETAIN_HOURS
from lakehouse_tools import cli
from lakehouse_tools.demo import DEMO_START, SEED
from lakehouse_tools.generator import write_hours

DEMO_HOURS = 3  # the fewest that make a 3-hour backfill recompute hours the demo wrote
EVENTS_PER_SECOND = 0.05  # ~180 events an hour: the walk is about the UI, not the data
BATCH_RUN = "batch__2026-11-20T00-03"  # named after its hours, as the README says to


def silver_headline(expected) -> str:
    """Silver's summary line for one incremental micro-batch over the whole landing zone, from the
    oracle (plain Python over the raw lines), without its rule count."""
    inserted, duplicates = len(expected.events), expected.duplicates
    reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(expected.quarantined.items()))
    return (
        f"silver.ad_events: {expected.lines:,} row(s) in, 1 micro-batch(es); "
        f"{inserted + duplicates:,} valid, {duplicates:,} duplicate(s), {inserted:,} inserted, "
        f"{sum(expected.quarantined.values()):,} quarantined" + (f" ({reasons})" if reasons else "")
    )


def wait_for_dag(env, dag_id: str, count: int, log_dir: Path, timeout: float = 1200) -> list[dict]:
    """``wait_for_runs`` for another DAG than ysb_hourly."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = dag_runs(env, dag_id)
        if len(runs) >= count and all(run["state"] in TERMINAL for run in runs):
            return runs
        time.sleep(0.5)
    raise AssertionError(
        f"{dag_id}: runs did not finish in {timeout} s: {dag_runs(env, dag_id)}; logs in {log_dir}"
    )


def dry_run(lakehouse, capsys, to: str) -> tuple[str, list[str]]:
    """`lakehouse rollback --to TO --dry-run`: the plan's first line, and its steps without the
    writers' transaction ids."""
    assert (
        cli.main(["rollback", "--lakehouse-root", lakehouse.root, "--to", to, "--dry-run"]) == 0
    ), capsys.readouterr()
    said = capsys.readouterr().out
    with capsys.disabled():  # for a person reading `pytest -s`; not read back by the next call
        print(said)
    first, *steps = said.splitlines()
    return first, [step.split("; writers' transaction ids")[0] for step in steps]


@pytest.mark.long
def test_an_operators_first_day(spark, lakehouse, tmp_path, monkeypatch, capsys):
    airflow_home = tmp_path / "airflow_home"
    migrate(airflow_home)
    short_retry_delay(airflow_home)
    env = airflow_environment(airflow_home, lakehouse)
    walk_start = datetime.now(UTC).replace(microsecond=0)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    # The export DAG would run once per hour the runs publish (its own test is about that); the
    # maintenance DAG is triggered below, as an operator would, not by its midnight schedule.
    reserialize_and_pause(env, "ysb_maintenance", "ysb_hourly_export", "ysb_daily_export")

    # The demo, by `make demo`'s own entry point: data, `airflow dags test`, task logs, the oracle.
    # Its environment is the one make gives it: no fast-start JVM options, which a local summary
    # session (LAKEHOUSE_ENGINE=local) would add to its own ("Multiple garbage collectors").
    demo = subprocess.run(
        [sys.executable, "-m", "lakehouse_tools.demo", "--hours", str(DEMO_HOURS)]
        + ["--events-per-second", str(EVENTS_PER_SECOND)],
        env={k: v for k, v in env.items() if k != "SPARK_SUBMIT_OPTS"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert demo.returncode == 0 and "gold MATCHES the oracle." in demo.stdout, (
        demo.stdout[-3000:] + demo.stderr[-3000:]
    )
    headline = silver_headline(oracle(lakehouse))
    demo_run = metadata_query(
        airflow_home,
        "SELECT run_id FROM dag_run WHERE dag_id = 'ysb_hourly' AND logical_date = ?",
        f"{DEMO_START + timedelta(hours=DEMO_HOURS):%Y-%m-%d %H:%M:%S}.000000",
    )[0][0]
    after_demo, demo_batches = rolled_back_versions(lakehouse), committed_batches(lakehouse)
    # The next hour lands: the scheduler's first (incremental) run ingests it.
    write_hours(lakehouse, DEMO_START + timedelta(hours=DEMO_HOURS), 1, EVENTS_PER_SECOND, SEED)

    with airflow_services(env, tmp_path / "airflow-logs") as services:
        runs = wait_for_runs(env, count=2, log_dir=services.log_dir)
        assert [run["state"] for run in runs] == ["success"] * len(runs), describe_failures(
            env, runs
        )
        incremental = next(run["run_id"] for run in runs if run["run_id"].startswith("scheduled__"))
        before_batch = rolled_back_versions(lakehouse)

        with AirflowBrowser(services.base_url, airflow_home) as browser:
            browser.log_in()
            # The demo run's silver log: written by the demo where the UI reads it, its summary in view.
            page = browser.task_log_text(
                "ysb_hourly",
                demo_run,
                "silver_ad_events",
                headline,
                shots / "1-demo-silver-log.png",
            )
            own = [line for line in page.splitlines() if "silver.ad_events: " in line]
            assert any(
                re.search(re.escape(headline) + r"; \d+ rule check\(s\) ", line) for line in own
            ), f"{headline!r} not in silver's lines {own}"

            # A batch run of the demo's hours from the Trigger form: the params typed, the run named.
            start, end = DEMO_START, DEMO_START + timedelta(hours=DEMO_HOURS)
            conf = browser.trigger(
                "ysb_hourly",
                {"Mode": "batch", "Start (batch mode)": start, "End (batch mode)": end},
                shots / "2-trigger-form.png",
                run_id=BATCH_RUN,
            )
            assert conf == {
                "mode": "batch",
                "start": "2026-11-20T00:00:00.000Z",
                "end": "2026-11-20T03:00:00.000Z",
                "source": "files",
                "kafka_topic": "ysb-ad-events",
                "full_refresh": "none",
            }
            runs = wait_for_runs(env, count=len(runs) + 1, log_dir=services.log_dir)
            assert {run["run_id"]: run["state"] for run in runs}[BATCH_RUN] == "success", (
                describe_failures(env, runs)
            )
            # Its silver log says it recomputed the hours the form gave, [start, end).
            browser.task_log_text(
                "ysb_hourly",
                BATCH_RUN,
                "silver_ad_events",
                "silver.ad_events: batch over 3 hour(s) 2026-11-20T00:00Z..2026-11-20T02:00Z; ",
                shots / "3-batch-silver-log.png",
            )
            before_backfill = rolled_back_versions(lakehouse)
            moment = datetime.now(UTC)
            time.sleep(1.5)  # commit times are in milliseconds, checkpoint file times in seconds

            # A 3-hour backfill from the dialog, as the README says: logical dates 01:00..03:00 own
            # event hours 00:00..02:00; "All Runs", since the demo's run holds 03:00.
            said = browser.backfill(
                "ysb_hourly",
                DEMO_START + timedelta(hours=1),
                DEMO_START + timedelta(hours=3),
                "All Runs",
                shots / "4-backfill-dialog.png",
            )
            assert said == "3 runs will be triggered.", said
            backfilled = metadata_query(
                airflow_home,
                "SELECT b.logical_date FROM backfill_dag_run b JOIN dag_run r ON r.id = b.dag_run_id "
                "ORDER BY b.logical_date",
            )
            assert [row[0][:16] for row in backfilled] == [
                "2026-11-20 01:00",
                "2026-11-20 02:00",
                "2026-11-20 03:00",
            ], backfilled
            runs = wait_for_runs(env, count=len(runs) + 2, log_dir=services.log_dir)
            assert [run["state"] for run in runs] == ["success"] * len(runs), describe_failures(
                env, runs
            )

            # Maintenance from its Trigger button (OPTIMIZE and VACUUM of every table).
            assert browser.trigger("ysb_maintenance", {}, shots / "5-trigger-maintenance.png") == {
                "retain_hours": DEFAULT_RETAIN_HOURS
            }
            maintained = wait_for_dag(env, "ysb_maintenance", 1, services.log_dir)
            assert [run["state"] for run in maintained] == ["success"], maintained

            # Every catalog table is an Asset, and each has had an event.
            assets = browser.assets(len(catalog.tables()), shots / "6-assets.png")
            assert set(assets) == {t.name for t in catalog.tables()}
            # The "Last Asset Event" column: a time (UTC, as the UI is set) of this walk's.
            assert {
                name: datetime.strptime(last, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC) >= walk_start
                for name, last in assets.items()
                if re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", last)
            } == dict.fromkeys(assets, True), assets

        # `lakehouse status`: every hour complete.
        with monkeypatch.context() as environment:
            for name, value in env.items():
                environment.setenv(name, value)
            status = cli.main(["status", "--lakehouse-root", lakehouse.root])
        grid = capsys.readouterr().out
        with capsys.disabled():
            print(grid)
        assert status == 0, grid
        # What it graded: every hour the demo and the next hour landed, each complete.
        states = {row.hour: row.state for row in cli.grade(cli.observe(lakehouse)).rows}
        landed = {datetime(2026, 11, 20, hour) for hour in range(DEMO_HOURS + 1)}
        assert landed <= set(states) and set(states.values()) == {"complete"}, grid

    # Rollback's three dry runs: each names its moment and prints the plan back to it.
    first, steps = dry_run(lakehouse, capsys, BATCH_RUN)
    assert re.fullmatch(
        rf"Rolling back to before \S+ \S+Z \(the first write of batch run {BATCH_RUN}\), dry run",
        first,
    ), first
    assert steps == rollback_plan(before_batch, committed_batches(lakehouse), lakehouse)
    first, steps = dry_run(lakehouse, capsys, moment.isoformat())
    assert first == f"Rolling back to before {moment:%Y-%m-%d %H:%M:%S}Z (the time given), dry run"
    assert steps == rollback_plan(before_backfill, committed_batches(lakehouse), lakehouse)
    first, steps = dry_run(lakehouse, capsys, incremental)
    assert first.endswith(f"Z (the start of run {incremental}'s first streaming batch), dry run"), (
        first
    )
    assert steps == rollback_plan(after_demo, demo_batches, lakehouse)
    assert_tables_match_oracle(spark, lakehouse)
