"""Every table of the catalog, as the pipeline writes it, has its declared schema and partitioning."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import START, run_job, run_pipeline
from pyspark.testing import assertSchemaEqual

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours

TABLES = catalog.tables()


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory) -> Lakehouse:
    """A lakehouse after an incremental run of every task (an hour of generated data), a run of the sessions and their upstream (a late event), and maintenance."""
    lakehouse = Lakehouse(root=str(tmp_path_factory.mktemp("contract") / "lakehouse"))
    write_campaigns(lakehouse, seed=61)
    write_hours(lakehouse, START, 1, events_per_second=0.02, seed=61)
    Path(lakehouse.landing_events, f"{START:%Y-%m-%d/%H}", "bad.jsonl").write_text(
        "not json\n"
    )  # for the quarantine
    run_pipeline(lakehouse)
    # An event an hour behind the sessions query's watermark, in a later file: recorded as late.
    ad_id = Path(lakehouse.landing_campaigns).read_text().splitlines()[1].split(",")[0]
    late = {
        "event_id": "late-event-for-the-contract",
        "user_id": "u-late",
        "page_id": "p-1",
        "ad_id": ad_id,
        "ad_type": "banner",
        "event_type": "view",
        "event_time": str(int(START.timestamp() * 1000)),
        "ip_address": "10.0.0.1",
    }
    later = Path(lakehouse.landing_events, f"{START + timedelta(hours=1):%Y-%m-%d/%H}")
    later.mkdir(parents=True)
    (later / "late.jsonl").write_text(json.dumps(late) + "\n")
    run_pipeline(lakehouse, up_to="gold.user_sessions")
    run_job(
        "maintenance", lakehouse, "--table", "bronze.ad_events"
    )  # the writer of ops.table_maintenance
    return lakehouse


@pytest.mark.parametrize("declared", TABLES, ids=[t.name for t in TABLES])
def test_table_has_its_declared_schema_and_partitioning(spark, written, declared):
    path = written.table(declared.name).path
    data = spark.read.format("delta").load(path)
    assertSchemaEqual(data.schema, declared.spark_schema())
    assert (
        tuple(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().partitionColumns)
        == declared.partition_by
    )
    assert data.count() > 0, f"{declared.name} was not written: the contract checked nothing"
