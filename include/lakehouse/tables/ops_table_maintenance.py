"""ops.table_maintenance: what each compaction (OPTIMIZE) and clean-up (VACUUM) of a table did."""

from lakehouse.catalog import Retention, ops_table

SCHEMA = (
    "table_name STRING NOT NULL, operation STRING NOT NULL, started_at TIMESTAMP NOT NULL, seconds DOUBLE, "
    "files_before BIGINT, files_after BIGINT, bytes_before BIGINT, bytes_after BIGINT, files_deleted BIGINT, "
    "retention_hours BIGINT, oldest_needed_version BIGINT, needed_by STRING, table_version BIGINT, run_id STRING, rows_deleted BIGINT"
)

ops_table(
    "ops.table_maintenance",
    operation="maintenance",
    schema=SCHEMA,
    retention=Retention("started_at", days=90),
)
