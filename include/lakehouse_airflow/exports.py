"""One event hour of a gold table as a CSV report in the lakehouse's outbox, for a BI tool.

Read with delta-rs (no JVM) and written atomically, so a reader never sees half a report and a
re-run for a late hour replaces the report of that hour. An hour without rows (all of its
events replaced away) is a report with the header only: the hour is now empty.

No Spark here; nothing is read when the DAG file is parsed.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

from lakehouse.config import Lakehouse

# The consumer's partition key: StartOfHourMapper's output for an hour the producer published.
HOUR_KEY_FORMAT = "%Y-%m-%dT%H"


def hour_of_key(key: str) -> datetime:
    """The event hour (UTC) a consumer run's partition key names, e.g. ``2026-11-20T02``."""
    try:
        return datetime.strptime(key, HOUR_KEY_FORMAT).replace(tzinfo=UTC)
    except (TypeError, ValueError):
        raise ValueError(
            f"partition key {key!r} is not an event hour ({HOUR_KEY_FORMAT}, e.g. 2026-11-20T02): "
            "this DAG runs from the hour partitions of its gold table, not by hand without one"
        ) from None


def report_path(lakehouse: Lakehouse, table: str, hour: datetime) -> str:
    """Where the report of ``table``'s ``hour`` goes: ``<root>/outbox/<table>/<hour>.csv``."""
    return f"{lakehouse.root}/outbox/{table}/{hour:{HOUR_KEY_FORMAT}}.csv"


def export_hour(lakehouse: Lakehouse, table: str, key: str) -> dict:
    """Write the rows of ``table`` (partitioned by ``event_date``, keyed by ``hour_start``) for the
    hour ``key`` names to its report; what was written, for the task's XCom."""
    import pyarrow.csv as csv
    import pyarrow.dataset as ds

    from lakehouse.files import write_atomic
    from lakehouse.object_storage import delta_table

    hour = hour_of_key(key)
    rows = (
        delta_table(lakehouse.table(table).path)
        .to_pyarrow_dataset()
        .to_table(filter=(ds.field("event_date") == hour.date()) & (ds.field("hour_start") == hour))
        .sort_by([("campaign_id", "ascending")])
    )
    text = io.BytesIO()
    csv.write_csv(rows, text)
    path = report_path(lakehouse, table, hour)
    write_atomic(path, text.getvalue().decode("utf-8"))
    return {"table": table, "hour": hour.isoformat(), "rows": rows.num_rows, "report": path}
