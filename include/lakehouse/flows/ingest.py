"""APPEND tables fed by a source: every new landing line or Kafka record, appended raw (bronze).

A streaming query with trigger(availableNow=True) reads what arrived since its checkpoint (new
files, or new records of every partition of the topic), appends it, and stops. The Delta sink
records each micro-batch id in the table's log, so a batch replayed after a crash is not
appended twice. Both sources append to the one table; each has its own checkpoint in the table's
current generation N (``checkpoints/bronze/ad_events/gen=N`` for files,
``.../ad_events/kafka/<topic>/gen=N`` for Kafka), so switching source or topic never reuses
another's offsets, and a full refresh moves both to N+1.

Kafka: the bootstrap servers come from --kafka-bootstrap-servers, else $KAFKA_BOOTSTRAP_SERVERS.
A new checkpoint starts at the earliest retained offset; each micro-batch reads at most
--max-offsets-per-trigger records. Before reading anything the job fails fast when the brokers
do not answer (after ~10 s, saying the task will retry) or the topic does not exist.

failOnDataLoss is true, deliberately: when records the checkpoint has not read yet are gone
(aged out of retention, deleted, the topic deleted or recreated, partitions removed), the job
stops with an error naming the table, the checkpoint and the remedy instead of silently skipping
them. An operator decides: restore the data, or accept the loss and do a full refresh of the
layer, which empties it and the layers after it and moves to checkpoint generation N+1: the next
run re-reads the landing files and the topic from its earliest retained offset. Records the
topic no longer holds are then gone from bronze too: with Kafka, bronze is the only full copy.
"""

from __future__ import annotations

import argparse

from pyspark.errors import StreamingQueryException

from lakehouse import checkpoint_log, delta_log
from lakehouse.catalog import TableSpec
from lakehouse.config import Table
from lakehouse.errors import ConfigError
from lakehouse.kafka_settings import (
    DEFAULT_MAX_OFFSETS_PER_TRIGGER,
    DEFAULT_TOPIC,
    SOURCES,
    kafka_checkpoint,
    resolve_bootstrap_servers,
    validate_topic,
)
from lakehouse.landing import (
    ReadPlan,
    changed_files,
    copied_files,
    ignored_files,
    late_files,
    plan_new_files,
    record_ingested_files,
)
from lakehouse.landing.source_log import roll_over, roll_over_due
from lakehouse.landing.window import WHOLE_LOOK_EVERY
from lakehouse.progress import ProgressLog
from lakehouse.runtime import JobArgs, Written, log, run_available_now
from lakehouse.sources import (
    KafkaUnavailableError,
    kafka_lines_stream,
    kafka_source_changed,
    kafka_unavailable,
    landing_lines_stream,
    require_kafka_topic,
)
from lakehouse.spark import build_spark_session, fit_code_generation, lazy_session


