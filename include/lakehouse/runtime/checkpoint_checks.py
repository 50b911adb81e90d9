"""The checkpoint against its tables: a checkpoint that does not match them is refused, with the recovery.

A checkpoint that does not match what its tables recorded of it (missing, replaced, older than
the tables, partly deleted, damaged) would make Delta skip batches as already written, or write
them twice, without an error. The job refuses to start instead, and says what to do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse import checkpoint_log
from lakehouse.config import Table
from lakehouse.errors import ConfigError
from lakehouse.files import lake_path, write_atomic

if TYPE_CHECKING:
    pass


class CheckpointMismatch(ConfigError):
    """A checkpoint does not agree with what its tables recorded; the message names the recovery."""


@dataclass(frozen=True)
class Written:
    """A table a streaming query writes, and the Delta transaction app id its writes carry.

    ``app_id`` None: the Delta streaming sink, whose app id is the query id (the checkpoint's).
    """

    table: Table
    app_id: str | None = None


IDENTITY_SUFFIX = ".identity.json"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def identity_record(checkpoint: str) -> Path:
    """Where the query id of ``checkpoint`` is recorded: beside the folder (``gen=N.identity.json``),
    so the record outlives a checkpoint folder that is moved away, deleted or replaced."""
    path = lake_path(checkpoint)
    return path.with_name(path.name + IDENTITY_SUFFIX)


def _recorded_query_id(checkpoint: str) -> str | None:
    return _query_id_in(identity_record(checkpoint), "query_id")


RETIRED_SUFFIX = ".retired.json"


def retire_streaming_writers(table: Table, generation: int) -> list[str]:
    """Record the streaming queries that have written ``table`` (the Delta-sink query ids its log
    holds) as retired, beside checkpoint generation ``generation`` (``gen=N.retired.json``).

    A full refresh calls it before moving the table to a new generation: Delta keeps a writer's
    transaction in the log for good, and without this record a query whose checkpoint folder and
    identity record are both gone would make every new generation refuse to start. The ids retired.
    """
    from lakehouse import delta_log

    ids = sorted(
        app_id for app_id in delta_log.committed_txns(table.path) if _UUID.fullmatch(app_id)
    )
    if ids:
        path = lake_path(table.checkpoint(generation))
        write_atomic(path.with_name(path.name + RETIRED_SUFFIX), json.dumps({"query_ids": ids}))
    return ids


def _retired_ids(root: Path) -> set[str]:
    ids: set[str] = set()
    for record in root.rglob(f"gen=*{RETIRED_SUFFIX}"):
        try:
            ids |= set(json.loads(record.read_text())["query_ids"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return ids


def _query_id_in(path: Path, key: str) -> str | None:
    try:
        return str(json.loads(path.read_text())[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_identity(checkpoint: str, name: str, query_id: str) -> None:
    """Record which query a checkpoint belongs to, once (its first run, or the first since this check exists)."""
    if _recorded_query_id(checkpoint) == query_id:
        return
    write_atomic(
        identity_record(checkpoint),
        json.dumps({"query_id": query_id, "writer": name, "checkpoint": str(checkpoint)}),
    )


@dataclass(frozen=True)
class CheckpointLog:
    """What a streaming checkpoint holds: its query id and the batch ids of its offsets and commit logs."""

    path: Path
    query_id: str | None
    offsets: tuple[int, ...]
    commits: tuple[int, ...]
    damaged: tuple[
        str, ...
    ]  # unreadable files, relative to the checkpoint: "metadata", "offsets/7"

    @classmethod
    def read(cls, checkpoint: str) -> CheckpointLog:
        path = lake_path(checkpoint)
        damaged = []
        query_id = _query_id_in(path / "metadata", "id")
        if query_id is None and (path / "metadata").exists():
            damaged.append("metadata")
        logs = {}
        for folder in ("commits", "offsets"):  # commits first: see check_checkpoint
            ids = checkpoint_log.batches(checkpoint, folder)
            damaged += [
                f"{folder}/{n}"
                for n in ids
                if not _log_file_readable(path / folder / str(n), folder)
            ]
            logs[folder] = ids
        return cls(path, query_id, logs["offsets"], logs["commits"], tuple(damaged))

    @property
    def planned(self) -> int:
        """The newest batch with an offsets file (-1: none)."""
        return max(self.offsets, default=-1)

    @property
    def committed(self) -> int:
        """The newest batch with a commit file (-1: none)."""
        return max(self.commits, default=-1)

    def files(self, folder: str, batch: int) -> list[str]:
        """A log file and its hidden checksum file, as a recovery names them."""
        return [str(path) for path in checkpoint_log.log_files(self.path, folder, batch)]


def _log_file_readable(path: Path, folder: str) -> bool:
    """Spark's log format: a version line ``vN``, then JSON lines (offsets: metadata, then one per source, "-" none)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    if not lines or not re.fullmatch(r"v[0-9]+", lines[0]):
        return False
    body = lines[1:]
    if len(body) < (2 if folder == "offsets" else 1):
        return False
    try:
        return all(line == "-" or isinstance(json.loads(line), dict) for line in body)
    except ValueError:
        return False


def refresh_advice(layer: str) -> str:
    """How to rebuild ``layer`` (and everything computed from it) when its checkpoint cannot be trusted."""
    return (
        f"Recovery: a full refresh of {layer}, which empties {layer} and every layer computed "
        f"from it (Delta keeps the old versions) and moves their queries to a new checkpoint generation: trigger "
        f'ysb_hourly with full_refresh={layer}, or run `spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" '
        f"jobs/full_refresh.py --layer {layer}` and then every task from {layer} on. Do not delete or edit "
        "checkpoint files by hand: a batch planned again under a number the tables already hold is skipped by "
        "Delta as written (its input lost), or written twice by the Delta sink."
    )


def _delete(files: list[str], task: str, why: str) -> str:
    return f"Recovery: delete {' and '.join(files)} (nothing else), then rerun {task}: {why}."


def check_checkpoint(checkpoint: str, name: str, writes=(), retained: int = 100) -> None:
    """Refuse to start a query whose checkpoint does not agree with what its tables recorded of it.

    The tables' record is Delta's transaction state (:func:`lakehouse.sinks.committed_txns`): the
    newest batch id each table holds from this writer. A normal crash leaves at most the newest
    planned batch written and not checkpointed, which Spark replays and Delta skips; anything
    else (no checkpoint while the tables hold batches, a checkpoint of another query, one older
    than its tables, offsets or commit files missing or damaged) fails with a
    :class:`CheckpointMismatch` that names what was found and a recovery that is safe to follow.
    """
    from lakehouse import catalog, delta_log

    txns_of = {
        written.table.name: delta_log.committed_txns(written.table.path) for written in writes
    }
    layer = name.split(".")[0]
    try:
        task = catalog.task(name).task
    except ConfigError:
        task = f"the {name} job"
    state = CheckpointLog.read(checkpoint)
    recorded = _recorded_query_id(checkpoint)
    where = f"{name}: checkpoint {checkpoint}"
    if recorded and state.query_id and recorded != state.query_id:
        raise CheckpointMismatch(
            f"{where} belongs to another query: its metadata names query {state.query_id}, but the query whose "
            f"batches the tables hold is {recorded} (recorded in {identity_record(checkpoint)}). A checkpoint "
            "copied or restored from elsewhere does not match its tables: resuming from it would skip or repeat "
            f"batches. Nothing was written. {refresh_advice(layer)}"
        )
    if "metadata" in state.damaged:
        raise CheckpointMismatch(
            f"{where}: its metadata file (the query id) is damaged. Nothing was written. {refresh_advice(layer)}"
        )

    # What the tables hold of this writer: app id -> newest batch id (-1: none).
    sink_query = state.query_id or recorded
    held: dict[str, tuple[str, int]] = {}  # table -> (app id, batch)
    unattributed: dict[str, tuple[str, int]] = {}
    for written in writes:
        txns = txns_of[written.table.name]
        if written.app_id is not None:
            held[written.table.name] = (written.app_id, txns.get(written.app_id, -1))
        elif sink_query:
            held[written.table.name] = (sink_query, txns.get(sink_query, -1))
        elif not state.offsets:
            # A new Delta-sink checkpoint with no record: the table's streaming writers must all be
            # other checkpoints' (recorded beside them, or named in their metadata), or this one was
            # moved away before its query id was recorded.
            root = lake_path(written.table.checkpoint_root)
            known = {_query_id_in(p, "query_id") for p in root.rglob(f"gen=*{IDENTITY_SUFFIX}")}
            known |= {
                _query_id_in(p, "id")
                for p in root.rglob("gen=*/metadata")
                if re.fullmatch(r"gen=\d+", p.parent.name)
            }
            known |= _retired_ids(root)  # writers of generations a full refresh left behind
            for app_id, version in txns.items():
                if _UUID.fullmatch(app_id) and app_id not in known:
                    unattributed[written.table.name] = (app_id, version)
    holding = {table: (app_id, batch) for table, (app_id, batch) in held.items() if batch >= 0}

    def holds(tables: dict[str, tuple[str, int]]) -> str:
        return ", ".join(
            f"{table} holds batch {batch} (Delta transaction {app_id}, version {batch})"
            for table, (app_id, batch) in tables.items()
        )

    if not state.offsets and not state.commits:
        if holding or unattributed:
            detail = (
                holds(holding)
                if holding
                else (
                    holds(unattributed)
                    + ", written by a streaming query that no checkpoint of the table is recorded for"
                )
            )
            raise CheckpointMismatch(
                f"{where} holds no batch (moved away, deleted or never copied), but the tables already hold this "
                f"writer's: {detail}. A new checkpoint would number its batches from 0 again: Delta would skip "
                f"them as already written, or append every input again. Nothing was written. {refresh_advice(layer)}"
            )
        return  # a new checkpoint for new tables

    problems = []
    if state.query_id is None:
        problems.append("its metadata file (the query id) is missing")
    planned, committed = state.planned, state.committed
    # Spark purges log files older than its retained batches (in no particular order, so a driver
    # killed while purging may leave holes there): only the retained window must be whole.
    for folder, ids in (("offsets", state.offsets), ("commits", state.commits)):
        window = [n for n in ids if n >= max(planned, committed) - retained + 2]
        missing = sorted(set(range(window[0], window[-1] + 1)) - set(window)) if window else []
        if missing:
            problems.append(f"{folder}/ lacks batch(es) {', '.join(map(str, missing))}")
    if committed > planned:
        problems.append(f"commits/{committed} exists but offsets/{committed} does not")
    elif committed < planned - 1:
        problems.append(
            f"commits/ ends at batch {committed}, offsets/ at {planned} (commit files deleted)"
        )
    damaged = [f for f in state.damaged if f != "metadata"]
    if damaged:
        problems.append(f"damaged (truncated or not Spark's format): {', '.join(damaged)}")
    ahead = {
        table: (app_id, batch) for table, (app_id, batch) in holding.items() if batch > planned
    }
    if ahead:
        problems.append(
            f"its newest planned batch is {planned} (newest committed {committed}) but {holds(ahead)}: the "
            "checkpoint is older than its tables (restored from an older copy, or its newest files deleted)"
        )
    if not problems:
        return

    found = f"{where} does not agree with its tables: {'; '.join(problems)}."
    # The recoveries short of a full refresh, each only where it is provably safe: the files to
    # delete describe a batch that no table holds yet, or one whose input is still recorded.
    known_all = bool(writes) and len(held) == len(writes)
    newest_held = max((batch for _, batch in held.values()), default=-1)
    if not ahead and len(problems) == 1:
        if damaged == [f"commits/{committed}"] and committed == planned:
            why = (
                f"batch {committed} is replayed with the same input (offsets/{committed} is intact) and every "
                "table skips what it already holds of it"
            )
            raise CheckpointMismatch(
                f"{found} {_delete(state.files('commits', committed), task, why)}"
            )
        if damaged == [f"offsets/{planned}"] and known_all and newest_held < planned:
            files = state.files("offsets", planned) + (
                state.files("commits", planned) if committed == planned else []
            )
            since = f"where batch {planned - 1} ended" if planned > 0 else "the start"
            why = f"batch {planned} is planned again from {since} and written once"
            raise CheckpointMismatch(
                f"{found} No table holds batch {planned} yet. {_delete(files, task, why)}"
            )
        if committed == planned + 1 and not damaged and known_all and newest_held < committed:
            why = f"batch {committed} is planned again from where batch {planned} ended and written once"
            raise CheckpointMismatch(
                f"{found} No table holds batch {committed}. {_delete(state.files('commits', committed), task, why)}"
            )
    raise CheckpointMismatch(
        f"{found} Resuming from it would plan batches the tables already hold with other input (Delta would "
        f"skip them) or miss some. Nothing was written. {refresh_advice(layer)}"
    )


def explain_query_failure(error: Exception, name: str, checkpoint: str) -> Exception:
    """Turn a streaming failure caused by the checkpoint into an error that says what happened and how to recover."""
    message = str(error)
    trace = f"{message}\n{getattr(error, '_stackTrace', '') or ''}"
    first = message.splitlines()[0][:300] if message else type(error).__name__
    table, layer = name, name.split(".")[0]
    if "CONCURRENT_STREAM_LOG_UPDATE" in trace or "Multiple streaming jobs detected" in trace:
        batch = re.search(r"detected for (\d+)", trace)
        which = f"batch {batch.group(1)}" if batch else "a batch"
        return ConfigError(
            f"{table}: while this driver ran {which}, that batch appeared in the commit log of checkpoint "
            f"{checkpoint} ({first}): another driver ran the same query at the same time (on another machine, or "
            "on a file system that does not honour the checkpoint lock), or the checkpoint's files were changed by "
            "hand while the job ran. This driver stopped before committing; what it wrote carries the batch's "
            "transaction ids, so nothing was written twice. Recovery: make sure no other driver runs on this "
            f"checkpoint, then rerun {table}'s job: it checks the checkpoint against its tables before it starts "
            "and either resumes or says what to do."
        )
    unreadable = (
        "log file was malformed",
        "incomplete log file",
        "unexpected end",
        "next on empty iterator",
        "jsonparseexception",
        "jsoneofexception",
    )
    if any(marker in trace.lower() for marker in unreadable):
        return ConfigError(
            f"{table}: the checkpoint {checkpoint} has a damaged log file that Spark could not read ({first}). "
            f"Nothing was written. {refresh_advice(layer)}"
        )
    incompatible = (
        "not compatible",
        "StateSchemaNotCompatible",
        "schema is not compatible",
        "STATE_STORE_",
        "STREAMING_STATEFUL_OPERATOR",
    )
    if any(marker in message for marker in incompatible):
        return ConfigError(
            f"{table}: the query no longer matches its checkpoint {checkpoint} ({first[:200]}). Nothing was "
            f"written. {refresh_advice(layer)}"
        )
    return error
