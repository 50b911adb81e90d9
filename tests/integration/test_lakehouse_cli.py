"""The `lakehouse` command (no JVM) on tables written by the real pipeline, against the plain-Python oracle."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import START, oracle, run_pipeline

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours
from lakehouse_tools.oracle import expected_from_landing

HOURS = 2
# Installed by `make venv` beside the interpreter that runs the tests.
COMMAND = Path(sys.executable).parent / "lakehouse"


def lakehouse_command(
    lakehouse: Lakehouse, *args: str, columns: int | None = None
) -> subprocess.CompletedProcess:
    """The command's output to a pipe, or, with ``columns``, as to a terminal that wide."""
    assert COMMAND.exists(), f"{COMMAND} is missing: run `make venv`"
    env = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
    return subprocess.run(
        [str(COMMAND), *args, "--lakehouse-root", lakehouse.root],
        capture_output=True,
        text=True,
        timeout=120,
        env=env if columns is None else {**env, "COLUMNS": str(columns)},
    )


def status(lakehouse: Lakehouse, *args: str) -> tuple[int, dict]:
    done = lakehouse_command(lakehouse, "status", "--json", *args)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def written(request, tmp_path_factory) -> Lakehouse:
    """Two producer hours (late events, duplicates, bad lines) through one incremental run of every task."""
    from lakehouse.spark import engine as engine_kind

    if (
        engine_kind() == "connect"
    ):  # a module fixture is set up before the per-test one that starts it
        request.getfixturevalue("engine")
    lakehouse = Lakehouse(root=str(tmp_path_factory.mktemp("cli") / "lakehouse"))
    # Seed 17: every event hour holds a view. (With seed 16 since the generator's bursts, an hour of
    # late clicks only has no campaign_windows row, which the grid flags as missing: a false alarm.)
    write_campaigns(lakehouse, seed=17)
    write_hours(lakehouse, START, HOURS, events_per_second=0.05, seed=17, files_per_hour=2)
    run_pipeline(lakehouse)
    return lakehouse


def hour_key(moment) -> str:
    return f"{moment:%Y-%m-%dT%H}:00:00Z"


