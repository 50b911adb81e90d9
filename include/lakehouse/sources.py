"""Sources: the landing zone (files), a Kafka topic and upstream Delta tables, as streams or batches."""

from __future__ import annotations

import re
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import catalog, delta_log
from lakehouse.config import Table
from lakehouse.errors import ConfigError
from lakehouse.files import lake_path
from lakehouse.kafka_settings import DEFAULT_TIMEOUT_S
from lakehouse.landing import READ_NAMES_GLOB, ReadPlan
from lakehouse.object_storage import is_object_store
from lakehouse.periods import Periods

# The producer's layout under the landing folder, <date>/<hour>/<part>.jsonl: where lakehouse status
# finds a file's producer hour. The source reads every visible *.jsonl and *.jsonl.gz at any depth
# (lakehouse.landing).
LANDING_FILES = "*/*/*.jsonl"
# Read without Hadoop's glob (but for the date folders' names a plan checked: ReadPlan.source_path)
# or checksummed local file system: both build a file's path from its bare name, which fails on a
# colon ("Relative path in absolute URI") and made Spark's glob re-match names with [x], {x}, ? or
# * against other files. Options reach only this source's Hadoop conf.
_ANY_NAME_OPTIONS = {"recursiveFileLookup": "true", "pathGlobFilter": READ_NAMES_GLOB}
# Only for a local landing zone: on S3 the connector's file system, cached per bucket, would keep
# this conf, and the state store's uploads through it would find a raw local file system where
# they need a checksummed one (ClassCastException in S3AFileSystem.copyFromLocalFile).
_RAW_LOCAL_OPTIONS = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


def landing_lines_stream(
    spark: SparkSession, landing_dir: str, max_files_per_trigger: int, plan: ReadPlan | None = None
) -> DataFrame:
    """New landing files as text lines (``value``, ``source_file``, ``ingested_at``).

    Every visible ``*.jsonl`` and ``*.jsonl.gz`` (gzip, decompressed) file under ``landing_dir``,
    at any depth, whatever its name (colons, spaces, glob characters, Unicode:
    :mod:`lakehouse.landing`). ``plan`` (:func:`lakehouse.landing.plan_new_files`): the new files
    that are copies give no line (the source still logs them as read), and a gzip payload under a
    ``.jsonl`` name only its first line. The file source remembers every
    file it has read in its checkpoint, so a rerun reads only files that appeared since; it lists
    the date folders the plan names (:meth:`lakehouse.landing.ReadPlan.source_path`). Hidden
    (``.``- or ``_``-prefixed) files and folders are ignored until renamed. A file is read whatever
    its modification time: one copied in late with an old mtime (a re-delivered hour, a restored
    backup) is new data, not something to skip.
    """
    if not lake_path(landing_dir).is_dir():
        raise ConfigError(
            f"Landing directory {landing_dir} does not exist: generate data "
            "(python -m lakehouse_tools.generator ...) or fix LAKEHOUSE_ROOT."
        )
    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        # The default, 7 days, silently never reads a file whose mtime is more than 7 days older
        # than the newest file seen; 100000 days is never. The source then keeps every file it
        # has read in memory, as its checkpoint log already does. (latestFirst stays false: with
        # it, maxFilesPerTrigger would also disable the age limit, but read newest files first.)
        .option("maxFileAge", "100000d")
        .options(**_ANY_NAME_OPTIONS)
        .options(**({} if is_object_store(landing_dir) else _RAW_LOCAL_OPTIONS))
        .load(plan.source_path(landing_dir) if plan else landing_dir)
    )
    if plan and (plan.copies or plan.gzip_payloads or plan.read_before):
        lines = lines.filter(_planned_lines(plan))
    return lines.select(
        "value",
        F.col("_metadata.file_path").alias("source_file"),
        F.current_timestamp().alias("ingested_at"),
    )


