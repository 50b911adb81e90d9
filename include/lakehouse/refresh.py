"""Full refresh: rebuild a layer, and every layer computed from it, from upstream.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/full_refresh.py --layer silver [--lakehouse-root DIR]

For the layer's tables and their downstream tables it empties each table (a Delta DELETE: the
old rows stay readable by time travel until VACUUM) and moves the table's streaming writer to a
new checkpoint generation (``checkpoints/<layer>/<table>/gen=N+1``). The old checkpoint folder is
kept aside, not deleted, and the Delta transaction app ids carry the generation, so the rebuilt
query's batch ids (which restart at 0) are not mistaken for ones already written. The next
incremental run then re-reads its source from the beginning. Each table stays at its path, so its
name in the metastore (``silver.ad_events``) keeps working; a written table the metastore lacks is
registered. What wrote the emptied tables' periods is forgotten (``ops.code_versions``): the
rebuilt periods are recorded as the runs that rebuild them write them.
"""

import argparse

from lakehouse import catalog, code_versions, delta_log, metastore
from lakehouse.config import Lakehouse
from lakehouse.errors import ConfigError
from lakehouse.runtime import log
from lakehouse.runtime.checkpoint_checks import retire_streaming_writers
from lakehouse.spark import build_spark_session

REFRESHABLE_LAYERS = ("bronze", "silver", "gold")


def tables_to_refresh(layer: str) -> list[str]:
    """The layer's streamed data tables and every table computed from them, upstream first (ops records stay)."""
    if layer not in REFRESHABLE_LAYERS:
        raise ConfigError(f"Unknown layer {layer!r}: choose one of {', '.join(REFRESHABLE_LAYERS)}")
    names = {spec.name for spec in catalog.data_tables_of(layer)}
    for name in list(names):
        names |= {spec.name for spec in catalog.downstream(name)}
    return [spec.name for spec in catalog.tables() if spec.name in names and spec.layer != "ops"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--layer", required=True, help=", ".join(REFRESHABLE_LAYERS))
    args = parser.parse_args(argv)
    lakehouse = Lakehouse.from_env(args.lakehouse_root)
    names = tables_to_refresh(args.layer)
    spark = build_spark_session("full_refresh")

    for name in names:
        table = lakehouse.table(name)
        streamed = (
            catalog.get(name).written_by is None
        )  # a side table: under its writer's checkpoint
        if streamed and delta_log.is_delta_table(table.path):
            retire_streaming_writers(table, table.current_generation())
        if delta_log.is_delta_table(table.path):
            spark.sql(f"DELETE FROM delta.`{table.path}`")
        if streamed:
            old = table.current_generation()
            new = table.start_new_generation()
            log.info(
                "%s emptied; checkpoint generation %d -> %d (kept: %s)",
                name,
                old,
                new,
                table.checkpoint(old),
            )
        else:
            log.info("%s emptied", name)
    records = lakehouse.table(code_versions.RECORDS)
    if delta_log.is_delta_table(records.path):
        listed = ", ".join(f"'{name}'" for name in names)
        spark.sql(f"DELETE FROM delta.`{records.path}` WHERE table_name IN ({listed})")
    metastore.register(spark, lakehouse)
