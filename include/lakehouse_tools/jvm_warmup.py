"""Run a job of each kind once over a little generated data, in one driver, so its JVM can archive the classes.

Usage (what ``make driver-cds`` runs):
    spark-submit --master local[2] --jars ... \\
        --driver-java-options -XX:ArchiveClassesAtExit=.jars/spark-driver.jsa include/lakehouse_tools/jvm_warmup.py

The JVM writes the classes it loaded (Spark, Delta, the streaming and MERGE code paths) into a
dynamic class-data-sharing archive when it exits; drivers started with
``lakehouse.spark.fast_start_java_options()`` map it instead of loading and verifying those classes
again. Nothing here is kept: the lakehouse lives in a temporary folder.
"""

from __future__ import annotations

import tempfile

from lakehouse import catalog, runner
from lakehouse.config import Lakehouse
from lakehouse_tools.generator import parse_hour, write_campaigns, write_hours


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="jvm-warmup-") as root:
        lakehouse = Lakehouse(root=root)
        write_campaigns(lakehouse, seed=1)
        write_hours(
            lakehouse, parse_hour("2026-11-20T00:00Z"), hours=1, events_per_second=0.05, seed=1
        )
        written = set()
        for table in catalog.tasks():  # in DAG order, each in this one driver
            # Tables written the same way (the hourly gold tables) load the same classes: one of
            # them is enough, and each more costs `make test`'s setup about 10 s.
            if table.write not in written:
                written.add(table.write)
                runner.run(table.task, ["--lakehouse-root", lakehouse.root])


if __name__ == "__main__":
    main()
