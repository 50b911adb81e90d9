"""Recompute the periods an older code version wrote, table by table, upstream first.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/repair_stale.py [--lakehouse-root DIR] [--dry-run]

The stale periods are :func:`lakehouse.code_versions.stale`'s: written by a version other than
today's, or computed from an upstream period that is. Each table with stale periods is recomputed
over them by its batch form (the runner's ``--mode batch``, as a backfill does; a table whose task
writes several, with ``--tables`` naming it alone), silver before the gold tables computed from it;
no other table is written. The hourly runs may go on beside it: the
batch writes retry on a write conflict. Each batch run records its periods with today's version,
so a repair that dies part-way is resumed by running it again.
"""

from __future__ import annotations

import argparse

from lakehouse import catalog, code_versions, runner
from lakehouse.config import Lakehouse
from lakehouse.runtime import log


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument(
        "--dry-run",
        nargs="?",
        const="true",
        default="false",
        choices=("true", "false"),
        help="say what would be recomputed, change nothing (a DAG param passes true or false)",
    )
    args = parser.parse_args(argv)
    dry_run = args.dry_run == "true"
    lakehouse = Lakehouse.from_env(args.lakehouse_root)
    found = code_versions.stale(lakehouse)
    if not found:
        log.info("nothing stale: every recorded period was written by today's code")
        return {"stale": {}, "runs": 0}
    log.info("stale periods, upstream first:\n%s", code_versions.stale_text(found))
    runs = 0
    for name, periods in found.items():
        task = catalog.get(name).task
        alone = ["--tables", name] if len(catalog.task_members(catalog.get(name))) > 1 else []
        for start, end in code_versions.ranges(periods):
            interval = (f"{start:%Y-%m-%dT%H:00Z}", f"{end:%Y-%m-%dT%H:00Z}")
            log.info(
                "%s %s [%s, %s)%s",
                "would recompute" if dry_run else "recomputing",
                task,
                *interval,
                f" of {name}" if alone else "",
            )
            if not dry_run:
                runner.run(
                    task,
                    ["--lakehouse-root", lakehouse.root, "--mode", "batch"]
                    + ["--start", interval[0], "--end", interval[1]]
                    + alone,
                )
                runs += 1
    return {"stale": {name: len(periods) for name, periods in found.items()}, "runs": runs}
