"""Bronze's file-source log kept bounded: a new checkpoint generation once it names many files.

Spark's file source logs every file it has read and keeps every entry when it compacts its log
(every 10th batch it reads the whole log and writes it again); Spark has no purge for it (the
proposals, apache/spark#15210 and #28422, are closed). Once the newest compacted log holds
:data:`ROLL_OVER_BYTES`, bronze's next run moves its query to a new checkpoint generation whose
log starts empty (:func:`roll_over`). Bronze's index of the files read goes with it, so the
checks still know every file, and the source gives no line of a file the index holds as read
(:attr:`lakehouse.landing.ReadPlan.read_before`): a date folder listed again after the roll-over
is not read twice. The old generation stays, as a full refresh leaves it, until the maintenance
DAG trims it a week later (a rollback never moves bronze: :mod:`lakehouse_tools.rollback`).
"""

from __future__ import annotations

from lakehouse import checkpoint_log
from lakehouse.files import S3Path, delete_tree, lake_path
from lakehouse.landing.manifest import LandedIndex, manifest_path, record_ingested_files

# About 29,000 files (~145 bytes an entry): ten months of hourly runs at 4 files an hour. The
# compaction rewrites at most this every 10th batch; the roll-over copies bronze's index once.
ROLL_OVER_BYTES = 4 << 20


def source_log_bytes(checkpoint: str) -> int:
    """Bytes of the newest compacted file of the source's log (0: none yet)."""
    folder = lake_path(checkpoint) / "sources" / "0"
    try:
        compacted = [p for p in folder.iterdir() if p.name.endswith(".compact")]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    if not compacted:
        return 0
    newest = max(compacted, key=lambda p: int(p.name.split(".")[0]))
    return newest.stat().st_size


def roll_over_due(checkpoint: str, limit: int = ROLL_OVER_BYTES) -> str | None:
    """Why bronze's query should move to a new generation now, or None.

    Not while a batch waits to be replayed (it must be read from this generation's log) or a
    file read while still being written awaits its record (it names this generation's batch).
    """
    size = source_log_bytes(checkpoint)
    if size < limit:
        return None
    if checkpoint_log.batch_to_replay(checkpoint):
        return None
    if LandedIndex(checkpoint).state["unsettled"]:
        return None
    return f"its file-source log holds {size / 2**20:.1f} MiB (roll-over at {limit / 2**20:.0f})"


def roll_over(target, landing_dir: str) -> int:
    """Move bronze's file query to a new checkpoint generation, carrying bronze's index; the new
    generation's number. Safe to repeat after a crash: nothing moves until ``CURRENT`` does."""
    from lakehouse.runtime.checkpoint_checks import retire_streaming_writers

    old = target.current_generation()
    old_checkpoint = target.checkpoint(old)
    record_ingested_files(old_checkpoint, True, target.path, landing_dir)  # every batch recorded
    new_checkpoint = target.checkpoint(old + 1)
    for left in (new_checkpoint, manifest_path(new_checkpoint)):  # a roll-over that crashed
        delete_tree(left)  # before CURRENT moved
    _copy_tree(manifest_path(old_checkpoint), manifest_path(new_checkpoint))
    index = LandedIndex(new_checkpoint)
    index.state.update(recorded_batch=-1, unsettled={}, carried_from=old)
    index.save()
    # The new query's first run finds the table written by another query id: recorded as retired.
    retire_streaming_writers(target, old)
    return target.start_new_generation()


def _copy_tree(source, destination) -> None:
    source, destination = lake_path(source), lake_path(destination)
    if isinstance(source, S3Path):
        for path, _ in source.walk_files():
            (destination / path.relative_to(source).as_posix()).write_bytes(path.read_bytes())
        return
    import shutil

    if source.is_dir():
        shutil.copytree(source, destination)
