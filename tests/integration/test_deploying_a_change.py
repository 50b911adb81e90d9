"""A deploy that changes a transform: status names exactly the periods the old code wrote, and
``lakehouse repair --stale`` recomputes exactly those, upstream first, and nothing else; one that
adds a column or partitions a table anew: the table's next run changes it in place.

The deployed code is a copy of the project's ``include/`` and ``jobs/`` with one edit, run by the
``lakehouse`` command and the jobs it starts as processes of their own: the code that computes
a table is the code whose version is recorded, as on a machine after a deploy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from helpers import (
    START,
    assert_gold_matches_oracle,
    assert_silver_matches_oracle,
    oracle,
    rows_of,
    run_job,
    table_version,
    tasks_up_to,
)

from lakehouse import catalog, code_versions, delta_log
from lakehouse.config import Lakehouse
from lakehouse.periods import Periods, parse_instant
from lakehouse_tools.generator import write_campaigns, write_hours

PROJECT = Path(__file__).resolve().parents[2]
RECOMPUTING = re.compile(r"recomputing (?P<task>\w+) \[(?P<start>\S+), (?P<end>\S+)\)")
HOURLY, AD_HOURLY, SILVER = "gold.campaign_hourly", "gold.ad_hourly", "silver.ad_events"
TABLES = (HOURLY, AD_HOURLY)
# The deployed fix: gold.campaign_hourly's CTR as a percentage (its own transform only: the daily
# table shares the ctr() helper, and stays as it was).
PERCENT_CTR = (
    '        F.when(F.col("views") > 0, F.col("clicks") / F.col("views") * 100).alias("ctr"),\n'
)


def deployed(tmp_path: Path, name: str, *edits: Callable[[Path], None]) -> Path:
    """A copy of the project's code with ``edits`` applied to its include/ folder."""
    root = tmp_path / name
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(PROJECT / "include", root / "include", ignore=skip)
    shutil.copytree(PROJECT / "jobs", root / "jobs", ignore=skip)
    for edit in edits:
        edit(root / "include")
    return root


def percent_ctr(include: Path) -> None:
    module = include / "lakehouse" / "tables" / "gold_campaign_hourly.py"
    text = module.read_text()
    transform = text.index("def campaign_hourly(")
    at = text.index("        ctr(),\n", transform)
    module.write_text(text[:at] + PERCENT_CTR + text[at + len("        ctr(),\n") :])


def silver_comment(include: Path) -> None:
    module = include / "lakehouse" / "tables" / "silver_ad_events.py"
    module.write_text(module.read_text() + "# deployed: a change to silver's code\n")


def lakehouse_command(code: Path, lakehouse: Lakehouse, *args: str) -> subprocess.CompletedProcess:
    """``lakehouse ARGS`` with the deployed ``code`` (and the jobs it starts: the same)."""
    env = {**os.environ, "PYTHONPATH": str(code / "include")}
    argv = [sys.executable, "-m", "lakehouse_tools.cli", *args, "--lakehouse-root", lakehouse.root]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)


def stale_of(code: Path, lakehouse: Lakehouse) -> dict[str, list[str]]:
    done = lakehouse_command(code, lakehouse, "status", "--json")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    found = json.loads(done.stdout)["stale_code"]
    return {name: [p["start"] for p in entry["periods"]] for name, entry in found.items()}


def repaired(code: Path, lakehouse: Lakehouse) -> list[tuple[str, list[str]]]:
    """Runs ``repair --stale``; the batch runs it made, in order: (task, the hours of its interval)."""
    done = lakehouse_command(code, lakehouse, "repair", "--stale")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    runs = []
    for match in RECOMPUTING.finditer(output):
        hours = Periods.between(parse_instant(match["start"]), parse_instant(match["end"]))
        runs.append((match["task"], hours.isoformats()))
    return runs


def written_hours(lakehouse: Lakehouse) -> dict[str, list[str]]:
    """The periods each table's runs recorded writing (the generator's late events reach back),
    labelled as status shows them (an hour, a day of a day table)."""
    found: dict[str, set] = {}
    for row in code_versions.written(lakehouse):
        label = catalog.get(row.table_name).grain.label(row.period_start)
        found.setdefault(row.table_name, set()).add(label)
    return {name: sorted(hours) for name, hours in found.items()}


def iso(hours: list[str]) -> list[str]:
    return [parse_instant(hour).isoformat() for hour in hours]


def percent_ctr_rows(lakehouse: Lakehouse) -> Counter:
    """The oracle's gold.campaign_hourly with the deployed CTR."""
    columns = catalog.get(HOURLY).column_names
    rows = oracle(lakehouse).rows(HOURLY)
    return Counter(
        tuple(
            (row["clicks"] / row["views"] * 100 if row["views"] else None) if c == "ctr" else row[c]
            for c in columns
        )
        for row in rows
    )


