"""`lakehouse rollback`: undo what the pipeline wrote since a moment, so the next run redoes it exactly once.

For each streaming query downstream of the landing-fed table (silver, gold, sessions):

1. every table the query writes is restored to its newest version before the moment (Delta
   RESTORE, by the deltalake package: no JVM), and in the same commit each writer's transaction id
   is put back to what it was at that version: the sinks skip a batch whose (app id, batch id) the
   table holds, so without this the redone batches would write nothing;
2. the query's checkpoint forgets its batches from the first undone one (offsets, commits, the
   batch notes), so the next run plans them again from where the last kept batch ended;
3. a query that streams a restored table (gold and sessions read silver) would read the undone
   commits again, which are still in the table's log: its last kept end offset is moved past the
   RESTORE commit, safe only because it had read everything before the moment (else: refused).

The landing-fed table (bronze) is not rolled back: it is the raw, replayable record of what
landed, and what a bad deployment breaks is computed from it. The ops logs (query progress,
expectation results, maintenance) keep the undone runs: they are history. Refused: a moment before
a table's first version, a full refresh (new checkpoint generation) after the moment, a query
running now, a reader that lagged at the moment.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lakehouse import catalog
from lakehouse.config import ConfigError, Lakehouse, TablePaths


class RollbackRefused(ConfigError):
    """The rollback cannot be done safely; the message says why and what to do instead."""


@dataclass
class TableRestore:
    name: str
    path: str
    keep_version: int  # the newest version before the moment
    latest_version: int
    txns: dict[str, int]  # app id -> its transaction version at keep_version (-1: none then)


@dataclass
class QueryRollback:
    """What one streaming query's rollback does: its tables, its checkpoint, the offset it moves."""

    name: str
    checkpoint: str
    first_undone_batch: int | None  # None: the query ran no batch since the moment
    kept_batch: int = -1  # the newest batch the checkpoint keeps (-1: none)
    restores: list[TableRestore] = field(default_factory=list)
    reads_restored: str | None = (
        None  # the restored upstream table whose RESTORE the offset moves past
    )


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _commit_log(path: str) -> Path:
    return Path(path) / "_delta_log"


def _history(path: str) -> list[dict]:
    from deltalake import DeltaTable

    return sorted(DeltaTable(path).history(), key=lambda commit: commit["version"])


def _txns(path: str, versions: range) -> list[tuple[str, int, bool]]:
    """(app id, transaction version, written by a RESTORE) of every ``txn`` action in ``versions`` of the table.

    A RESTORE's txn actions are an earlier rollback's resets, not batches that wrote.
    """
    txns = []
    for version in versions:
        commit = _commit_log(path) / f"{version:020d}.json"
        if not commit.exists():
            raise RollbackRefused(
                f"{path}: commit {version} has left the Delta log; the rollback cannot read what it wrote"
            )
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        restore = any(a.get("commitInfo", {}).get("operation") == "RESTORE" for a in actions)
        txns += [
            (a["txn"]["appId"], int(a["txn"]["version"]), restore) for a in actions if "txn" in a
        ]
    return txns


def plan_table(entry: catalog.Table, table: TablePaths, moment: datetime) -> TableRestore | None:
    """How ``table`` goes back to before ``moment`` (None: nothing written since, or no table)."""
    from deltalake import DeltaTable

    if not (_commit_log(table.path)).is_dir():
        return None
    history = _history(table.path)
    before = [c["version"] for c in history if c["timestamp"] < _millis(moment)]
    latest = history[-1]["version"]
    if not before:
        raise RollbackRefused(
            f"{entry.name} did not exist before {moment:%Y-%m-%d %H:%M:%S}Z (its first version is newer): "
            "roll back to a later moment, or rebuild it with a full refresh"
        )
    keep = before[-1]
    if keep == latest:
        return None
    apps = {app for app, _, _ in _txns(table.path, range(keep + 1, latest + 1))}
    then = DeltaTable(table.path, version=keep)
    txns = {
        app: -1 if (version := then.transaction_version(app)) is None else version
        for app in sorted(apps)
    }
    return TableRestore(entry.name, table.path, keep, latest, txns)


