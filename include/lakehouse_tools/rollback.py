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
   RESTORE commit, safe because it had read every row the table held at the moment (commits it
   skips, a backfill's replace or a compaction, aside; else: refused).

The moment is a UTC time, or an Airflow dag run id: an incremental run's moment is when its first
streaming batch started (``ops.query_progress``); a batch run (a backfill's too) has no streaming
batch, and its moment is its first write: the newest replace, before the run's first check of each
table it checked (``ops.expectation_results`` keeps the run id of every check, made right after
the task's write).

The landing-fed table (bronze) is not rolled back: it is the raw, replayable record of what
landed, and what a bad deployment breaks is computed from it. The ops logs (query progress,
expectation results, maintenance) keep the undone runs: they are history. Refused: a moment before
a table's first version, a full refresh (new checkpoint generation) after the moment, a query
running now, a reader that had not read rows its upstream held at the moment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse import catalog, object_storage
from lakehouse.config import Lakehouse
from lakehouse.errors import ConfigError
from lakehouse.files import S3Path, lake_path
from lakehouse.runtime.locks import driver_running
from lakehouse_tools import storage
from lakehouse_tools.storage import open_delta, utc

if TYPE_CHECKING:
    from lakehouse.config import Table


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
    # the restored upstream table whose RESTORE the offset moves past
    reads_restored: str | None = None


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _commit_log(path: str) -> Path:
    return lake_path(path) / "_delta_log"


def _history(path: str) -> list[dict]:
    return sorted(object_storage.delta_table(path).history(), key=lambda commit: commit["version"])


def _actions(path: str, version: int) -> list[dict]:
    """The actions of one commit of the table (deltalake reads snapshots, not a commit's actions)."""
    commit = _commit_log(path) / f"{version:020d}.json"
    if not commit.exists():
        raise RollbackRefused(
            f"{path}: commit {version} has left the Delta log, so the rollback cannot tell what it "
            "wrote: roll back to a later moment"
        )
    return [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]


def _txns(path: str, versions: range) -> list[tuple[str, int, bool]]:
    """(app id, transaction version, written by a RESTORE) of every ``txn`` action in ``versions`` of the table.

    A RESTORE's txn actions are an earlier rollback's resets, not batches that wrote.
    """
    txns = []
    for version in versions:
        actions = _actions(path, version)
        restore = any(a.get("commitInfo", {}).get("operation") == "RESTORE" for a in actions)
        txns += [
            (a["txn"]["appId"], int(a["txn"]["version"]), restore) for a in actions if "txn" in a
        ]
    return txns


def _streamed(actions: list[dict]) -> bool:
    """Whether a reader of the table (lakehouse.sources.delta_stream: skipChangeCommits) reads rows
    of this commit: it adds rows and removes none (a replace, a MERGE, a RESTORE are skipped; a
    compaction changes no data)."""

    def changes(kind: str) -> bool:
        return any(a[kind].get("dataChange", True) for a in actions if kind in a)

    return changes("add") and not changes("remove")


def plan_table(spec: catalog.TableSpec, table: Table, moment: datetime) -> TableRestore | None:
    """How ``table`` goes back to before ``moment`` (None: nothing written since, or no table)."""

    if not (_commit_log(table.path)).is_dir():
        return None
    history = _history(table.path)
    before = [c["version"] for c in history if c["timestamp"] < _millis(moment)]
    latest = history[-1]["version"]
    if not before:
        raise RollbackRefused(
            f"{spec.name} did not exist before {moment:%Y-%m-%d %H:%M:%S}Z (its first version is newer): "
            "roll back to a later moment, or rebuild it with a full refresh"
        )
    keep = before[-1]
    if keep == latest:
        return None
    apps = {app for app, _, _ in _txns(table.path, range(keep + 1, latest + 1))}
    then = object_storage.delta_table(table.path, version=keep)
    txns = {
        app: -1 if (version := then.transaction_version(app)) is None else version
        for app in sorted(apps)
    }
    return TableRestore(spec.name, table.path, keep, latest, txns)


def _batch_of(path: Path | S3Path) -> int | None:
    """The batch a checkpoint file belongs to: offsets/N, commits/N, their .N.crc, a batch note N.json."""
    stem = path.name.removeprefix(".").removesuffix(".crc").removesuffix(".json")
    return int(stem) if stem.isdigit() else None


def _batch_files(folder: Path | S3Path) -> dict[int, Path | S3Path]:
    """offsets/N or commits/N by batch (not their checksums)."""
    return {int(p.name): p for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else {}


def plan(lakehouse: Lakehouse, moment: datetime) -> list[QueryRollback]:
    """The rollback of every query downstream of the landing-fed table to before ``moment``; refuses what is unsafe."""
    from lakehouse.sinks import stream_app_id  # imports pyspark (no JVM starts)

    ingest = next(t for t in catalog.tasks() if t.source and t.streamed)
    plans = []
    for spec in catalog.tasks():
        if spec.name == ingest.name or not spec.streamed:
            continue
        target = lakehouse.table(spec.name)
        checkpoint = lake_path(target.checkpoint())
        generation_started = lake_path(target.checkpoint_root) / "CURRENT"
        if generation_started.exists() and generation_started.stat().st_mtime * 1000 >= _millis(
            moment
        ):
            raise RollbackRefused(
                f"{spec.name} was fully refreshed after {moment:%Y-%m-%d %H:%M:%S}Z (a new checkpoint generation): "
                "a rollback cannot cross a full refresh; run the full refresh again instead"
            )
        restores = [
            r
            for w in catalog.written_by_task(spec)
            if (r := plan_table(w, lakehouse.table(w.name), moment))
        ]
        offsets = _batch_files(checkpoint / "offsets")
        after = [b for b, p in offsets.items() if p.stat().st_mtime * 1000 >= _millis(moment)]
        own = next((r for r in restores if r.name == spec.name), None)
        # the query's writes (not a backfill's)
        stream = stream_app_id(target, target.current_generation())
        undone = _txns(own.path, range(own.keep_version + 1, own.latest_version + 1)) if own else []
        undone_batches = [batch for app, batch, restore in undone if app == stream and not restore]
        first = min([*after, *undone_batches], default=None)
        kept = first - 1 if first is not None else max(offsets, default=-1)
        if kept >= 0 and kept not in _batch_files(checkpoint / "commits"):
            raise RollbackRefused(
                f"{spec.name}: batch {kept} of its checkpoint was planned before the moment but never committed: "
                "let an hourly run finish it, then roll back"
            )
        plans.append(QueryRollback(spec.name, str(checkpoint), first, kept, restores))
    restored = {r.name: r for p in plans for r in p.restores}
    for query in plans:
        upstream = [name for name in catalog.get(query.name).upstream if name in restored]
        if (
            upstream
        ):  # even a query that ran nothing since: its next batch would read the undone commits
            query.reads_restored = upstream[0]
            _check_caught_up(query, restored[upstream[0]])
    return plans


def _end_offset(checkpoint: Path | S3Path, batch: int) -> tuple[list[str], dict]:
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    return lines, json.loads(lines[2])


def _check_caught_up(query: QueryRollback, upstream: TableRestore) -> None:
    """Refuses when the reader had not read rows the upstream's kept version holds: moved past the
    RESTORE, it would never read them. Unread commits that it skips anyway do not count."""
    kept = query.kept_batch
    if kept < 0:
        return  # no kept batch: the query starts over from the restored table's current state
    _, offset = _end_offset(lake_path(query.checkpoint), kept)
    # Delta's source offset: versions before reservoirVersion read, and that version's files up to
    # index (-1: none of it).
    start = int(offset.get("reservoirVersion", 0))
    unread = [
        version
        for version in range(start, upstream.keep_version + 1)
        if _streamed(_actions(upstream.path, version))
    ]
    if unread:
        first = next(c for c in _history(upstream.path) if c["version"] == unread[0])
        written = utc(first["timestamp"])
        raise RollbackRefused(
            f"{query.name} had not read the rows {upstream.name} got in version {unread[0]} "
            f"(written {written:%Y-%m-%d %H:%M:%S}Z) by that moment, and after the rollback it never "
            f"would: roll back to before they were written (--to {_stamp(written)}), or to the "
            "start of a run that followed a successful one"
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


def execute(plans: list[QueryRollback]) -> list[str]:
    """Carry the plan out: restores first, then checkpoints; a line per step done."""
    from deltalake import CommitProperties, Transaction

    busy = [q.name for q in plans if driver_running(q.checkpoint)]
    if busy:
        raise RollbackRefused(
            f"{', '.join(busy)} running now (checkpoint locked): let the run finish, then roll back"
        )
    done = []
    restore_versions = {}
    for query in plans:
        for r in query.restores:
            transactions = [Transaction(app, version) for app, version in r.txns.items()]
            object_storage.delta_table(r.path).restore(
                r.keep_version, commit_properties=CommitProperties(app_transactions=transactions)
            )
            restore_versions[r.name] = object_storage.delta_table(r.path).version()
            done.append(
                f"{r.name}: restored version {r.keep_version} as version {restore_versions[r.name]}"
            )
    for query in plans:
        checkpoint = lake_path(query.checkpoint)
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


def moment_of(lakehouse: Lakehouse, to: str) -> tuple[datetime, str]:
    """The moment ``--to`` names (a UTC time, or an Airflow dag run id), and what it is, in words."""
    try:
        moment = datetime.fromisoformat(to.replace("Z", "+00:00"))
    except ValueError:
        return moment_of_run(lakehouse, to)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)), "the time given"


def moment_of_run(lakehouse: Lakehouse, run_id: str) -> tuple[datetime, str]:
    """When run ``run_id`` (an Airflow dag run id) began to write, and how that was found."""
    quoted = run_id.replace("'", "''")
    if open_delta(lakehouse.table("ops.query_progress").path):
        started = storage.query(
            lakehouse,
            f"select min(batch_started_at) from ops.query_progress where airflow_run_id = '{quoted}'",
        )[1][0][0]
        if started is not None:
            return _aware(started), f"the start of run {run_id}'s first streaming batch"
    if open_delta(lakehouse.table("ops.expectation_results").path):
        checks = storage.query(
            lakehouse,
            "select table_name, min(checked_at) from ops.expectation_results "
            f"where airflow_run_id = '{quoted}' group by table_name",
        )[1]
        declared = {spec.name for spec in catalog.tables()}  # a table since dropped: no write
        writes = [
            write
            for name, checked_at in checks
            if name in declared
            and (write := _replace_before(lakehouse.table(name).path, _aware(checked_at)))
        ]
        if writes:
            return min(writes), f"the first write of batch run {run_id}"
    raise RollbackRefused(
        f"No streaming batch (ops.query_progress) nor check (ops.expectation_results) of run "
        f"{run_id!r} is recorded: copy the run id from Airflow (a run that wrote nothing has "
        "nothing to undo), or give a UTC time, e.g. --to 2026-11-20T03:05:00Z"
    )


def _replace_before(path: str, moment: datetime) -> datetime | None:
    """The time of the table's newest replace of hours (a commit with a predicate) before ``moment``."""
    delta = open_delta(path)
    if delta is None:
        return None
    replaced = [
        c["timestamp"]
        for c in delta.history()
        if c["timestamp"] < _millis(moment)
        and (c.get("operationParameters") or {}).get("predicate")
    ]
    return _aware(utc(max(replaced))) if replaced else None


def _stamp(moment: datetime) -> str:
    """A naive UTC time as ``--to`` takes it, to the millisecond (as Delta times commits)."""
    return moment.isoformat(timespec="milliseconds") + "Z"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