def test_a_deployed_fix_is_recomputed_where_the_old_code_wrote_and_nowhere_else(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=58)
    for hour in range(3):  # three hourly runs
        write_hours(lakehouse, START + timedelta(hours=hour), 1, events_per_second=0.05, seed=58)
        for entry in tasks_up_to(*TABLES):
            run_job(entry.task, lakehouse)
    assert code_versions.stale(lakehouse) == {}
    hours = written_hours(lakehouse)
    # the gold tables are one task's: each of its tables recorded its periods
    gold = [t.name for t in catalog.task_members(catalog.get(HOURLY))]
    assert sorted(hours) == sorted([SILVER, *gold])
    assert hours[HOURLY] == hours[SILVER]

    # A fix to gold.campaign_hourly's transform: its hours, and nothing else, are stale.
    fix = deployed(tmp_path, "fix", percent_ctr)
    assert stale_of(fix, lakehouse) == {HOURLY: hours[HOURLY]}
    versions = {name: table_version(spark, lakehouse, name) for name in hours if name != HOURLY}
    # the task of the gold tables, run over that table alone (--tables)
    assert [task for task, _ in repaired(fix, lakehouse)] == ["gold_aggregates"]
    assert rows_of(spark, lakehouse, HOURLY) == percent_ctr_rows(lakehouse)
    # Nothing else was rewritten: their Delta histories have no new version.
    assert {name: table_version(spark, lakehouse, name) for name in versions} == versions
    assert stale_of(fix, lakehouse) == {}

    # A change to silver's code: silver's hours and every downstream table's, recomputed upstream first.
    change = deployed(tmp_path, "silver", percent_ctr, silver_comment)
    assert stale_of(change, lakehouse) == hours
    runs = repaired(change, lakehouse)
    assert list(dict.fromkeys(task for task, _ in runs)) == ["silver_ad_events", "gold_aggregates"]
    for task, name in (("silver_ad_events", SILVER), ("gold_aggregates", HOURLY)):
        recomputed = sorted(h for t, run in runs if t == task for h in run)
        assert set(iso(hours[name])) <= set(recomputed), task
    expected = assert_silver_matches_oracle(spark, lakehouse)
    assert_gold_matches_oracle(spark, lakehouse, expected, names=(AD_HOURLY,))
    assert rows_of(spark, lakehouse, HOURLY) == percent_ctr_rows(lakehouse)
    assert stale_of(change, lakehouse) == {}
    # To the code this test process runs (before the deploy), the deployed hours are the stale ones.
    assert sorted(code_versions.stale(lakehouse)) == sorted(hours)

    # A full refresh of gold empties it: what wrote its periods is forgotten, silver's is kept.
    run_job("full_refresh", lakehouse, "--layer", "gold")
    assert sorted(written_hours(lakehouse)) == [SILVER]


def purchase_rate(include: Path) -> None:
    """A new nullable column at the end of gold.campaign_hourly, declared and computed."""
    module = include / "lakehouse" / "tables" / "gold_campaign_hourly.py"
    text = module.read_text()
    declared = "ctr DOUBLE, event_date DATE\n"
    computed = '        F.to_date("hour_start").alias("event_date"),\n    )\n'
    assert declared in text and computed in text
    text = text.replace(declared, "ctr DOUBLE, event_date DATE, purchase_rate DOUBLE\n", 1)
    rate = '        F.when(F.col("views") > 0, F.col("purchases") / F.col("views")).alias("purchase_rate"),\n'
    at = text.index(computed, text.index("def campaign_hourly("))  # not the shared helper's
    end = at + len(computed) - len("    )\n")
    module.write_text(text[:end] + rate + text[end:])


def without_ctr(include: Path) -> None:
    """gold.campaign_hourly's ctr column dropped (declaration and transform)."""
    module = include / "lakehouse" / "tables" / "gold_campaign_hourly.py"
    text = module.read_text().replace("ctr DOUBLE, ", "", 1)
    module.write_text(text.replace("        ctr(),\n", "", 1))


def run_deployed(code: Path, task: str, lakehouse: Lakehouse) -> subprocess.CompletedProcess:
    """The deployed ``code``'s incremental run of ``task``, in a driver of its own: the test's
    engine imports its Python from this checkout, not from the deployed copy (a real deploy
    replaces the files the engine reads; its next query imports them)."""
    local = {"LAKEHOUSE_ENGINE": "local", "LAKEHOUSE_METASTORE": "none"}  # tables read by path
    env = {**os.environ, "PYTHONPATH": str(code / "include"), **local}
    argv = [sys.executable, str(code / "jobs" / "run.py"), task, "--lakehouse-root", lakehouse.root]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)


