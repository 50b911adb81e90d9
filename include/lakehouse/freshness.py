"""Is there anything new for a query? Answered from files, before any query starts.

An hourly run that finds nothing new should cost next to nothing: each check below reads a few
small files (a checkpoint's logs, a Delta log, a directory listing) and says why a query has
nothing to do, or None when it may have. None is always the safe answer: the query then runs
and finds out itself. (Bronze's file source is answered by its plan of new files, from the hour
folders that can hold them: :mod:`lakehouse.landing`.) A pending batch (planned, not committed) is never skipped: it must be
replayed. The same files say about how much a job will read (``*_bytes``), by which its queries
are interpreted or compiled (:func:`lakehouse.spark.fit_code_generation`).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from lakehouse import checkpoint_log, delta_log
from lakehouse.files import lake_path

if TYPE_CHECKING:
    from lakehouse.config import Table


def _committed_offsets(checkpoint: str) -> list[str] | None:
    """The source offsets (one JSON line per source) of the newest batch, if it is committed."""
    offsets, commits = lake_path(checkpoint) / "offsets", lake_path(checkpoint) / "commits"
    planned = checkpoint_log.newest(checkpoint, "offsets")
    if planned is None or not (commits / str(planned)).is_file():
        return None
    try:
        lines = (offsets / str(planned)).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    return lines[2:]  # a version line, the batch's metadata, then the sources


def delta_source_caught_up(checkpoint: str, upstream_path: str) -> str | None:
    """Why a query reading the Delta table at ``upstream_path`` has nothing new, or None.

    Its newest committed offset points at the start of the version after the table's newest
    (Delta's offset ``(v, index -1)``: every version before ``v`` read).
    """
    sources = _committed_offsets(checkpoint)
    latest = delta_log.latest_version(upstream_path)
    if not sources or len(sources) != 1 or latest is None:
        return None
    try:
        offset = json.loads(sources[0])
    except ValueError:
        return None
    if offset.get("index") != -1:
        return None
    if offset.get("reservoirVersion") == latest + 1:
        return f"every version of the upstream table read (newest: {latest})"
    if not delta_log.data_changed_since(upstream_path, offset["reservoirVersion"]):
        return f"the upstream's versions {offset['reservoirVersion']}..{latest} change no data (compaction, vacuum)"
    return None


def job_input_bytes(table: Table, checkpoint: str | None = None) -> int | None:
    """About how many bytes of Delta tables a table's job reads; None when unsure.

    A batch (no ``checkpoint``) reads whole event periods of its upstream tables and itself: at
    most their bytes, whole. An incremental run with a committed batch in ``checkpoint`` reads
    what its streamed upstream added since, and the periods that touches, which hold about as
    much in hourly runs: the bytes added since the checkpoint's offset. Not the tables' whole
    size: that grows every run, and after a year of history every small hour was compiled
    (issue 56). A first run, or a batch to replay, falls back to the whole tables. Not counted:
    silver's MERGE also reads its own rows within the key window (about 48 hours of them), so an
    hour of just under the threshold runs that read interpreted too.
    """
    return job_input(table, checkpoint)[0]


def job_input(table: Table, checkpoint: str | None = None) -> tuple[int | None, bool]:
    """:func:`job_input_bytes`, and whether it counts only what is new upstream (True) or the
    tables whole (False): the job's log says which."""
    if checkpoint is not None:
        unread = _unread_bytes(checkpoint, table.upstream_tables()[0].path)
        if unread is not None:
            return unread, True
    return delta_log.data_bytes(*(t.path for t in (*table.upstream_tables(), table))), False


def _unread_bytes(checkpoint: str, upstream_path: str) -> int | None:
    """Bytes the Delta table at ``upstream_path`` added after what the query of ``checkpoint``
    read (None: no committed batch, or an offset this cannot read)."""
    sources = _committed_offsets(checkpoint)
    if not sources or len(sources) != 1:
        return None
    try:
        version = int(json.loads(sources[0])["reservoirVersion"])
    except (ValueError, KeyError, TypeError):
        return None
    return delta_log.bytes_added_since(upstream_path, version)


def file_fingerprint(path: str) -> str:
    """The SHA-256 of a (small) file's bytes: what a snapshot table records of its source."""
    return hashlib.sha256(lake_path(path).read_bytes()).hexdigest()


def snapshot_unchanged(table_path: str, fingerprint: str) -> str | None:
    """Why a snapshot of a file with ``fingerprint`` need not be reloaded into ``table_path``, or None."""
    # The newest load, not the newest commit: maintenance (OPTIMIZE, VACUUM) records no source.
    recorded = delta_log.latest_data_commit_info(table_path).get("userMetadata") or ""
    if recorded == f"source sha256 {fingerprint}":
        return "its source file is unchanged since the last load"
    return None


def watermark_advance_pending(checkpoint: str) -> bool:
    """True when a stateful query's newest batch moved its watermark and the batch that acts on it has not run.

    Spark runs that batch (no new data, timers fire) right after, in the same run only: a driver
    that died in between leaves sessions unclosed until new data comes, unless the next run
    replays the batch (:func:`lakehouse.runtime.run_available_now` does).
    """
    offsets, commits = lake_path(checkpoint) / "offsets", lake_path(checkpoint) / "commits"
    newest = checkpoint_log.newest(checkpoint, "commits")
    if newest is None:
        return False
    try:
        committed = json.loads((commits / str(newest)).read_text(encoding="utf-8").splitlines()[1])
        planned = json.loads((offsets / str(newest)).read_text(encoding="utf-8").splitlines()[1])
    except (OSError, ValueError, IndexError):
        return False  # the checkpoint check reports what is wrong with it
    return int(committed.get("nextBatchWatermarkMs", 0)) > int(planned.get("batchWatermarkMs", 0))
