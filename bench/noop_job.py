"""A trivial spark-submit application, to time what every job pays before doing any work.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" bench/noop_job.py bare|session

``bare`` exits at once (JVM + Python start-up); ``session`` also builds the project's Delta
session (lakehouse.spark.build_spark_session) and stops it.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:] == ["session"]:
        from lakehouse.spark import build_spark_session

        build_spark_session("noop_job").stop()
