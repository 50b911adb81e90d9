"""One event period of a gold table (an hour, or a day of a day table) as a CSV report in the
lakehouse's outbox, for a BI tool.

Read with delta-rs (no JVM) and written atomically, so a reader never sees half a report and a
re-run for a late period replaces its report. A period without rows (all of its events replaced
away) is a report with the header only: the period is now empty.

No Spark here; nothing is read when the DAG file is parsed.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

from lakehouse import catalog
from lakehouse.catalog import Grain
from lakehouse.config import Lakehouse

# A consumer run's partition key per grain: StartOfHourMapper's output for an hour the producer
# published, and a day table's own day key (StartOfDayMapper's output).
KEY_FORMATS = {Grain.HOUR: "%Y-%m-%dT%H", Grain.DAY: "%Y-%m-%d"}
HOUR_KEY_FORMAT = KEY_FORMATS[Grain.HOUR]


def period_of_key(key: str, grain: Grain = Grain.HOUR) -> datetime:
    """The start (UTC) of the period a consumer run's partition key names, e.g. ``2026-11-20T02``."""
    try:
        return datetime.strptime(key, KEY_FORMATS[grain]).replace(tzinfo=UTC)
    except (TypeError, ValueError):
        example = datetime(2026, 11, 20, 2).strftime(KEY_FORMATS[grain])
        raise ValueError(
            f"partition key {key!r} is not an event {grain.value} ({KEY_FORMATS[grain]}, e.g. "
            f"{example}): this DAG runs from the {grain.value} partitions of its gold table, not by "
            "hand without one"
        ) from None


def hour_of_key(key: str) -> datetime:
    """The event hour (UTC) a consumer run's partition key names, e.g. ``2026-11-20T02``."""
    return period_of_key(key, Grain.HOUR)


def report_path(
    lakehouse: Lakehouse, table: str, start: datetime, grain: Grain = Grain.HOUR
) -> str:
    """Where the report of ``table``'s period goes: ``<root>/outbox/<table>/<period>.csv``."""
    return f"{lakehouse.root}/outbox/{table}/{start:{KEY_FORMATS[grain]}}.csv"


def export_period(lakehouse: Lakehouse, table: str, key: str) -> dict:
    """Write the rows of ``table`` (partitioned by ``event_date``) for the period ``key`` names, in
    the table's grain, to its report; what was written, for the task's XCom."""
    import pyarrow.csv as csv
    import pyarrow.dataset as ds

    from lakehouse.files import write_atomic
    from lakehouse.object_storage import read_delta

    grain = catalog.get(table).grain
    start = period_of_key(key, grain)
    # The period's date partition by delta-rs's own scan (lakehouse.object_storage.read_delta
    # says why not an Arrow dataset), then its hour.
    rows = read_delta(lakehouse.table(table).path, predicate=f"event_date = '{start.date()}'")
    if grain is Grain.HOUR:
        rows = rows.filter(ds.field("hour_start") == start)
    rows = rows.sort_by([("campaign_id", "ascending")])
    text = io.BytesIO()
    csv.write_csv(rows, text)
    path = report_path(lakehouse, table, start, grain)
    write_atomic(path, text.getvalue().decode("utf-8"))
    return {"table": table, grain.value: start.isoformat(), "rows": rows.num_rows, "report": path}


def export_dag(dag_id: str, mapper, doc_md: str):
    """The DAG that writes a report of its table (``assets.PARTITION_CONSUMERS[dag_id]``) for each
    period its asset events name: scheduled by the table's partitions (``mapper`` makes the
    producer's key this DAG's), one task, which names the table as its inlet (the Asset's page
    lists it as a consuming task)."""
    import pendulum
    from airflow.sdk import DAG, PartitionedAssetTimetable, task

    from lakehouse_airflow.assets import PARTITION_CONSUMERS, asset

    table = PARTITION_CONSUMERS[dag_id]
    with DAG(
        dag_id=dag_id,
        schedule=PartitionedAssetTimetable(
            assets=asset(catalog.get(table)), default_partition_mapper=mapper
        ),
        start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
        catchup=False,
        doc_md=doc_md,
        tags=["ysb", "lakehouse", "export"],
    ) as dag:

        @task(task_id=f"export_{table.split('.')[1]}", inlets=[asset(catalog.get(table))])
        def export(dag_run=None) -> dict:
            """The run's period of the table as a CSV report in the outbox."""
            return export_period(Lakehouse.from_env(), table, dag_run.partition_key)

        export()
    return dag


def export_hour(lakehouse: Lakehouse, table: str, key: str) -> dict:
    """:func:`export_period` of an hour table's hour ``key``."""
    return export_period(lakehouse, table, key)
