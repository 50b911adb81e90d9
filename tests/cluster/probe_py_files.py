"""Where the executors import ``lakehouse`` from: a Spark application the cluster tests submit.

Usage:
    spark-submit --master spark://127.0.0.1:7077 [--py-files build/lakehouse.zip] tests/cluster/probe_py_files.py

Runs one Python task per partition on the executors; each reports its process, its working
directory and the file ``lakehouse.config`` was imported from (or the ImportError). Prints one
line, ``PROBE {json}``.
"""

import json
import os

from pyspark.sql import SparkSession


def where(_rows):
    try:
        import lakehouse.config

        origin = lakehouse.config.__file__
    except ImportError as error:
        origin = f"{type(error).__name__}: {error}"
    yield {"pid": os.getpid(), "cwd": os.getcwd(), "lakehouse": origin}


def main() -> None:
    spark = SparkSession.builder.appName("probe_py_files").getOrCreate()
    try:
        reports = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
    finally:
        spark.stop()
    print(
        "PROBE "
        + json.dumps({"driver_pid": os.getpid(), "driver_cwd": os.getcwd(), "executors": reports})
    )


if __name__ == "__main__":
    main()
