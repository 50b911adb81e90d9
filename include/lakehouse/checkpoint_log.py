"""Which batches a streaming query's checkpoint records, read from its folder (no Spark, no JVM).

Spark writes ``offsets/N`` when it plans batch N (a version line, the batch's metadata such as
its watermark, then one end offset per source) and ``commits/N`` when the batch has finished
(a version line, then the next batch's watermark). A batch planned and not committed is replayed
by the next run. The checks before a query starts list these logs through here.
"""

from __future__ import annotations

from pathlib import Path


def batches(checkpoint: str, log: str) -> tuple[int, ...]:
    """The batch ids in the checkpoint's ``log`` ("offsets" or "commits"), oldest first; () when it has none."""
    try:
        return tuple(sorted(int(p.name) for p in (Path(checkpoint) / log).iterdir() if p.name.isdigit()))
    except (FileNotFoundError, NotADirectoryError):
        return ()


def newest(checkpoint: str, log: str) -> int | None:
    """The newest batch id in the checkpoint's ``log`` (None: none yet)."""
    ids = batches(checkpoint, log)
    return ids[-1] if ids else None
