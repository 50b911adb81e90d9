"""Table maintenance: trim ops tables to their retention, compact small files (OPTIMIZE), delete
files no reader needs (VACUUM), and checkpoint and trim an ops table's log.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/maintenance.py --table silver.ad_events \
        [--retain-hours 168] [--lakehouse-root DIR]

Every micro-batch adds a few small files; OPTIMIZE rewrites them into fewer large ones (a commit
with ``dataChange=false``, which streaming readers skip) and marks the small ones removed.
VACUUM then deletes removed files older than the retention. A streaming query that reads the
table (a downstream table's query) still needs every file added since the version its checkpoint
last reached, even if OPTIMIZE has removed it since: VACUUM with a shorter retention breaks that
reader's next run with a missing file (delta-io/delta#577). So the retention used is never below
the age of the oldest version a reader still needs (plus a margin), whatever was asked for; the
record of each operation says which reader set it.

An ops table (``ops.query_progress``, ``ops.expectation_results``, ``ops.table_maintenance``)
grows by every run; its declaration says how long its rows are kept (:class:`lakehouse.catalog.
Retention`). Its maintenance first deletes the rows past that (``trim``: rows deleted), and last
writes a checkpoint of its log and deletes the log's commits past the same retention (``log``:
log files and bytes before and after), so that what a run reads of it stays the same size. A
streamed table's batch notes older than the batches Spark keeps in its checkpoint are deleted
(``batch notes``), and the checkpoint generations a full refresh retired more than a week ago
(``retired checkpoints``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from lakehouse import catalog, checkpoint_log, delta_log
from lakehouse.config import Lakehouse
from lakehouse.errors import ConfigError
from lakehouse.files import delete_tree, lake_path

DEFAULT_RETAIN_HOURS = 168  # Delta's own default (delta.deletedFileRetentionDuration, 7 days)
MARGIN_HOURS = 1  # a reader may be starting while VACUUM lists files
VACUUM_PARALLELISM = 8  # tasks listing a table's files: our tables have few partition folders
RECORDS = "ops.table_maintenance"
OPS_CHECKPOINT_INTERVAL = 10  # commits between two checkpoints of an ops table's log
log = logging.getLogger(
    "lakehouse"
)  # not lakehouse.runtime's: the DAG file imports this module, and no Spark


@dataclass(frozen=True)
class NeededVersion:
    """The oldest version of a table that one of its streaming readers will still read from."""

    version: int
    reader: str  # the reading table's name
    committed_at: datetime | None  # None: the version's commit is gone from the log


def reader_position(checkpoint: str, table_id: str) -> int | None:
    """The version of the Delta table ``table_id`` from which the query of ``checkpoint`` reads next.

    The newest committed batch's end offset (the replay of a planned batch starts there), or, when
    no batch is committed yet, the first planned batch's (a query starting from a snapshot reads
    that version's files). None: the query never planned a batch, so it will start from the
    current snapshot, whose files VACUUM keeps.
    """
    offsets, commits = lake_path(checkpoint) / "offsets", lake_path(checkpoint) / "commits"
    planned = checkpoint_log.batches(checkpoint, "offsets")
    committed = [batch for batch in planned if (commits / str(batch)).is_file()]
    batch = committed[-1] if committed else (planned[0] if planned else None)
    if batch is None:
        return None
    for line in (offsets / str(batch)).read_text(encoding="utf-8").splitlines()[2:]:
        if line.startswith("{"):
            offset = json.loads(line)
            if offset.get("reservoirId") == table_id:
                return int(offset["reservoirVersion"])
    return None


def oldest_needed_version(lakehouse: Lakehouse, name: str) -> NeededVersion | None:
    """The oldest version of table ``name`` that a streaming reader of it still needs (None: none does)."""
    path = lakehouse.table(name).path
    table_id = delta_log.table_id(path)
    needed = []
    for reader in catalog.tasks():
        if name not in reader.upstream or not reader.streamed:
            continue
        version = reader_position(lakehouse.table(reader.name).checkpoint(), table_id)
        # Versions that change no data (an earlier OPTIMIZE or VACUUM) give the reader nothing to read.
        if version is not None and delta_log.data_changed_since(path, version):
            needed.append(NeededVersion(version, reader.name, delta_log.commit_time(path, version)))
    return min(needed, key=lambda n: n.version, default=None)


def safe_retention_hours(asked: int, needed: NeededVersion | None, now: datetime) -> int:
    """The retention VACUUM uses: what was asked, raised to cover the oldest version a reader needs."""
    if needed is None:
        return asked
    if needed.committed_at is None:
        raise ConfigError(
            f"{needed.reader} still reads from version {needed.version}, whose commit is no longer in the "
            "table's log; not vacuuming. Run that table's query (or a full refresh of it) first."
        )
    age_hours = (now - needed.committed_at).total_seconds() / 3600
    return max(asked, math.ceil(age_hours) + MARGIN_HOURS)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--table", required=True, help="a catalog table, e.g. silver.ad_events")
    parser.add_argument(
        "--retain-hours",
        type=int,
        default=DEFAULT_RETAIN_HOURS,
        help=f"keep removed files this long at least (default {DEFAULT_RETAIN_HOURS}); raised for readers that lag",
    )
    args = parser.parse_args(argv)
    if args.retain_hours < 0:
        raise ConfigError("--retain-hours must be 0 or more")
    lakehouse = Lakehouse.from_env(args.lakehouse_root)
    catalog.get(args.table)
    path = lakehouse.table(args.table).path
    if not delta_log.is_delta_table(path):
        log.info("%s: no table at %s yet; nothing to maintain", args.table, path)
        return []

    from lakehouse.sinks import ensure_table, with_conflict_retries
    from lakehouse.spark import build_spark_session

    spark = build_spark_session(f"maintenance {args.table}")
    run_id = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID")
    declared_spec = catalog.get(args.table)
    trimmed = []
    if declared_spec.retention is not None:
        trimmed.append(_trim(spark, declared_spec, path, run_id))
    records = [
        *trimmed,
        _record(
            spark,
            args.table,
            path,
            "optimize",
            run_id,
            lambda: with_conflict_retries(
                lambda: spark.sql(f"OPTIMIZE delta.`{path}`").collect(), f"OPTIMIZE {args.table}"
            ),
        ),
    ]
    needed = oldest_needed_version(lakehouse, args.table)
    hours = safe_retention_hours(args.retain_hours, needed, datetime.now(UTC))
    if hours != args.retain_hours:
        log.info(
            "%s: retention raised from %d to %d hour(s): %s still reads from version %d",
            args.table,
            args.retain_hours,
            hours,
            needed.reader,
            needed.version,
        )

    def vacuum() -> None:
        # Delta refuses a retention under its default unless told the caller knows (this module does).
        # Its file listing runs one task per `parallelPartitionDiscovery.parallelism` (10,000 by
        # default): 70-100 s for a small table on 2 cores, 3.5 s with 8.
        settings = {
            "spark.databricks.delta.retentionDurationCheck.enabled": "false",
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(VACUUM_PARALLELISM),
        }
        for key, value in settings.items():
            spark.conf.set(key, value)
        try:
            spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS").collect()
        finally:
            for key in settings:
                spark.conf.unset(key)

    vacuumed = _record(spark, args.table, path, "vacuum", run_id, vacuum)
    ended = delta_log.latest_commit_info(path)  # Delta logs VACUUM START / VACUUM END commits
    deleted = (
        ended.get("operationMetrics", {}).get("numDeletedFiles")
        if ended.get("operation") == "VACUUM END"
        else None
    )
    vacuumed.update(
        files_deleted=deleted and int(deleted),
        retention_hours=hours,
        oldest_needed_version=needed and needed.version,
        needed_by=needed and needed.reader,
    )
    records.append(vacuumed)
    notes = trim_batch_notes(lakehouse.table(args.table).checkpoint())
    if notes is not None:
        records.append(
            {**_empty_record(args.table, "batch notes", datetime.now(UTC), run_id, path), **notes}
        )
    retired = trim_retired_generations(lakehouse.table(args.table), datetime.now(UTC))
    if retired is not None:
        records.append(
            {
                **_empty_record(args.table, "retired checkpoints", datetime.now(UTC), run_id, path),
                **retired,
            }
        )
    if declared_spec.retention is not None:
        records.append(_trim_log(args.table, path, declared_spec.retention.days, run_id))

    table = lakehouse.table(RECORDS)
    declared = catalog.get(RECORDS)
    ensure_table(spark, table)
    spark.createDataFrame(
        [tuple(r[c] for c in declared.column_names) for r in records], declared.spark_schema()
    ).write.format("delta").mode("append").option("mergeSchema", "true").save(table.path)
    for record in records:
        log.info(
            "%s %s: %d -> %d file(s), %d -> %d byte(s)%s in %.1f s",
            record["table_name"],
            record["operation"],
            record["files_before"],
            record["files_after"],
            record["bytes_before"],
            record["bytes_after"],
            f", {record['files_deleted']} deleted (retention {hours} h)"
            if record["operation"] == "vacuum"
            else f", {record['rows_deleted']} row(s) older than {record['retention_hours']} h"
            if record["operation"] == "trim"
            else "",
            record["seconds"],
        )
    freed = sum(
        r["bytes_before"] - r["bytes_after"] for r in records if r["operation"] != "optimize"
    )
    log.info("%s: maintenance freed %d byte(s)", args.table, max(freed, 0))
    return records


def _trim(spark, spec, path: str, run_id: str | None) -> dict:
    """Delete the rows of an ops table past its declared retention (but those it says to keep)."""
    retention = spec.retention
    cutoff = datetime.now(UTC) - timedelta(days=retention.days)
    old = f"{retention.column} < TIMESTAMP '{cutoff:%Y-%m-%d %H:%M:%S.%f}+00:00'"
    if retention.keep is None:
        statement = f"DELETE FROM delta.`{path}` WHERE {old}"
    else:
        # DELETE takes no window function: the rows to delete are found first, then merged away.
        on = " AND ".join(f"t.`{c}` <=> d.`{c}`" for c in spec.column_names)
        statement = (
            f"MERGE INTO delta.`{path}` AS t USING (SELECT DISTINCT * EXCEPT (_keep) FROM "
            f"(SELECT *, {retention.keep} AS _keep FROM delta.`{path}`) WHERE {old} AND NOT _keep)"
            f" AS d ON {on} WHEN MATCHED THEN DELETE"
        )

    def trim() -> None:
        from lakehouse.sinks import with_conflict_retries

        with_conflict_retries(lambda: spark.sql(statement).collect(), f"trim {spec.name}")

    version = delta_log.latest_version(path)
    record = _record(spark, spec.name, path, "trim", run_id, trim)
    metrics = (
        delta_log.latest_commit_info(path).get("operationMetrics", {})
        if delta_log.latest_version(path) != version
        else {}
    )
    deleted = metrics.get("numDeletedRows", metrics.get("numTargetRowsDeleted", 0))
    record.update(rows_deleted=int(deleted), retention_hours=retention.days * 24)
    return record


def trim_batch_notes(checkpoint: str) -> dict | None:
    """Delete the notes of the batches Spark no longer keeps in the checkpoint; what it freed.

    A query's micro-batch function leaves a note per batch beside its checkpoint
    (``gen=N.batches/<batch>.json``, read by key for the run's own batches). Spark keeps the
    newest ``minBatchesToRetain`` (100) batches' offsets; a note older than the oldest of them is
    read by nothing (recovery replays only a retained batch). None: the table has no such notes.
    """
    from lakehouse.runtime.locks import _notes_dir  # the notes' one home

    notes, kept = _notes_dir(checkpoint), checkpoint_log.batches(checkpoint, "offsets")
    if not kept or not notes.is_dir():
        return None
    found = [(p, int(p.name.split(".")[0])) for p in notes.iterdir() if p.name[0].isdigit()]
    before = (len(found), sum(p.stat().st_size for p, _ in found))
    started = time.monotonic()
    gone = [(p, p.stat().st_size) for p, batch in found if batch < kept[0]]
    for note, _ in gone:
        note.unlink(missing_ok=True)
    return {
        "seconds": round(time.monotonic() - started, 3),
        "files_before": before[0],
        "files_after": before[0] - len(gone),
        "bytes_before": before[1],
        "bytes_after": before[1] - sum(size for _, size in gone),
        "files_deleted": len(gone),
    }


# A full refresh moves a table's queries to a new checkpoint generation and keeps the old one for a
# look; nothing reads it (rollback refuses to cross a full refresh), so it goes after this long.
RETIRED_GENERATION_DAYS = 7
_GENERATION = re.compile(r"^gen=(\d+)(\..+)?$")  # gen=N, and its notes, state record, ... beside it


def trim_retired_generations(
    table, now: datetime, days: int = RETIRED_GENERATION_DAYS
) -> dict | None:
    """Delete the checkpoint generations ``table`` left behind in full refreshes over ``days`` ago
    (the folders beside them too); what it freed. None: the table was never refreshed.

    A source-fed table's queries have a checkpoint per source under the same root
    (``kafka/<topic>/gen=N``): their retired generations go too.
    """
    root = lake_path(table.checkpoint_root)
    current_file = root / "CURRENT"
    if not current_file.exists():
        return None
    current = table.current_generation()
    retired_for = now - datetime.fromtimestamp(current_file.stat().st_mtime, UTC)
    started = time.monotonic()
    folders = [
        root,
        *(topic for kafka in [root / "kafka"] if kafka.is_dir() for topic in kafka.iterdir()),
    ]
    found = [
        child
        for folder in folders
        for child in folder.iterdir()
        if (m := _GENERATION.match(child.name)) and int(m[1]) != current
    ]
    sizes = {child: _tree_size(child) for child in found}
    gone = found if retired_for >= timedelta(days=days) else []
    for child in gone:
        if child.is_file():
            child.unlink()
        else:
            delete_tree(child)
    return {
        "seconds": round(time.monotonic() - started, 3),
        "files_before": sum(n for n, _ in sizes.values()),
        "files_after": sum(n for child, (n, _) in sizes.items() if child not in gone),
        "bytes_before": sum(b for _, b in sizes.values()),
        "bytes_after": sum(b for child, (_, b) in sizes.items() if child not in gone),
        "files_deleted": sum(sizes[child][0] for child in gone),
        "retention_hours": days * 24,
    }


def _tree_size(path) -> tuple[int, int]:
    """(files, bytes) under ``path`` (a file counts as itself)."""
    if path.is_file():
        return 1, path.stat().st_size
    if hasattr(path, "walk_files"):  # on S3: one listing, its sizes
        sizes = [item["size"] for _, item in path.walk_files()]
    else:
        sizes = [
            os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names
        ]
    return len(sizes), sum(sizes)


def _trim_log(name: str, path: str, days: int, run_id: str | None) -> dict:
    """Checkpoint the table's log and delete the commits older than its retention (delta-rs).

    Ops tables are appended by delta-rs, which checkpoints every 100 commits by default: until
    then every reader replays every commit (+7 a run for ops.query_progress). The table is set to
    checkpoint every :data:`OPS_CHECKPOINT_INTERVAL` commits and to keep its log as long as its rows.
    """
    from lakehouse import object_storage

    before = _log_size(path)
    started, clock = datetime.now(UTC), time.monotonic()
    table = object_storage.delta_table(path)
    # delta-rs appends checkpoint the log every checkpointInterval commits (100 unless set): at 10,
    # a reader between two maintenance runs replays at most 10 commits.
    wanted = {
        "delta.logRetentionDuration": f"interval {days} days",
        "delta.checkpointInterval": str(OPS_CHECKPOINT_INTERVAL),
    }
    configuration = table.metadata().configuration
    if any(configuration.get(key) != value for key, value in wanted.items()):
        table.alter.set_table_properties(wanted)
        table = object_storage.delta_table(path)
    table.create_checkpoint()
    table.cleanup_metadata()
    after = _log_size(path)
    return {
        **_empty_record(name, "log", started, run_id, path),
        "seconds": round(time.monotonic() - clock, 3),
        "files_before": before[0],
        "files_after": after[0],
        "bytes_before": before[1],
        "bytes_after": after[1],
        "files_deleted": max(before[0] - after[0], 0),
        "retention_hours": days * 24,
    }


def _log_size(path: str) -> tuple[int, int]:
    """How many files the table's log holds, and their bytes."""
    files = [p for p in (lake_path(path) / "_delta_log").iterdir() if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _empty_record(name: str, operation: str, started, run_id: str | None, path: str) -> dict:
    return {
        "table_name": name,
        "operation": operation,
        "started_at": started,
        "seconds": None,
        "files_before": None,
        "files_after": None,
        "bytes_before": None,
        "bytes_after": None,
        "files_deleted": None,
        "retention_hours": None,
        "oldest_needed_version": None,
        "needed_by": None,
        "table_version": delta_log.latest_version(path),
        "run_id": run_id,
        "rows_deleted": None,
    }


def _record(spark, name: str, path: str, operation: str, run_id: str | None, run) -> dict:
    """Run ``operation`` on the table and describe it: files and bytes before and after, seconds."""
    before = _detail(spark, path)
    started, clock = datetime.now(UTC), time.monotonic()
    run()
    after = _detail(spark, path)
    return {
        **_empty_record(name, operation, started, run_id, path),
        "seconds": round(time.monotonic() - clock, 3),
        "files_before": before["numFiles"],
        "files_after": after["numFiles"],
        "bytes_before": before["sizeInBytes"],
        "bytes_after": after["sizeInBytes"],
    }


def _detail(spark, path: str) -> dict:
    row = (
        spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("numFiles", "sizeInBytes").collect()[0]
    )
    return {"numFiles": row["numFiles"], "sizeInBytes": row["sizeInBytes"]}
