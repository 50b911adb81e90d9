"""Where a job's query stood when its driver died, read from its checkpoint, its tables and its log.

The harness records this after every kill, so a report shows where the kills landed (before a
batch, during MERGE, after a Delta commit and before the checkpoint's).
"""

from __future__ import annotations

import json
from pathlib import Path

from lakehouse.config import Lakehouse
from lakehouse_tools.fault_harness.plan import TARGETS

# Silver's driver log shows this once its MERGE started (the one phase no file records).
MERGE_STARTED = "MergeIntoCommand: DELTA: MERGE operation"


def batch_ids(folder: Path) -> set[int]:
    """The micro-batch ids of a checkpoint folder (offsets/ or commits/); none if it is missing."""
    try:
        return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}
    except FileNotFoundError:
        return set()


def _txn_version(table_path: str) -> int:
    """The highest Delta transaction version (micro-batch id) committed to a table, -1 if none."""
    best = -1
    for commit in Path(table_path, "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            if '"txn"' in line:
                best = max(best, int(json.loads(line)["txn"]["version"]))
    return best


def describe_phase(lakehouse: Lakehouse, job: str, log: Path | None = None) -> str:
    """Where a job's query stood: the newest batch, and which of its writes were committed."""
    checkpoint = Path(lakehouse.table(TARGETS[job][0]).checkpoint())
    planned, done = batch_ids(checkpoint / "offsets"), batch_ids(checkpoint / "commits")
    if not planned:
        return "before any batch was planned"
    batch = max(planned)
    if done and max(done) >= batch:
        return f"batch {batch} checkpointed"
    written = [name for name in TARGETS[job] if _txn_version(lakehouse.table(name).path) >= batch]
    if written:
        return f"batch {batch}: {' + '.join(written)} committed, checkpoint not"
    if job == "silver_ad_events" and log is not None and log.exists():
        text = log.read_text(errors="replace")
        marker = text.rfind(f"Committed offsets for batch {batch}.")
        if marker >= 0 and MERGE_STARTED in text[marker:]:
            return f"batch {batch}: during MERGE, nothing committed"
    return f"batch {batch}: planned, nothing committed"


def batch_still_running(checkpoint: Path) -> bool:
    """True while a batch of this checkpoint's query runs (on the engine, after its client died)."""
    from lakehouse.runtime import batch_running

    return batch_running(str(checkpoint))
