"""The one SparkSession factory: Delta, small-machine defaults, never the master.

spark-submit (through Airflow's connection) or the test fixture decides the master; jobs call
:func:`build_spark_session` and get the same configuration everywhere.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse.config import jar_paths, jars_dir

# Defaults sized for 2 cores; a cluster deployment overrides them with --conf.
DEFAULT_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    # Delta's log replay uses this many partitions; 50 is far too many for small tables.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.properties.defaults.appendOnly": "false",
    # Stateful queries (none today) would keep state in RocksDB rather than the JVM heap.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.ui.showConsoleProgress": "false",
}


def build_spark_session(app_name: str, extra_conf: dict[str, str] | None = None) -> SparkSession:
    """A Delta-enabled session named ``app_name``; ``extra_conf`` overrides the defaults."""
    builder = SparkSession.builder.appName(app_name)
    conf = {**DEFAULT_CONF, **(extra_conf or {})}
    # spark.jars set here only matters when no JVM runs yet (tests, python -m); spark-submit
    # already put the same jars on the classpath through --jars.
    conf.setdefault("spark.jars", ",".join(jar_paths()))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# Short-lived drivers (an hourly availableNow run, a fault-injection rerun) spend most of their CPU
# compiling and loading classes, not on data. C1-only JIT and a class-data-sharing archive of the
# classes such a run loads (`make driver-cds`, see lakehouse_tools.jvm_warmup) halve their CPU time
# (BENCHMARKS.md). Not for long backfills: C2 pays off once a JVM runs for minutes.
FAST_START_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def driver_cds_archive() -> Path:
    """Where ``make driver-cds`` writes the driver's class-data-sharing archive (beside the jars)."""
    return jars_dir() / "spark-driver.jsa"


def fast_start_java_options() -> str:
    """The driver JVM options of a short run; the archive only if it was built (else it is skipped)."""
    options = list(FAST_START_JAVA_OPTIONS)
    archive = driver_cds_archive()
    if archive.is_file():
        # -Xshare:auto (the default) ignores an archive that no longer matches the JDK or classpath.
        options.append(f"-XX:SharedArchiveFile={archive}")
    return " ".join(options)
