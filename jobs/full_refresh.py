"""Full refresh: rebuild a layer, and every layer computed from it, from upstream.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/full_refresh.py --layer silver [--lakehouse-root DIR]

For the layer's tables and their downstream tables it empties each table (a Delta DELETE: the
old rows stay readable by time travel until VACUUM) and moves the table's streaming writer to a
new checkpoint generation (``checkpoints/<layer>/<table>/gen=N+1``). The old checkpoint folder is
kept aside, not deleted, and the Delta transaction app ids carry the generation, so the rebuilt
query's batch ids (which restart at 0) are not mistaken for ones already written. The next
incremental run then re-reads its source from the beginning.
"""

import argparse

from lakehouse.config import ConfigError, Lakehouse
from lakehouse.runtime import log, run_job
from lakehouse.spark import build_spark_session

# The streamed tables of each layer, upstream layers first (each layer is computed from the one before).
LAYERS = {
    "bronze": ("bronze.ad_events",),
    "silver": ("silver.ad_events", "silver.quarantine_ad_events"),
    "gold": ("gold.campaign_windows", "gold.campaign_hourly"),
}


def tables_to_refresh(layer: str) -> list[str]:
    """The layer's tables and those of every layer after it."""
    if layer not in LAYERS:
        raise ConfigError(f"Unknown layer {layer!r}: choose one of {', '.join(LAYERS)}")
    names = list(LAYERS)
    return [table for later in names[names.index(layer):] for table in LAYERS[later]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--layer", required=True, help="bronze, silver or gold")
    args = parser.parse_args(argv)
    lakehouse = Lakehouse.from_env(args.lakehouse_root)
    names = tables_to_refresh(args.layer)
    spark = build_spark_session("full_refresh")

    from delta.tables import DeltaTable

    for name in names:
        table = lakehouse.table(name)
        if DeltaTable.isDeltaTable(spark, table.path):
            DeltaTable.forPath(spark, table.path).delete()
        if name != "silver.quarantine_ad_events":  # written by silver's query, under silver's checkpoint
            old = table.current_generation()
            new = table.start_new_generation()
            log.info("%s emptied; checkpoint generation %d -> %d (kept: %s)", name, old, new, table.checkpoint(old))
        else:
            log.info("%s emptied", name)


if __name__ == "__main__":
    run_job(main)
