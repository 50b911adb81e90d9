"""`airflow backfill create` executed by a real scheduler, beside an incremental run of the same DAG; `lakehouse repair`."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from airflow_browser import AirflowBrowser
from airflow_env import (
    airflow,
    airflow_environment,
    airflow_services,
    create_backfill,
    describe_failures,
    metadata_query,
    migrate,
    reserialize_and_pause,
    short_retry_delay,
    wait_for_runs,
)
from helpers import (
    START,
    assert_tables_match_oracle,
    gold_tables,
    rows_of,
    run_pipeline,
    table_version,
)

from lakehouse_tools import cli
from lakehouse_tools.generator import write_campaigns, write_hours

GOLD = tuple(t.name for t in gold_tables())


def wait_for_backfill_completed(env, timeout: float = 120) -> None:
    """Wait until the scheduler has marked every backfill of this metadata DB complete.

    It marks one complete every 30 s once its runs have finished; until then `backfill create`
    for the DAG refuses ("Another backfill is running").
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if metadata_query(
            env["AIRFLOW_HOME"], "SELECT COUNT(*) FROM backfill WHERE completed_at IS NULL"
        ) == [(0,)]:
            return
        time.sleep(0.25)  # a read-only query (~1 ms)
    raise AssertionError(f"the scheduler did not mark the backfill complete in {timeout} s")


def test_backfill_recomputes_its_hours_beside_an_incremental_run(
    spark, lakehouse, tmp_path, monkeypatch, capsys
):
    # A metadata DB of its own: the session's shared one holds other tests' runs of ysb_hourly
    # (`dags test` at 02:00), and a backfill skips a logical date that already has a run.
    airflow_home = tmp_path / "airflow_home"
    airflow_home.mkdir()
    migrate(airflow_home)
    short_retry_delay(airflow_home)  # a failed try retried after seconds, not the DAG's minute
    env = airflow_environment(airflow_home, lakehouse)
    # History: two hours already streamed into every layer.
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 2, events_per_second=0.05, seed=31)
    run_pipeline(lakehouse)
    # A "bug" damaged gold for hour 01:00; a third producer hour (with late events for the earlier
    # hours) lands and will be ingested by an incremental run while the backfill runs.
    hourly = lakehouse.table(GOLD[0]).path
    spark.sql(f"DELETE FROM delta.`{hourly}` WHERE hour_start = TIMESTAMP'2026-11-20 01:00:00'")
    write_hours(lakehouse, START + timedelta(hours=2), 1, events_per_second=0.05, seed=31)

    # The DAGs serialized, and two of them paused, by one CLI process (a start is ~3 CPU-s). The
    # daily maintenance DAG would start its latest run too (catchup=False): its compactions make
    # files look newer than the hours they hold, which the status grid of the last phase reads. The
    # export DAG would run once per hour the runs publish (tests/scheduler/test_hourly_export.py is
    # about that): here its runs would only take task slots and CPU from the runs under test.
    reserialize_and_pause(env, "ysb_maintenance", "ysb_hourly_export", "ysb_daily_export")
    started = time.monotonic()
    # One scheduler, api-server and dag-processor for the whole test: the backfill and the repair
    # are created beside them, as an operator does.
    with airflow_services(env, tmp_path / "airflow-logs") as services:
        # Runs at logical dates 01:00..03:00 own event hours 00:00, 01:00 and 02:00.
        create_backfill(env, START + timedelta(hours=1), START + timedelta(hours=3))
        # The 3 backfill runs, and the incremental run the scheduler starts for the latest hour
        # as soon as it sees the unpaused DAG (catchup=False): it ingests hour 02:00 meanwhile.
        runs = wait_for_runs(env, count=4, log_dir=services.log_dir)
        elapsed = time.monotonic() - started
        assert {run["state"] for run in runs} == {"success"}, describe_failures(env, runs)
        # `list-runs` has no run type column; Airflow names a run after its type ("backfill__<date>").
        # A second scheduled run appears when the wall clock crosses an hour meanwhile; it finds nothing new.
        kinds = [run["run_id"].split("__")[0] for run in runs]
        assert (
            kinds.count("backfill") == 3
            and kinds.count("scheduled") >= 1
            and len(kinds) == 3 + kinds.count("scheduled")
        ), runs
        print(f"3-hour backfill beside an incremental run: {elapsed:.0f} s")
        assert_tables_match_oracle(spark, lakehouse)

        # The hour lost again: `lakehouse status` finds it, `lakehouse repair` backfills exactly it,
        # and re-running a completed hour recomputes it idempotently: every gold table equals what
        # it held before the loss, an undamaged one rewritten (not skipped) with the same rows.
        before = {name: rows_of(spark, lakehouse, name) for name in GOLD}
        undamaged = "gold.campaign_windows"  # any gold table but the damaged one
        undamaged_version = table_version(spark, lakehouse, undamaged)
        spark.sql(f"DELETE FROM delta.`{hourly}` WHERE hour_start = TIMESTAMP'2026-11-20 01:00:00'")
        grid = cli.grade(cli.observe(lakehouse))
        lost = datetime(2026, 11, 20, 1)
        assert [(row.hour, row.state) for row in grid.rows if row.state in cli.NEEDS_ACTION] == [
            (lost, "missing")
        ], cli.grid_text(grid)
        # Else the repair's `backfill create` is refused. Waited for here, not before the loss: the
        # scheduler marks a backfill complete only every 30 s, and the steps above fill that time.
        wait_for_backfill_completed(env)
        with monkeypatch.context() as environment:
            for name, value in env.items():
                environment.setenv(name, value)
            assert cli.main(["repair", "--lakehouse-root", lakehouse.root]) == 0
        repair_said = capsys.readouterr().out
        assert (
            "running: airflow backfill create --dag-id ysb_hourly --reprocess-behavior completed "
            "--from-date 2026-11-20T02:00:00+00:00 --to-date 2026-11-20T02:00:00+00:00"
        ) in repair_said, repair_said
        runs = wait_for_runs(
            env, count=len(runs), log_dir=services.log_dir
        )  # the 02:00 run, cleared and re-run
        assert {run["state"] for run in runs} == {"success"}, describe_failures(env, runs)
        assert {name: rows_of(spark, lakehouse, name) for name in GOLD} == before
        rewrites = spark.sql(f"DESCRIBE HISTORY delta.`{lakehouse.table(undamaged).path}`").filter(
            f"operation = 'WRITE' AND version > {undamaged_version}"
        )
        assert rewrites.count() == 1, (
            "the repair must have rewritten the hour in every gold table (idempotently), not skipped it"
        )
        # A manual run now finds nothing new: the log an operator reads most hours.
        assert airflow(env, "dags", "trigger", "ysb_hourly").returncode == 0
        runs = wait_for_runs(env, count=len(runs) + 1, log_dir=services.log_dir)
        assert {run["state"] for run in runs} == {"success"}, describe_failures(env, runs)
        quiet = next(run["run_id"] for run in runs if run["run_id"].startswith("manual__"))
        task_logs_read_in_a_browser(
            services,
            airflow_home,
            {"backfill__2026-11-20T02:00:00+00:00": "batch over 1 hour(s)", quiet: "nothing new"},
        )
    assert_tables_match_oracle(spark, lakehouse)
    assert not cli.grade(cli.observe(lakehouse)).needs_action