def test_a_new_nullable_gold_column_is_added_in_place_and_a_dropped_one_refused(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=59)
    for hour in range(2):
        write_hours(lakehouse, START + timedelta(hours=hour), 1, events_per_second=0.05, seed=59)
        for entry in tasks_up_to(HOURLY):
            run_job(entry.task, lakehouse)
    before = set(written_hours(lakehouse)[HOURLY])

    # The deploy: a third hour lands and the new code's hourly run widens the table, no refresh.
    code = deployed(tmp_path, "rate", purchase_rate)
    write_hours(lakehouse, START + timedelta(hours=2), 1, events_per_second=0.05, seed=59)
    for entry in tasks_up_to(SILVER):
        run_job(entry.task, lakehouse)
    done = run_deployed(code, "gold_aggregates", lakehouse)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "column(s) purchase_rate added" in done.stderr
    live = spark.read.format("delta").load(lakehouse.table(HOURLY).path)
    assert live.columns[-1] == "purchase_rate"
    # The hours the old code wrote and the new run did not touch hold nulls, and are stale.
    stale = set(stale_of(code, lakehouse)[HOURLY])
    unfilled = {
        f"{row.hour_start:%Y-%m-%dT%H:00Z}"
        for row in live.filter("views > 0 AND purchase_rate IS NULL").collect()
    }
    assert stale and stale == unfilled and stale <= before

    # The user chose to fill them: repair --stale recomputes exactly those, with the column.
    runs = repaired(code, lakehouse)
    assert {task for task, _ in runs} == {"gold_aggregates"}
    assert sorted(h for _, hours in runs for h in hours) == iso(sorted(stale))
    rows = oracle(lakehouse).rows(HOURLY)
    columns = [*catalog.get(HOURLY).column_names, "purchase_rate"]
    expected = Counter(
        tuple(row[c] for c in columns[:-1])
        + ((row["purchases"] / row["views"]) if row["views"] else None,)
        for row in rows
    )
    live = spark.read.format("delta").load(lakehouse.table(HOURLY).path).select(*columns)
    assert Counter(tuple(row) for row in live.collect()) == expected
    assert stale_of(code, lakehouse) == {}

    # Dropping a column cannot be done in place: refused, nothing written.
    version = table_version(spark, lakehouse, HOURLY)
    refused = run_deployed(
        deployed(tmp_path, "drop", purchase_rate, without_ctr), "gold_aggregates", lakehouse
    )
    assert refused.returncode != 0
    assert "gold.campaign_hourly: its declared columns changed" in refused.stderr
    assert "the table has ctr DOUBLE" in refused.stderr and "full_refresh=gold" in refused.stderr
    assert table_version(spark, lakehouse, HOURLY) == version


HOUR_PARTITIONED = [
    spec.name
    for spec in catalog.task_members(catalog.get(HOURLY))
    if "hour_start" in spec.partition_by
]


def by_day(include: Path) -> None:
    """The hourly gold tables as they were before their hours were partitions: by event_date alone."""
    for name in HOUR_PARTITIONED:
        module = include / "lakehouse" / "tables" / f"{name.replace('.', '_')}.py"
        text = module.read_text()
        assert 'partition_by=["event_date", "hour_start"],' in text, name
        module.write_text(text.replace('["event_date", "hour_start"]', '["event_date"]', 1))
    kind = include / "lakehouse" / "write_kinds" / "replace_periods.py"
    text = kind.read_text()
    assert "Layout(partition_by=columns," in text
    kind.write_text(
        text.replace("Layout(partition_by=columns,", 'Layout(partition_by=("event_date",),')
    )


def test_gold_written_by_day_is_rewritten_by_hour_by_the_first_run_of_the_hour_partitions(
    spark, lakehouse, tmp_path, caplog
):
    write_campaigns(lakehouse, seed=61)
    write_hours(lakehouse, START, 2, events_per_second=0.05, seed=61)
    for entry in tasks_up_to(SILVER):
        run_job(entry.task, lakehouse)
    done = run_deployed(deployed(tmp_path, "by_day", by_day), "gold_aggregates", lakehouse)
    assert done.returncode == 0, done.stderr[-3000:]
    paths = {name: lakehouse.table(name).path for name in HOUR_PARTITIONED}
    assert {
        name: delta_log.partition_columns(path) for name, path in paths.items()
    } == dict.fromkeys(HOUR_PARTITIONED, ["event_date"])

    # The upgrade: the next hour's run of this code rewrites each table in its hour partitions first.
    write_hours(lakehouse, START + timedelta(hours=2), 1, events_per_second=0.05, seed=61)
    for entry in tasks_up_to(SILVER):
        run_job(entry.task, lakehouse)
    with caplog.at_level("INFO", logger="lakehouse"):
        run_job("gold_aggregates", lakehouse)
    for name in HOUR_PARTITIONED:
        assert f"{name}: rewritten partitioned by event_date, hour_start (was by event_date," in (
            caplog.text
        )
    assert {
        name: delta_log.partition_columns(path) for name, path in paths.items()
    } == dict.fromkeys(HOUR_PARTITIONED, ["event_date", "hour_start"])
    expected = assert_silver_matches_oracle(spark, lakehouse)
    gold = tuple(spec.name for spec in catalog.task_members(catalog.get(HOURLY)))
    assert_gold_matches_oracle(spark, lakehouse, expected, names=gold)