def source_options() -> argparse.ArgumentParser:
    """The options only a source-fed table has; the runner parses the rest."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--source", choices=SOURCES, default="files")
    parser.add_argument("--kafka-bootstrap-servers", help="default: $KAFKA_BOOTSTRAP_SERVERS")
    parser.add_argument("--kafka-topic", default=DEFAULT_TOPIC)
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=DEFAULT_MAX_OFFSETS_PER_TRIGGER
    )
    return parser


def run(target: Table, args: JobArgs) -> dict:
    table, source = target.spec, args.source or source_options().parse_args([])
    generation = args.generation_of(target)
    if source.source == "kafka":
        servers, topic = (
            resolve_bootstrap_servers(source.kafka_bootstrap_servers),
            validate_topic(source.kafka_topic),
        )
        if source.max_offsets_per_trigger < 1:
            raise ConfigError("--max-offsets-per-trigger must be >= 1")
        require_kafka_topic(servers, topic)  # before any JVM starts: a down broker fails in seconds
        checkpoint = kafka_checkpoint(target, topic, generation)
        spark = build_spark_session(table.task)
        lines = kafka_lines_stream(spark, servers, topic, source.max_offsets_per_trigger)
    else:
        checkpoint = target.checkpoint(generation)
        landing = args.lakehouse.landing(table.source)
        why = roll_over_due(checkpoint) if args.generation is None else None
        if why:
            generation = roll_over(target, landing)
            log.info(
                "%s: %s: checkpoint generation %d -> %d",
                table.name,
                why,
                generation - 1,
                generation,
            )
            checkpoint = target.checkpoint(generation)
        plan = _plan(checkpoint, landing)
        # Connected on first use: a run with no new file (the plan tells) opens no engine session.
        spark = lazy_session(table.task)
        lines = None

    landed = None if source.source == "kafka" else _new_bytes(checkpoint, plan)
    before = delta_log.latest_version(target.path)

    def writer(lease):
        log.info("%s: %s", table.name, fit_code_generation(spark, landed))
        read = (
            lines
            if lines is not None
            else landing_lines_stream(spark, landing, args.max_files_per_trigger, plan)
        )
        # mergeSchema: a table created before columns were added at its end (the Kafka lineage)
        # gains them; the transform's output is the declared schema, so nothing else can slip in.
        return (
            table.transform(read)
            .writeStream.format("delta")
            .outputMode("append")
            .option("mergeSchema", "true")
            .partitionBy(*table.partition_by)
            .option("path", target.path)
        )

    try:
        # The Delta sink's transaction app id is the query id: the check compares the checkpoint's.
        summary = run_available_now(
            writer,
            checkpoint,
            name=table.name,
            writes=[Written(target)],
            progress_log=ProgressLog(spark, args.lakehouse),
            caught_up=None if source.source == "kafka" else lambda: _caught_up(checkpoint, plan),
        )
    except StreamingQueryException as error:
        if source.source != "kafka":
            raise
        _explain_kafka_failure(error, table, target, servers, topic, checkpoint)
        raise
    # The rows bronze gained, which the source's input rows overstate when the plan keeps only some
    # of what it reads (a gzip payload's binary "lines", a copy's lines).
    summary["rows_written"] = delta_log.rows_added_since(target.path, before, "STREAMING UPDATE")
    if source.source != "kafka":
        summary.update(landing_problems(checkpoint, landing, target.path, plan))
    return summary


def _plan(checkpoint: str, landing_dir: str) -> ReadPlan:
    """How this run reads its new files (copies not at all, gzip payloads as one line), logged."""
    plan = plan_new_files(checkpoint, landing_dir, whole_every=WHOLE_LOOK_EVERY)
    refusal = plan.refusal(landing_dir)
    if refusal:
        raise ConfigError(refusal)
    for copy, original in sorted(plan.copies.items()):
        log.warning("landing file %s NOT read: the same bytes as %s, read once", copy, original)
    for payload in sorted(plan.gzip_payloads):
        log.warning("landing file %s holds a gzip payload: read as one line", payload)
    if plan.new_files:
        log.info("%d new landing file(s); %s", plan.new_files, plan.describe_reading())
    return plan


def _caught_up(checkpoint: str, plan: ReadPlan) -> str | None:
    """Why the source has nothing new (every file the run's checks listed is read), or None."""
    committed = checkpoint_log.newest(checkpoint, "commits")
    if plan.new_files or checkpoint_log.batch_to_replay(checkpoint) or committed is None:
        return None
    listed = "" if plan.folders is None else f" in the {len(plan.folders)} hour folder(s) listed"
    return f"no new file among the {len(plan.manifest)} landed{listed}"


def _new_bytes(checkpoint: str, plan: ReadPlan) -> int | None:
    """Bytes of the listed files the source has not read (None: a batch to replay, unsure)."""
    return None if checkpoint_log.batch_to_replay(checkpoint) else plan.new_bytes


def landing_problems(
    checkpoint: str, landing_dir: str, table_path: str | None = None, plan: ReadPlan | None = None
) -> dict:
    """What the landing zone holds that this run did not read as events, logged and for the summary.

    ``ignored_files``: names or payloads the source does not read (or reads with a caveat);
    ``changed_files``: files appended to or rewritten after bronze read them, never read again;
    ``copied_files``: files with the same bytes as one bronze has read (renamed, moved, copied),
    not read again; ``late_files``: files this run read from hour folders its checks did not list
    (landed late in an old hour). Each names the file, the reason and what to do
    (:mod:`lakehouse.landing`). Nothing here stops the run: the other files are read as usual.
    ``table_path``: bronze's table, whose rows record a file still being written when Spark
    listed it. ``plan``: the run's plan, whose folders are the ones looked at (None: all).
    """
    index = record_ingested_files(checkpoint, False, table_path, landing_dir)
    folders = None if plan is None or plan.folders is None else plan.folder_uris
    changed = changed_files(checkpoint, landing_dir, True, table_path, folders, index)
    records = index.every_record() if folders is None else index.records(folders)
    found = {
        "ignored_files": [
            problem.as_dict()
            for problem in ignored_files(landing_dir, plan.listing if plan else None)
        ],
        "changed_files": [problem.as_dict() for problem in changed],
        "copied_files": [problem.as_dict() for problem in copied_files(landing_dir, records)],
        "late_files": [
            problem.as_dict() for problem in late_files(index, landing_dir, folders or ())
        ]
        if folders is not None
        else [],
    }
    for problems in found.values():
        for problem in problems:
            log.warning(
                "landing file %s %s (%s): %s. What to do: %s",
                problem["file"],
                "read with a caveat" if problem["read"] else "NOT read",
                problem["reason"],
                problem["detail"],
                problem["what_to_do"],
            )
    return found


def _explain_kafka_failure(
    error: StreamingQueryException,
    table: TableSpec,
    target,
    servers: str,
    topic: str,
    checkpoint: str,
) -> None:
    """Raise what a Kafka query's failure means for the operator, when it is a known one."""
    reason = kafka_source_changed(error)
    if reason:
        raise ConfigError(
            f"{table.name}: topic {topic!r} on {servers} no longer matches checkpoint {checkpoint} "
            f"({reason}). Records it had not read yet are gone: aged out of retention or deleted, or the "
            "topic was deleted, recreated or lost partitions. Nothing was skipped (failOnDataLoss=true): "
            f"restore the data, or accept the loss and do a full refresh of {table.layer} (spark-submit "
            f"jobs/full_refresh.py --layer {table.layer}, or the DAG's full_refresh={table.layer}): it empties "
            f"{table.layer} and the layers after it and moves to checkpoint generation "
            f"{target.current_generation() + 1}, whose first run re-reads the landing files and the topic "
            "from its earliest retained offset."
        ) from error
    if kafka_unavailable(error):
        raise KafkaUnavailableError(
            f"{table.name}: Kafka brokers {servers} stopped answering during the run "
            f"({error.getMessage()[:300]}). What was committed stays committed; the task fails now and will "
            f"retry from checkpoint {checkpoint}."
        ) from error