def _planned_lines(plan: ReadPlan):
    """The lines a plan keeps: none of a copy or of a file read in an earlier generation; of a
    gzip payload, its first line only (the line of the file's first block equal to it: ten bytes
    of gzip header do not recur by chance)."""
    # A local file's path as the source logs it (file:///...), which _metadata writes file:/...
    file = F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "file:///")
    skipped = {*plan.copies, *plan.read_before}
    keep = ~file.isin(*sorted(skipped)) if skipped else F.lit(True)
    if plan.gzip_payloads:
        first_lines = F.create_map(
            *[
                part
                for uri, line in sorted(plan.gzip_payloads.items())
                for part in (F.lit(uri), F.lit(bytearray(line)))
            ]
        )
        first = (F.col("_metadata.file_block_start") == 0) & (
            F.col("value").cast("binary") == first_lines[file]
        )
        keep = keep & (~file.isin(*plan.gzip_payloads) | first)
    return keep


class KafkaUnavailableError(RuntimeError):
    """The Kafka brokers did not answer: transient, the task fails fast and is retried."""


def require_kafka_topic(
    bootstrap_servers: str, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> int:
    """The partition count of ``topic``; fails within ``timeout_s`` when the brokers do not answer.

    Checked before a query starts: Spark's own Kafka client would retry for minutes against a down
    broker, and would read nothing from a mistyped topic without a word.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    # Metadata of all topics: asking for one topic could auto-create it on the broker.
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    try:
        topics = admin.list_topics(timeout=timeout_s).topics
    except KafkaException as error:
        raise KafkaUnavailableError(
            f"Kafka brokers {bootstrap_servers} did not answer within {timeout_s:.0f} s ({error}). Nothing was "
            "read; the task fails now and will retry. If it keeps failing: is the broker up (make kafka-start), "
            "and are the bootstrap servers right (--kafka-bootstrap-servers, Airflow connection kafka_lakehouse, "
            "$KAFKA_BOOTSTRAP_SERVERS)?"
        ) from error
    if topic not in topics or not topics[topic].partitions:
        raise ConfigError(
            f"Kafka topic {topic!r} does not exist on {bootstrap_servers}: produce to it first "
            f"(python -m lakehouse_tools.kafka_producer --kafka-bootstrap-servers {bootstrap_servers} --topic {topic} ...) "
            "or fix --kafka-topic. If it was deleted, recreate it and do a full refresh of bronze "
            "(jobs/full_refresh.py --layer bronze): the old checkpoint's offsets mean nothing in a new topic."
        )
    return len(topics[topic].partitions)


def kafka_lines_stream(
    spark: SparkSession,
    bootstrap_servers: str,
    topic: str,
    max_offsets_per_trigger: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> DataFrame:
    """New records of a Kafka topic as lines (``value``, ``kafka_topic``, ``kafka_partition``,
    ``kafka_offset``, ``kafka_timestamp``, ``ingested_at``).

    The checkpoint holds the next offset of every partition, so a rerun reads only records that
    arrived since; a new checkpoint starts at the earliest offset still retained. A record that is
    gone before it was read (deleted, aged out, topic recreated) fails the query
    (``failOnDataLoss``): skipping it or not is an operator's decision, not the job's.
    """
    timeout_ms = str(int(timeout_s * 1000))
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets_per_trigger)
        .option("failOnDataLoss", "true")
        # Offset lookups and fetches give up after seconds, not the clients' minutes of defaults.
        .option("kafka.default.api.timeout.ms", timeout_ms)
        .option("kafka.request.timeout.ms", timeout_ms)
        .option("kafkaConsumer.pollTimeoutMs", str(int(timeout_s * 3000)))
        .load()
    )
    return records.select(
        F.col("value").cast("string").alias("value"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.current_timestamp().alias("ingested_at"),
    )


# How Spark's Kafka source reports a topic that no longer matches the offsets in a checkpoint
# (KAFKA_DATA_LOSS and its reasons, the partition-set checks, a deleted topic); the reasons are
# often only in the causes of a task failure, hence the search of the whole JVM stack trace.
_KAFKA_SOURCE_CHANGED = (
    "KafkaIllegalStateException",
    "KAFKA_DATA_LOSS",
    "Some data may have been lost because they are not available in Kafka",
    "UnknownTopicOrPartitionException",
    "MISMATCHED_TOPIC_PARTITIONS",
    "LOST_TOPIC_PARTITIONS",
    "START_OFFSET_GREATER_THAN_END_OFFSET",
    "KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED",
)
_KAFKA_UNAVAILABLE = ("org.apache.kafka.common.errors.TimeoutException",)


def _error_text(error: BaseException) -> str:
    # A captured JVM error keeps the full trace, causes included, in _stackTrace; str() omits it.
    return f"{error}\n{getattr(error, '_stackTrace', '') or ''}"


def kafka_source_changed(error: BaseException) -> str | None:
    """Spark's reason when a Kafka query failed because its topic no longer matches the checkpoint
    (records gone, partitions deleted, topic deleted or recreated); None for any other failure."""
    text = _error_text(error)
    if not any(marker in text for marker in _KAFKA_SOURCE_CHANGED):
        return None
    reason = re.search(r"Reason: ([^\n]*)", text)
    if reason:
        return reason.group(1).split(" SQLSTATE")[0].strip()
    first = next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return first.strip()[:300]


def kafka_unavailable(error: BaseException) -> bool:
    """True when a Kafka query failed because the brokers stopped answering (a timeout)."""
    return any(marker in _error_text(error) for marker in _KAFKA_UNAVAILABLE)


def require_table(spark: SparkSession, table: Table) -> None:
    """Fail fast, naming the job to run, when an upstream Delta table does not exist yet."""
    if not delta_log.is_delta_table(table.path):
        raise ConfigError(
            f"Table {table.name} does not exist at {table.path}: run its job first "
            f"(jobs/run.py {catalog.get(table.name).task}, or the DAG task of that name)."
        )


# Delta's source admits at most this many files a micro-batch (its option takes an int).
ALL_FILES = 2**31 - 1


def delta_stream(spark: SparkSession, table: Table, *, one_batch: bool = False) -> DataFrame:
    """New rows appended to a Delta table since the last run.

    Commits that rewrite data (a backfill's ``replaceWhere``) are skipped: the backfill itself
    recomputes everything downstream of the hours it rewrote.

    ``one_batch``: a run admits everything new as one micro-batch (and the no-data batch that
    follows it), not batches of Delta's default 1,000 files. For a query with an event-time
    watermark: the files of a commit are in no event-time order (silver's MERGE writes each task's
    hours in turn), so a later batch of the same run would hold events behind the watermark its
    earlier batches moved, and record them as late (a 30-day catch-up: 41 % of its events, issue 56).
    """
    require_table(spark, table)
    stream = spark.readStream.format("delta").option("skipChangeCommits", "true")
    if one_batch:
        stream = stream.option("maxFilesPerTrigger", ALL_FILES)
    return stream.load(table.path)


def delta_periods(spark: SparkSession, table: Table, periods: Periods) -> DataFrame:
    """A period-addressed table's rows of ``periods``, read in batch and pruned by its partitions."""
    require_table(spark, table)
    return spark.read.format("delta").load(table.path).filter(table.spec.periods_predicate(periods))


def bronze_lines_for(spark: SparkSession, bronze: Table, hours: Periods) -> DataFrame:
    """The bronze lines that can hold events of ``hours``, read in batch.

    Bronze is partitioned by ingestion date, and an event is never ingested before its event time
    minus the largest accepted clock skew (one day, see silver's future check); late events can
    arrive any time after. So every partition from the day before the first hour on is read.
    """
    require_table(spark, bronze)
    first_day = hours.first.date() - timedelta(days=1)
    return (
        spark.read.format("delta")
        .load(bronze.path)
        .filter(F.col("ingest_date") >= F.lit(first_day))
    )


def batch_input(spark: SparkSession, upstream: Table, periods: Periods) -> DataFrame:
    """An upstream table's rows that can hold events of ``periods``, read in batch and pruned.

    Period-addressed tables are read for those periods (a day of an hour table is its 24 hours),
    bronze (partitioned by ingestion date) from the day before the first period on, anything else
    (a dimension) whole.
    """
    declared = upstream.spec
    if declared.flow.layout(declared.grain) is not None:
        return delta_periods(spark, upstream, periods)
    if "ingest_date" in declared.partition_by:
        return bronze_lines_for(spark, upstream, periods)
    require_table(spark, upstream)
    return spark.read.format("delta").load(upstream.path)
