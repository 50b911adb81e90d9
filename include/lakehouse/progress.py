"""What each micro-batch of a streaming query did, kept in ``ops.query_progress``.

Spark reports a progress object per micro-batch (rows, rates, phase durations, source offsets,
watermark, state); it lives in the driver's memory and is gone with it. After a query stops, its
batches' reports are appended to the ops table, with the Airflow run that ran it and the Delta
version each batch committed to the query's own table, so "what did the 14:00 run do, and which
version did it write" is a query, not a log search. A run appends its rows once, after its query
has stopped; a retried task runs the query again, which finds those batches done and reports none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import SparkSession

from lakehouse import delta_log
from lakehouse.config import Lakehouse, Table
from lakehouse.runtime.job_args import airflow_run
from lakehouse.sinks import append_records, ensure_table, with_conflict_retries

PROGRESS_TABLE = "ops.query_progress"


@dataclass(frozen=True)
class ProgressLog:
    """The session that creates the progress table, and the lakehouse it is in (rows go by delta-rs)."""

    spark: SparkSession
    lakehouse: Lakehouse

    def record(
        self, name: str, query_id: str, progress: list, target: Table, app_id: str | None
    ) -> int:
        """Append one row per report in ``progress`` (batches that ran); the number of rows written.

        ``target`` and ``app_id``: the query's own table and its writes' transaction app id (None:
        the Delta streaming sink's, the query id), to find the version each batch committed.
        """
        if not progress:
            return 0
        versions = delta_log.versions_of_txns(
            target.path, app_id or query_id, {p.batchId for p in progress}
        )
        rows = [_row(name, query_id, p, versions.get(p.batchId)) for p in progress]
        table = self.lakehouse.table(PROGRESS_TABLE)
        # Several queries report at once (the gold tasks): their first creation of the table may conflict.
        with_conflict_retries(lambda: ensure_table(self.spark, table), f"{PROGRESS_TABLE} creation")
        append_records(rows, table)  # nothing replays it (see above): no transaction id
        return len(rows)


def _row(name: str, query_id: str, p, version: int | None) -> dict:
    source = p.sources[0] if p.sources else None
    states = p.stateOperators or []
    watermark = (p.eventTime or {}).get("watermark")
    airflow_run_id, airflow_try = airflow_run()
    return {
        "table_name": name,
        "query_id": query_id,
        "query_run_id": str(p.runId),
        "batch_id": p.batchId,
        "batch_started_at": _instant(p.timestamp),
        "airflow_run_id": airflow_run_id,
        "airflow_try": airflow_try,
        "input_rows": p.numInputRows,
        "input_rows_per_second": _number(p.inputRowsPerSecond),
        "processed_rows_per_second": _number(p.processedRowsPerSecond),
        "duration_ms": {k: int(v) for k, v in (p.durationMs or {}).items()},
        "source_start_offset": source and _text(source.startOffset),
        "source_end_offset": source and _text(source.endOffset),
        "watermark": _instant(watermark)
        if states and not watermark.startswith("1970-01-01T00:00:00")
        else None,  # none yet
        "state_rows": sum(op.numRowsTotal for op in states) if states else None,
        "state_memory_bytes": sum(op.memoryUsedBytes for op in states) if states else None,
        "rows_dropped_by_watermark": sum(op.numRowsDroppedByWatermark for op in states)
        if states
        else None,
        "table_version": version,
    }


def _instant(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _number(value) -> float | None:
    return (
        None if value is None or value != value else float(value)
    )  # NaN when a batch took no time


def _text(offset) -> str | None:
    import json

    return offset if offset is None or isinstance(offset, str) else json.dumps(offset)