def test_status_counts_every_hour_as_the_oracle_does(written):
    code, grid = status(written)
    assert code == 0 and grid["needs_action"] == []
    by_hour = {row["hour"]: row for row in grid["hours"]}
    assert {row["state"] for row in grid["hours"]} == {"complete"}

    # Producer hours: the oracle over each landing folder alone (the generator keeps a duplicate
    # in the hour of its original, so duplicates are per folder too).
    for offset in range(HOURS):
        hour = START + timedelta(hours=offset)
        expected = expected_from_landing(
            Path(written.landing_events, f"{hour:%Y-%m-%d/%H}"), written.landing_campaigns
        )
        counts = by_hour[hour_key(hour)]["counts"]
        assert (counts["landed"], counts["bronze.ad_events"]) == (expected.lines, expected.lines)
        assert counts["silver.quarantine_ad_events"] == sum(expected.quarantined.values())
        assert counts["duplicates"] == expected.duplicates
    whole = oracle(written)
    assert sum(row["counts"]["duplicates"] for row in grid["hours"]) == whole.duplicates > 0

    # Event hours (late events fall before the first producer hour): silver and every gold table.
    silver = Counter(
        hour_key(datetime.fromtimestamp(e["millis"] // 1000, UTC)) for e in whole.events.values()
    )
    period_tables = [
        t for t in catalog.batch_tables() if t.layer == "gold" and t.flow.layout(t.grain)
    ]
    hour_tables = [t for t in period_tables if t.grain is catalog.Grain.HOUR]
    gold = {
        t.name: Counter(hour_key(row["hour_start"]) for row in whole.rows(t.name))
        for t in hour_tables
    }
    assert set(by_hour) == set(silver) | {
        hour_key(START + timedelta(hours=i)) for i in range(HOURS)
    }
    for hour, row in by_hour.items():
        assert row["counts"]["silver.ad_events"] == silver[hour], hour
        for name, expected in gold.items():
            assert row["counts"][name] == expected[hour], (name, hour)
    # A day table is judged per UTC day (never as hours), its rows against the oracle's days.
    days = {row["day"]: row for row in grid["days"]}
    assert {row["state"] for row in grid["days"]} <= {"complete"}
    for spec in (t for t in period_tables if t.grain is catalog.Grain.DAY):
        expected_days = Counter(f"{row['event_date']:%Y-%m-%d}" for row in whole.rows(spec.name))
        assert {day: row["counts"][spec.name] for day, row in days.items()} == expected_days
    assert set(grid["tables"]) == {t.name for t in catalog.tables()}
    # Every table the hourly runs write has a last write; maintenance's records wait for maintenance.
    assert {name for name, write in grid["tables"].items() if write is None} == {
        "ops.table_maintenance"
    }
    assert all(write["version"] >= 0 for write in grid["tables"].values() if write)


def test_query_gives_exactly_the_oracle_rows(written):
    done = lakehouse_command(
        written,
        "query",
        "--json",
        "select campaign_id, strftime(hour_start, '%Y-%m-%dT%H') as hour, views, clicks, purchases, distinct_users "
        "from gold.campaign_hourly",
    )
    assert done.returncode == 0, done.stderr
    actual = Counter(tuple(row.values()) for row in json.loads(done.stdout))
    expected = Counter(
        (
            r["campaign_id"],
            f"{r['hour_start']:%Y-%m-%dT%H}",
            r["views"],
            r["clicks"],
            r["purchases"],
            r["distinct_users"],
        )
        for r in oracle(written).rows("gold.campaign_hourly")
    )
    assert actual == expected

    whole = oracle(written)
    text = lakehouse_command(written, "query", "select count(*) as events from silver.ad_events")
    assert text.returncode == 0 and text.stdout.splitlines() == [
        "  events",
        "--------",
        f"{len(whole.events):>8}",
        "(1 row)",
    ]
    missing = lakehouse_command(written, "query", "select * from gold.no_such_table")
    assert missing.returncode == 2 and "gold.campaign_hourly" in missing.stderr


def test_a_new_hour_is_pending_and_a_deleted_gold_hour_is_missing_and_repaired_by_one_backfill(
    spark, written, tmp_path
):
    copy = Lakehouse(root=str(tmp_path / "lakehouse"))
    shutil.copytree(written.root, copy.root)
    new_hour = START + timedelta(hours=HOURS)
    write_hours(copy, new_hour, 1, events_per_second=0.05, seed=17, files_per_hour=2)
    code, grid = status(copy)
    states = {row["hour"]: row["state"] for row in grid["hours"]}
    assert code == 0 and states[hour_key(new_hour)] == "pending"

    # Deleted the way an operator might, with deletion vectors on (which Arrow datasets cannot
    # apply: the command then reads through delta-rs's own scan): one hour whole (its partition's
    # files go) and a row of another hour from a file that keeps others (a deletion vector).
    damaged, thinned = START + timedelta(hours=1), START
    gold = copy.table("gold.campaign_hourly").path
    spark.sql(
        f"ALTER TABLE delta.`{gold}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(
        f"DELETE FROM delta.`{gold}` WHERE hour_start = timestamp'{damaged:%Y-%m-%d %H:00:00}+00:00'"
    )
    row = (
        spark.sql(
            f"SELECT campaign_id, count(*) OVER (PARTITION BY _metadata.file_path) AS in_file "
            f"FROM delta.`{gold}` WHERE hour_start = timestamp'{thinned:%Y-%m-%d %H:00:00}+00:00'"
        )
        .where("in_file > 1 AND campaign_id IS NOT NULL")
        .first()
    )
    spark.sql(
        f"DELETE FROM delta.`{gold}` WHERE hour_start = timestamp'{thinned:%Y-%m-%d %H:00:00}+00:00' "
        f"AND campaign_id = '{row.campaign_id}'"
    )
    assert list(Path(gold).rglob("deletion_vector_*.bin")), (
        "the delete wrote no deletion vector: the test checks less than it says"
    )
    code, after = status(copy)
    assert code == 1 and after["needs_action"] == [hour_key(damaged)]
    assert {row["hour"]: row["state"] for row in after["hours"]} == {
        **states,
        hour_key(damaged): "missing",
    }
    counts = {row["hour"]: row["counts"]["gold.campaign_hourly"] for row in after["hours"]}
    before = {row["hour"]: row["counts"]["gold.campaign_hourly"] for row in grid["hours"]}
    assert before[hour_key(damaged)] > 0
    assert counts == {
        **before,
        hour_key(damaged): 0,
        hour_key(thinned): before[hour_key(thinned)] - 1,
    }

    plan = lakehouse_command(copy, "repair", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    owner = f"{damaged + timedelta(hours=1):%Y-%m-%dT%H:%M:%S}+00:00"  # the run at H+1h owns hour H
    assert plan.stdout.splitlines() == [
        "would run: airflow backfill create --dag-id ysb_hourly --reprocess-behavior completed "
        f"--from-date {owner} --to-date {owner}"
    ]
    text = lakehouse_command(copy, "status")
    assert (
        text.returncode == 1
        and f"{damaged:%Y-%m-%d %H}:00 missing: gold.campaign_hourly has no row" in text.stdout
    )


def test_query_shows_50_rows_cut_to_the_terminal_unless_told_otherwise(written):
    events = len(oracle(written).events)
    assert events > 50, "the test needs more rows than the default limit"
    every_column = "select * from silver.ad_events order by event_id"
    shown = lakehouse_command(written, "query", every_column, columns=100)
    assert shown.returncode == 0, shown.stderr
    *table, footer, hidden = shown.stdout.splitlines()
    assert len(table) == 2 + 50 and max(len(line) for line in shown.stdout.splitlines()[:-2]) <= 100
    assert footer == "(50 rows shown; more exist: --limit N shows N, --all every row)"
    columns = catalog.get("silver.ad_events").column_names
    left_out = columns[len(table[0].split()) :]
    assert hidden == (
        f"({len(left_out)} more columns did not fit: {', '.join(left_out)}; "
        "select fewer columns, or --json)"
    )

    ids = "select event_id from silver.ad_events order by event_id"
    expected = sorted(oracle(written).events)
    three = lakehouse_command(written, "query", ids, "--limit", "3", columns=100)
    assert three.stdout.splitlines() == [
        "event_id",
        "-" * max(len("event_id") + 2, *map(len, expected[:3])),
        *expected[:3],
        "(3 rows shown; more exist: --limit N shows N, --all every row)",
    ]
    every = lakehouse_command(written, "query", ids, "--all")
    assert every.stdout.splitlines()[2:] == [*expected, f"({events} rows)"]
    as_json = lakehouse_command(written, "query", "--json", ids)
    assert [row["event_id"] for row in json.loads(as_json.stdout)] == expected
    bad = lakehouse_command(written, "query", ids, "--limit", "0")
    assert bad.returncode == 2 and "not a number of rows: '0' (e.g. --limit 200)" in bad.stderr


def test_the_hours_a_replace_covered_are_read_from_the_predicate_spark_recorded(written):
    from deltalake import DeltaTable

    from lakehouse_tools.observe import hours_replaced

    silver_hours = {
        datetime.fromtimestamp(e["millis"] // 1000, UTC).replace(minute=0, second=0, tzinfo=None)
        for e in oracle(written).events.values()
    }
    gold = DeltaTable(written.table("gold.campaign_hourly").path)
    # The incremental run replaced every hour silver got rows for (each in one commit or another).
    assert set(hours_replaced(gold, silver_hours)) == silver_hours
    later = max(silver_hours) + timedelta(hours=5)
    assert hours_replaced(gold, {later}) == {}