def _batch_of(path: Path) -> int | None:
    """The batch a checkpoint file belongs to: offsets/N, commits/N, their .N.crc, a batch note N.json."""
    stem = path.name.removeprefix(".").removesuffix(".crc").removesuffix(".json")
    return int(stem) if stem.isdigit() else None


def _batch_files(folder: Path) -> dict[int, Path]:
    """offsets/N or commits/N by batch (not their checksums)."""
    return {int(p.name): p for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else {}


def plan(lakehouse: Lakehouse, moment: datetime) -> list[QueryRollback]:
    """The rollback of every query downstream of the landing-fed table to before ``moment``; refuses what is unsafe."""
    from lakehouse.sinks import txn_app_id  # imports pyspark (no JVM starts)

    ingest = next(t for t in catalog.tasks() if t.source and t.streamed)
    plans = []
    for entry in catalog.tasks():
        if entry.name == ingest.name or not entry.streamed:
            continue
        target = lakehouse.table(entry.name)
        checkpoint = Path(target.checkpoint())
        generation_started = Path(target.checkpoint_root, "CURRENT")
        if generation_started.exists() and generation_started.stat().st_mtime * 1000 >= _millis(
            moment
        ):
            raise RollbackRefused(
                f"{entry.name} was fully refreshed after {moment:%Y-%m-%d %H:%M:%S}Z (a new checkpoint generation): "
                "a rollback cannot cross a full refresh; run the full refresh again instead"
            )
        restores = [
            r
            for w in catalog.written_by_task(entry)
            if (r := plan_table(w, lakehouse.table(w.name), moment))
        ]
        offsets = _batch_files(checkpoint / "offsets")
        after = [b for b, p in offsets.items() if p.stat().st_mtime * 1000 >= _millis(moment)]
        own = next((r for r in restores if r.name == entry.name), None)
        stream = txn_app_id(
            target, target.current_generation(), "stream"
        )  # the query's writes (not a backfill's)
        undone = _txns(own.path, range(own.keep_version + 1, own.latest_version + 1)) if own else []
        undone_batches = [batch for app, batch, restore in undone if app == stream and not restore]
        first = min([*after, *undone_batches], default=None)
        kept = first - 1 if first is not None else max(offsets, default=-1)
        if kept >= 0 and kept not in _batch_files(checkpoint / "commits"):
            raise RollbackRefused(
                f"{entry.name}: batch {kept} of its checkpoint was planned before the moment but never committed: "
                "let an hourly run finish it, then roll back"
            )
        plans.append(QueryRollback(entry.name, str(checkpoint), first, kept, restores))
    restored = {r.name: r for p in plans for r in p.restores}
    for query in plans:
        upstream = [name for name in catalog.get(query.name).upstream if name in restored]
        if (
            upstream
        ):  # even a query that ran nothing since: its next batch would read the undone commits
            query.reads_restored = upstream[0]
            _check_caught_up(query, restored[upstream[0]])
    return plans


def _end_offset(checkpoint: Path, batch: int) -> tuple[list[str], dict]:
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    return lines, json.loads(lines[2])


def _check_caught_up(query: QueryRollback, upstream: TableRestore) -> None:
    """A reader whose kept position is not the upstream's kept version would skip or reread rows when moved."""
    kept = query.kept_batch
    if kept < 0:
        return  # no kept batch: the query starts over from the restored table's current state
    _, offset = _end_offset(Path(query.checkpoint), kept)
    if offset.get("reservoirVersion") != upstream.keep_version + 1 or offset.get("index") != -1:
        raise RollbackRefused(
            f"{query.name} had not read {upstream.name} up to version {upstream.keep_version} at the moment "
            f"(its batch {kept} ended at {offset}): roll back to a moment when the pipeline was caught up "
            "(the start of an hourly run that followed a successful one)"
        )


def describe(plans: list[QueryRollback]) -> list[str]:
    """The plan, a line per step."""
    lines = []
    for query in plans:
        for r in query.restores:
            resets = ", ".join(f"{app} -> {version}" for app, version in r.txns.items()) or "none"
            lines.append(
                f"{r.name}: restore version {r.keep_version} (now {r.latest_version}); writers' transaction ids: {resets}"
            )
        if query.first_undone_batch is not None:
            lines.append(
                f"{query.name}: checkpoint {query.checkpoint} forgets batches {query.first_undone_batch} and later"
            )
        if query.reads_restored and query.kept_batch >= 0:
            lines.append(
                f"{query.name}: reads {query.reads_restored} on from after its RESTORE commit"
            )
    return lines or ["Nothing to roll back: no table was written since that moment."]


def _held(checkpoint: Path) -> bool:
    lock = checkpoint / ".driver.lock"
    if not lock.exists():
        return False
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def execute(plans: list[QueryRollback]) -> list[str]:
    """Carry the plan out: restores first, then checkpoints; a line per step done."""
    from deltalake import CommitProperties, DeltaTable, Transaction

    busy = [q.name for q in plans if _held(Path(q.checkpoint))]
    if busy:
        raise RollbackRefused(
            f"{', '.join(busy)} running now (checkpoint locked): let the run finish, then roll back"
        )
    done = []
    restore_versions = {}
    for query in plans:
        for r in query.restores:
            transactions = [Transaction(app, version) for app, version in r.txns.items()]
            DeltaTable(r.path).restore(
                r.keep_version, commit_properties=CommitProperties(app_transactions=transactions)
            )
            restore_versions[r.name] = DeltaTable(r.path).version()
            done.append(
                f"{r.name}: restored version {r.keep_version} as version {restore_versions[r.name]}"
            )
    for query in plans:
        checkpoint = Path(query.checkpoint)
        for folder in (
            checkpoint / "commits",
            checkpoint / "offsets",
            checkpoint.with_name(checkpoint.name + ".batches"),
        ):
            for path in folder.iterdir() if folder.is_dir() else ():
                batch = _batch_of(path)
                if batch is not None and batch > query.kept_batch:
                    path.unlink()
        kept = query.kept_batch
        if query.first_undone_batch is not None:
            done.append(
                f"{query.name}: checkpoint back to batch {kept}; the next run redoes batches {query.first_undone_batch} on"
            )
        if query.reads_restored and kept >= 0:
            lines, offset = _end_offset(checkpoint, kept)
            offset = {
                **offset,
                "reservoirVersion": restore_versions[query.reads_restored] + 1,
                "index": -1,
            }
            lines[2] = json.dumps(offset, separators=(",", ":"))
            (checkpoint / "offsets" / str(kept)).write_text("\n".join(lines))
            (checkpoint / "offsets" / f".{kept}.crc").unlink(
                missing_ok=True
            )  # the checksum of the old content
            done.append(
                f"{query.name}: reads {query.reads_restored} on from version {offset['reservoirVersion']}, after its RESTORE"
            )
    return done


def moment_of_run(lakehouse: Lakehouse, run_id: str) -> datetime:
    """When run ``run_id`` (an Airflow dag run id) started its first query, from ``ops.query_progress``."""
    from lakehouse_tools.cli import query

    quoted = run_id.replace("'", "''")
    _, rows = query(
        lakehouse,
        f"select min(batch_started_at) from ops.query_progress where airflow_run_id = '{quoted}'",
    )
    started = rows[0][0] if rows else None
    if started is None:
        raise RollbackRefused(
            f"No query of run {run_id!r} is in ops.query_progress: not a run id, or the run wrote nothing"
        )
    return started if started.tzinfo else started.replace(tzinfo=UTC)