def task_logs_read_in_a_browser(services, airflow_home, runs: dict[str, str]) -> None:
    """Silver's task log of each run, read in Chromium after logging in: short, the project's summary in view.

    ``runs``: run id -> a word of what silver's own line says for that run. Before the warm engine a
    silver task log had 673 lines, one of them the project's; the file now holds the task runner's
    lines and the project's, each task ending with its summary.
    """
    with AirflowBrowser(services.base_url, airflow_home) as browser:
        browser.log_in()
        for run_id, said in runs.items():
            log_file = next(
                (
                    airflow_home
                    / "logs"
                    / "dag_id=ysb_hourly"
                    / f"run_id={run_id}"
                    / "task_id=silver_ad_events"
                ).glob("attempt=*.log")
            )
            lines = log_file.read_text().splitlines()
            summary_at = next(
                i for i, line in enumerate(lines) if "silver_ad_events done: " in line
            )
            assert len(lines) < 60 and summary_at < 40, (
                f"{log_file}: {len(lines)} lines, the summary at line {summary_at + 1}"
            )
            page = browser.task_log_text(
                "ysb_hourly",
                run_id,
                "silver_ad_events",
                # The summary's headline: the job's own lines are in a group the UI folds.
                "silver.ad_events: ",
                screenshot=services.log_dir / f"{run_id.split('__')[0]}-silver-log.png",
            )
            own = [line for line in page.splitlines() if "silver.ad_events: " in line]
            assert any(said in line for line in own), (
                f"{run_id}: silver's own lines in the page: {own}\n{page[-3000:]}"
            )
            print(
                f"{run_id}: silver's log {len(lines)} lines, its summary at line {summary_at + 1}; in the browser: {own}"
            )
