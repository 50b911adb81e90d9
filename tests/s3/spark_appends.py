"""A Spark driver of the project's own (its session factory, its S3 settings) that appends rows to
one Delta table: one of the writers of tests/s3/test_commit_race_on_s3.py.

Usage (as the DAG's tasks start a driver; the AWS_* variables and LAKEHOUSE_ROOT in the environment):
    spark-submit --master local[2] --jars <the S3 jars> tests/s3/spark_appends.py TABLE WRITER COUNT GO

Once its session is up and has read the table it creates the file ``GO.ready``, waits for the file
``GO`` (the start of the race: spark-submit gives the script no stdin of the caller's), then
appends ``COUNT`` rows ``(WRITER, 1..COUNT)``, one commit each, pausing between them as a paced
writer would.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from lakehouse.spark import build_spark_session

PAUSE_S = 0.3

if __name__ == "__main__":
    table, writer, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    spark = build_spark_session(f"race-{writer}", engine_kind="local")
    spark.read.format("delta").load(table).count()  # the JVM warm before the race starts
    go.with_suffix(".ready").touch()
    while not go.exists():
        time.sleep(0.05)
    for n in range(1, count + 1):
        spark.createDataFrame([(writer, n)], "writer string, n long").write.format("delta").mode(
            "append"
        ).save(table)
        time.sleep(PAUSE_S)
    spark.stop()
