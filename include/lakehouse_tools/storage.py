"""The catalog's Delta tables read without a JVM: delta-rs opens them, DuckDB queries them.

Tables are read by delta-rs (the ``deltalake`` package) as Arrow datasets and queried by DuckDB
(its own ``delta`` extension would be downloaded at run time; Arrow needs nothing), under the
names of the catalog (``lakehouse.catalog``): ``gold.campaign_hourly``, ``silver.ad_events``, ...
Used by the ``lakehouse`` command (:mod:`lakehouse_tools.cli`) and by the rollback.
"""

from __future__ import annotations

from datetime import UTC, datetime

from lakehouse import catalog, delta_log, object_storage
from lakehouse.config import Lakehouse
from lakehouse.errors import ConfigError


class UsageError(ConfigError):
    """A bad argument or a lakehouse without tables; the message says what to do."""


def open_delta(path: str):
    """The Delta table at ``path`` as a ``deltalake.DeltaTable``, or None when none was written there."""
    return object_storage.delta_table(path) if delta_log.is_delta_table(path) else None


def open_tables(lakehouse: Lakehouse) -> dict:
    """Every catalog table that has been written, as a ``deltalake.DeltaTable``, by name."""
    tables = {}
    for spec in catalog.tables():
        delta = open_delta(lakehouse.table(spec.name).path)
        if delta is not None:
            tables[spec.name] = delta
    return tables


def _arrow(delta):
    """The table as Arrow: a lazy dataset (DuckDB pushes filters and projections down), or, for a
    table with deletion vectors or column mapping (which Arrow datasets cannot apply), every row
    read by delta-rs's own scan."""
    from deltalake.exceptions import DeltaProtocolError

    try:
        return delta.to_pyarrow_dataset()
    except DeltaProtocolError:
        import pyarrow as pa

        return pa.table(delta.scan())


def connect(lakehouse: Lakehouse, tables: dict | None = None):
    """A DuckDB connection with a view per written catalog table, named as in the catalog."""
    import duckdb

    tables = open_tables(lakehouse) if tables is None else tables
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")  # the tables' timestamps are UTC instants
    for name, delta in tables.items():
        layer, table = name.split(".")
        arrow_name = f"__delta_{layer}_{table}"
        connection.register(arrow_name, _arrow(delta))
        connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{layer}"')
        connection.execute(f'CREATE VIEW "{layer}"."{table}" AS SELECT * FROM "{arrow_name}"')
    return connection


def execute(lakehouse: Lakehouse, sql: str):
    """``sql`` run over the catalog's tables: a DuckDB result to fetch from (rows stream as fetched)."""
    import duckdb

    tables = open_tables(lakehouse)
    connection = connect(lakehouse, tables)
    try:
        return connection.execute(sql)
    except duckdb.CatalogException as error:
        unwritten = [t.name for t in catalog.tables() if t.name not in tables]
        hint = (
            f" Not written yet (run their jobs first): {', '.join(unwritten)}." if unwritten else ""
        )
        raise UsageError(
            f"{error}.{hint} Tables: {', '.join(tables) or 'none'} under {lakehouse.root}"
        ) from None
    except duckdb.Error as error:
        raise UsageError(f"The query failed: {error}") from None


def query(lakehouse: Lakehouse, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of ``sql`` over the catalog's tables."""
    result = execute(lakehouse, sql)
    return [d[0] for d in result.description], result.fetchall()


def utc(moment) -> datetime | None:
    """A naive UTC datetime from a Delta timestamp (epoch milliseconds) or an aware or naive datetime."""
    if moment is None:
        return None
    if isinstance(moment, (int, float)):  # epoch milliseconds
        return datetime.fromtimestamp(moment / 1000, tz=UTC).replace(tzinfo=None)
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
