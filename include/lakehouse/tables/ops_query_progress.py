"""ops.query_progress: one row per micro-batch of every streaming query (Spark's progress report, kept)."""

from lakehouse.catalog import Retention, ops_table

SCHEMA = (
    "table_name STRING NOT NULL, query_id STRING NOT NULL, query_run_id STRING, batch_id BIGINT NOT NULL, "
    "batch_started_at TIMESTAMP, airflow_run_id STRING, airflow_try INT, input_rows BIGINT, "
    "input_rows_per_second DOUBLE, processed_rows_per_second DOUBLE, duration_ms MAP<STRING, BIGINT>, "
    "source_start_offset STRING, source_end_offset STRING, watermark TIMESTAMP, state_rows BIGINT, "
    "state_memory_bytes BIGINT, rows_dropped_by_watermark BIGINT, table_version BIGINT"
)

ops_table(
    "ops.query_progress",
    operation="every streaming query",
    schema=SCHEMA,
    retention=Retention("batch_started_at", days=30),
)
