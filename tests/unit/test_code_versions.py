"""Code versions: what a table's version is made of, and which periods an older version left stale."""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from lakehouse import catalog, code_versions
from lakehouse.catalog import code_version, own_version, used_code
from lakehouse.code_versions import Written, stale_periods

H0 = datetime(2026, 11, 20, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CURRENT = {spec.name: "new" for spec in code_versions.versioned_tables()}


def written(table: str, hour: int, version: str, whole: bool, at: int) -> Written:
    return Written(table, H0 + hour * HOUR, version, whole, T0 + at * HOUR)


def starts(found, table: str) -> list[int]:
    return [int((p.period_start - H0) / HOUR) for p in found.get(table, [])]


def test_a_table_s_code_is_its_module_and_what_it_uses_of_other_modules():
    kpis = "lakehouse.tables.gold_campaign_hourly."
    # gold.ad_hourly uses campaign_hourly's KPI helpers, not its transform: a change to
    # gold.campaign_hourly's own transform leaves gold.ad_hourly's version as it was
    assert sorted(used_code(catalog.get("gold.ad_hourly"))) == [
        "lakehouse.tables.gold_ad_hourly",
        *(kpis + name for name in ("count_of", "ctr", "event_counts", "hourly_kpis")),
    ]
    assert sorted(used_code(catalog.get("gold.campaign_hourly"))) == [kpis.rstrip(".")]
    silver = used_code(catalog.get("silver.ad_events"))
    assert silver["lakehouse.contract.EVENT_TYPES"] == repr(("view", "click", "purchase"))
    # a side table is what its writer's query makes
    assert code_version("silver.quarantine_ad_events") == code_version("silver.ad_events")


def test_a_declared_version_replaces_the_code_s_hash():
    spec = catalog.get("gold.campaign_hourly")
    assert own_version(replace(spec, version="3")) == "declared 3"
    assert own_version(spec) != own_version(replace(spec, version="3"))
    assert len(code_version(spec.name)) == catalog.VERSION_LENGTH


def test_only_periods_an_older_version_wrote_are_stale():
    records = [
        written("gold.campaign_hourly", 0, "old", True, 0),
        written("gold.campaign_hourly", 1, "old", True, 0),
        written("gold.campaign_hourly", 1, "new", True, 1),  # recomputed since: fresh
        written("gold.campaign_hourly", 2, "new", True, 1),
        written("gold.ad_hourly", 0, "new", True, 0),
    ]
    found = stale_periods(records, CURRENT)
    assert list(found) == ["gold.campaign_hourly"]
    assert starts(found, "gold.campaign_hourly") == [0]
    assert found["gold.campaign_hourly"][0].reason == "written by version old; the code is new now"


def test_rows_added_by_new_code_leave_an_older_period_stale_until_it_is_replaced_whole():
    records = [
        written("silver.ad_events", 0, "old", False, 0),
        written("silver.ad_events", 0, "new", False, 1),  # a micro-batch added rows: still mixed
        written("silver.ad_events", 1, "old", False, 0),
        written("silver.ad_events", 1, "new", True, 1),  # a backfill replaced it: fresh
        written("silver.ad_events", 2, "new", False, 1),
    ]
    assert starts(stale_periods(records, CURRENT), "silver.ad_events") == [0]


def test_a_stale_upstream_period_makes_its_downstream_periods_stale_at_their_grain():
    records = [
        written("silver.ad_events", 5, "old", False, 0),
        written("gold.campaign_hourly", 5, "new", True, 1),
        written("gold.campaign_daily", 0, "new", True, 1),
    ]
    found = stale_periods(records, CURRENT)
    # gold.ad_hourly has not computed hour 05 (no record): nothing of it is stale
    assert sorted(found) == ["gold.campaign_daily", "gold.campaign_hourly", "silver.ad_events"]
    assert starts(found, "gold.campaign_hourly") == [5]
    assert starts(found, "gold.campaign_daily") == [0]  # the day of hour 05
    assert found["gold.campaign_hourly"][0].reason == (
        "computed from silver.ad_events, stale at 2026-11-20T05:00Z"
    )


def test_records_say_whether_a_run_replaced_its_periods_whole():
    silver, gold = catalog.get("silver.ad_events"), catalog.get("gold.campaign_hourly")
    stream = code_versions.records(silver, [H0], batch=False, run="r", now=T0)
    assert stream == [
        {
            "table_name": "silver.ad_events",
            "period_start": H0,
            "grain": "hour",
            "code_version": code_version("silver.ad_events"),
            "whole": False,
            "written_at": T0,
            "airflow_run_id": "r",
        }
    ]
    assert code_versions.records(silver, [H0], batch=True, run=None, now=T0)[0]["whole"]
    assert code_versions.records(gold, [H0], batch=False, run=None, now=T0)[0]["whole"]


def _versions_of(tmp_path, body: str, spec) -> tuple[str, str]:
    """(own version, own version with version="2") of ``spec`` with its transform defined as
    ``body`` in a module of its own, always the same module name (as a table module is)."""
    import importlib.util

    folder = tmp_path / str(len(list(tmp_path.iterdir())))
    folder.mkdir()
    path = folder / "probe_table.py"
    path.write_text(f"def transform(rows):\n{body}")
    loaded = importlib.util.spec_from_file_location("probe_table", path)
    module = importlib.util.module_from_spec(loaded)
    sys.modules["probe_table"] = module
    try:
        loaded.loader.exec_module(module)
        spec = replace(spec, transform=module.transform)
        return own_version(spec), own_version(replace(spec, version="2"))
    finally:
        del sys.modules["probe_table"]


def test_a_refactor_keeps_a_declared_version_and_changes_an_undeclared_one(tmp_path):
    spec = catalog.get("gold.campaign_hourly")
    before = _versions_of(tmp_path, "    return rows.where('views > 0')\n", spec)
    same = _versions_of(tmp_path, "    return rows.where('views > 0')\n", spec)
    after = _versions_of(tmp_path, "    kept = 'views > 0'\n    return rows.where(kept)\n", spec)
    assert before == same
    assert before[0] != after[0]  # the code's hash follows the refactor
    assert before[1] == after[1] == "declared 2"  # the declared version does not


def test_preflight_notes_what_older_code_wrote_and_what_recomputes_it(tmp_path):
    import pyarrow as pa

    from lakehouse import object_storage
    from lakehouse.config import Lakehouse
    from lakehouse_airflow.preflight import stale_note

    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    assert stale_note(lakehouse) is None  # nothing recorded yet
    silver = catalog.get("silver.ad_events")
    records = lakehouse.table(code_versions.RECORDS).path
    rows = code_versions.records(silver, [H0, H0 + HOUR], batch=True, run="r", now=T0)
    object_storage.write_delta(records, pa.Table.from_pylist(rows), mode="append")
    assert stale_note(lakehouse) is None  # today's code replaced both hours
    # Then a worker still on an older deploy added rows to hour 00.
    older = {**rows[0], "code_version": "0ld", "whole": False, "written_at": T0 + HOUR}
    object_storage.write_delta(records, pa.Table.from_pylist([older]), mode="append")
    assert stale_note(lakehouse) == (
        "1 period(s) of 1 table(s) were written by older code (silver.ad_events: 1): `lakehouse "
        "repair --stale`, or a run of the ysb_repair_stale DAG, recomputes them "
        "(docs/operations.md, Deploying a change)."
    )
