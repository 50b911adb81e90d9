"""OPTIMIZE and VACUUM under running streams: a lagging reader keeps every file it still needs."""

from __future__ import annotations

from datetime import timedelta

from helpers import START, assert_silver_matches_oracle, run_job, table
from pyspark.sql import functions as F

from lakehouse import delta_log
from lakehouse.maintenance import reader_position
from lakehouse_tools.generator import write_campaigns, write_hours

UP_TO_SILVER = (
    "dim_campaigns",
    "bronze_ad_events",
    "silver_ad_events",
)  # gold reads silver as silver reads bronze


def run_to_silver(lakehouse) -> None:
    for task in UP_TO_SILVER:
        run_job(task, lakehouse)


def test_maintenance_compacts_and_vacuums_without_breaking_a_lagging_stream(spark, lakehouse):
    write_campaigns(lakehouse, seed=41)
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=41)
    run_to_silver(lakehouse)
    bronze = lakehouse.table("bronze.ad_events").path
    # Silver stops here; bronze goes on with two more hours, one run each (small files).
    silver_reads_from = reader_position(
        lakehouse.table("silver.ad_events").checkpoint(), delta_log.table_id(bronze)
    )
    assert silver_reads_from == delta_log.latest_version(bronze) + 1
    for hour in (1, 2):
        write_hours(lakehouse, START + timedelta(hours=hour), 1, events_per_second=0.05, seed=41)
        run_job("bronze_ad_events", lakehouse)
    assert delta_log.latest_version(bronze) >= silver_reads_from + 1

    # Asked to keep nothing: OPTIMIZE removes the files silver has not read yet, VACUUM must keep them.
    optimized, vacuumed = run_job(
        "maintenance", lakehouse, "--table", "bronze.ad_events", "--retain-hours", "0"
    )
    assert optimized["files_after"] < optimized["files_before"]
    assert (vacuumed["needed_by"], vacuumed["oldest_needed_version"]) == (
        "silver.ad_events",
        silver_reads_from,
    )
    # Silver's version is seconds old: a whole hour, and the margin.
    assert vacuumed["retention_hours"] == 2 and vacuumed["files_deleted"] == 0, vacuumed
    # What the retention asked for would have deleted: the files silver is about to read.
    unchecked = {
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    }
    for key, value in unchecked.items():
        spark.conf.set(key, value)
    try:
        at_risk = spark.sql(f"VACUUM delta.`{bronze}` RETAIN 0 HOURS DRY RUN").count()
    finally:
        for key in unchecked:
            spark.conf.unset(key)
    assert at_risk > 0

    # The lagging stream reads the compacted table: every line and event once, as the oracle says.
    run_to_silver(lakehouse)
    assert_silver_matches_oracle(spark, lakehouse)

    # Now no reader lags: the retention asked for holds and the removed files go.
    optimized, vacuumed = run_job(
        "maintenance", lakehouse, "--table", "bronze.ad_events", "--retain-hours", "0"
    )
    assert (vacuumed["needed_by"], vacuumed["retention_hours"]) == (None, 0)
    assert (
        vacuumed["files_deleted"] == at_risk
        and optimized["files_after"] == optimized["files_before"]
    ), (optimized, vacuumed)

    # A stream keeps working after its files were vacuumed: the next hour flows through.
    write_hours(lakehouse, START + timedelta(hours=3), 1, events_per_second=0.05, seed=41)
    run_to_silver(lakehouse)
    assert_silver_matches_oracle(spark, lakehouse)

    # Compaction and vacuum commits are no news for a reader: the next run with nothing new starts no query.
    run_job("maintenance", lakehouse, "--table", "bronze.ad_events", "--retain-hours", "0")
    assert "change no data" in run_job("silver_ad_events", lakehouse)["not_started"]

    records = table(spark, lakehouse, "ops.table_maintenance").orderBy("started_at")
    assert [(r.table_name, r.operation) for r in records.collect()] == [
        ("bronze.ad_events", op) for op in ("optimize", "vacuum") * 3
    ]
    assert records.filter(F.col("operation") == "vacuum").select("retention_hours").collect() == [
        (2,),
        (0,),
        (0,),
    ]
