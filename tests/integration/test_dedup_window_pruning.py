"""Silver's ±24 h duplicate window is read by partition pruning alone: a batch's MERGE skips every
file of silver outside the event hours its rows can share a key with, however long silver is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

from helpers import run_job, view_line

from lakehouse import catalog
from lakehouse.periods import Periods
from lakehouse_tools.generator import campaign_dimension, write_campaigns

START = datetime(2026, 11, 1, tzinfo=UTC)


def _land(lakehouse, hour: int, ad: str) -> None:
    moment = START + timedelta(hours=hour)
    path = Path(lakehouse.landing_events) / f"{moment:%Y-%m-%d/%H}" / "part-0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    millis = int((moment + timedelta(minutes=1)).timestamp() * 1000)
    path.write_text(view_line(f"e-{hour}", ad, millis) + "\n")


def _window_files(spark, lakehouse, hour: int) -> list[str]:
    """The silver files a batch of event hour ``hour`` reads for its keys: those its MERGE
    condition's target predicate (the hour widened by the key window) selects."""
    silver = lakehouse.table("silver.ad_events")
    window = Periods.of([(START + timedelta(hours=hour)).replace(tzinfo=None)]).widened(
        silver.spec.key_window_hours
    )
    frame = spark.read.format("delta").load(silver.path)
    return sorted(
        Path(unquote(urlsplit(f).path)).relative_to(silver.path).parent.as_posix()
        for f in frame.filter(silver.spec.periods_predicate(window)).inputFiles()
    )


def test_a_batch_merge_reads_only_silver_files_within_its_key_window(spark, lakehouse):
    write_campaigns(lakehouse, seed=61)
    ad = campaign_dimension(61)[0][0]
    run_job("dim_campaigns", lakehouse)
    for hour in (0, 1, 2):  # three days of silver, one file an hour
        _land(lakehouse, hour * 24, ad)
        run_job("bronze_ad_events", lakehouse)
        run_job("silver_ad_events", lakehouse)
    # Hour 48's window is hours 24..72: of silver's three files, hour 0's is left out by its
    # partition values alone (the predicate names only event_date and event_hour).
    assert _window_files(spark, lakehouse, 48) == [
        "event_date=2026-11-02/event_hour=0",
        "event_date=2026-11-03/event_hour=0",
    ]
    assert set(silver_predicate_columns()) <= set(SILVER_PARTITIONS)


SILVER_PARTITIONS = catalog.get("silver.ad_events").partition_by


def silver_predicate_columns() -> list[str]:
    """The columns silver's period predicate names (a day and a lone hour of it)."""
    import re

    spec = catalog.get("silver.ad_events")
    hours = Periods.of([datetime(2026, 11, 1, 5)]).widened(spec.key_window_hours)
    return sorted(set(re.findall(r"\b(event_\w+)\s*(?:=|IN)", spec.periods_predicate(hours))))
