"""What a Delta table's log records, read straight from ``_delta_log`` (no Spark, no JVM).

The checks before a streaming query starts need Delta's transaction state (the ``txn`` actions:
the newest batch id each writer committed), which neither Delta's SQL nor its Python API exposes,
and which a Spark Connect client cannot reach through a JVM. The log is Delta's public protocol
(PROTOCOL.md): the newest checkpoint (Parquet, named by ``_last_checkpoint``) holds the state up
to its version, and the JSON commits after it hold each later commit's actions.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from lakehouse.files import lake_path

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d{10}\.\d{10})?\.parquet$")


def _log(path: str) -> tuple[Path, list[str]] | None:
    """The table's ``_delta_log`` folder and the names in it (None: no such folder)."""
    log = lake_path(path) / "_delta_log"
    try:
        return log, [p.name for p in log.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return None


def _commit_versions(names: list[str], newest_first: bool = False) -> list[int]:
    """The versions of the JSON commits among ``names``, oldest first unless ``newest_first``."""
    return sorted((int(m[1]) for n in names if (m := _COMMIT.match(n))), reverse=newest_first)


def _read_commit(log: Path, version: int, kinds: tuple[str, ...]) -> list[dict]:
    """The actions of one JSON commit that are of ``kinds``, in order (raises OSError, ValueError)."""
    with (log / f"{version:020d}.json").open(encoding="utf-8") as commit:
        # A cheap pre-filter: most lines are add/remove actions, parsed only when asked for.
        return [json.loads(line) for line in commit if any(f'"{kind}"' in line for kind in kinds)]


def _actions(log: Path, version: int, kind: str) -> list[dict]:
    """The ``kind`` actions' bodies ("txn", "commitInfo", ...) of one JSON commit; none when it is gone."""
    try:
        actions = _read_commit(log, version, (kind,))
    except FileNotFoundError:  # removed by log clean-up meanwhile
        return []
    return [action[kind] for action in actions if action.get(kind)]


def _commit_actions(log: Path, version: int, kinds: tuple[str, ...]) -> list[dict] | None:
    """The actions of one JSON commit that are of ``kinds``, in order; None when it cannot be read (gone, torn)."""
    try:
        return _read_commit(log, version, kinds)
    except (OSError, ValueError):
        return None


def _commit_info(log: Path, version: int) -> dict | None:
    return next(iter(_actions(log, version, "commitInfo")), None)


def _checkpoint_actions(log: Path, names: list[str], kind: str, checkpoint: int | None):
    """The ``kind`` actions of checkpoint version ``checkpoint`` (none when it is None)."""
    if checkpoint is None:
        return
    import pyarrow.parquet as pq  # pyspark's client needs pyarrow: always installed

    for part in sorted(n for n in names if (m := _CHECKPOINT.match(n)) and int(m[1]) == checkpoint):
        if kind in pq.read_schema(log / part).names:
            yield from (
                a for a in pq.read_table(log / part, columns=[kind]).column(kind).to_pylist() if a
            )


def is_delta_table(path: str) -> bool:
    """True when ``path`` holds a Delta table (a log with at least one commit or checkpoint)."""
    found = _log(path)
    return found is not None and any(_COMMIT.match(n) or _CHECKPOINT.match(n) for n in found[1])


def committed_txns(path: str) -> dict[str, int]:
    """App id -> the newest transaction version committed under it ({} when there is no table)."""
    found = _log(path)
    if found is None:
        return {}
    log, names = found
    after = _newest_checkpoint(log, names)
    txns = {txn["appId"]: txn["version"] for txn in _checkpoint_actions(log, names, "txn", after)}
    for version in _commit_versions(names):
        if after is None or version > after:
            txns.update((txn["appId"], txn["version"]) for txn in _actions(log, version, "txn"))
    return txns


def _newest_checkpoint(log: Path, names: list[str]) -> int | None:
    """The version of the newest complete checkpoint (``_last_checkpoint`` says which; else the files do)."""
    try:
        return int(json.loads((log / "_last_checkpoint").read_text())["version"])
    except (OSError, ValueError, KeyError):
        versions = {}
        for name in names:
            match = _CHECKPOINT.match(name)
            if match:
                versions.setdefault(int(match[1]), []).append(name)
        # A multi-part checkpoint is complete when all its parts exist (".<part>.<parts>.parquet").
        complete = [
            v
            for v, files in versions.items()
            if len(files) == 1
            and ".checkpoint.parquet" in files[0]
            or len(files) == int(files[0].split(".")[-2])
        ]
        return max(complete, default=None)


def latest_version(path: str) -> int | None:
    """The newest committed version of the table at ``path`` (None: no table)."""
    found = _log(path)
    return max(_commit_versions(found[1]), default=None) if found else None


def latest_commit_info(path: str) -> dict:
    """The ``commitInfo`` of the newest commit ({} when there is none)."""
    version = latest_version(path)
    if version is None:
        return {}
    return _commit_info(lake_path(path) / "_delta_log", version) or {}


# Commits that change no row: a file compaction, a vacuum's start and end.
MAINTENANCE_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END"})


def latest_data_commit_info(path: str) -> dict:
    """The ``commitInfo`` of the newest commit that wrote rows (not maintenance); {} when none is
    in the JSON log."""
    found = _log(path)
    if found is None:
        return {}
    log, names = found
    for version in _commit_versions(names, newest_first=True):
        info = _commit_info(log, version) or {}
        if info.get("operation") not in MAINTENANCE_OPERATIONS:
            return info
    return {}


def rows_added_since(path: str, version: int | None, operation: str) -> int:
    """Rows that the commits of ``operation`` after ``version`` (None: from the first) added to
    the table at ``path``, from their ``numOutputRows`` metric."""
    found = _log(path)
    if found is None:
        return 0
    log, names = found
    start = -1 if version is None else version
    infos = (_commit_info(log, v) or {} for v in _commit_versions(names) if v > start)
    return sum(
        int(info.get("operationMetrics", {}).get("numOutputRows", 0))
        for info in infos
        if info.get("operation") == operation
    )


def tagged_commit_info(path: str, user_metadata: str) -> dict | None:
    """The ``commitInfo`` of the newest commit whose ``userMetadata`` is ``user_metadata``, with its ``version`` (None: none).

    Searched newest first: the commits looked for (a micro-batch's MERGE) are recent. Only the
    JSON commits are searched; those that log clean-up removed are gone from the history too.
    """
    found = _log(path)
    if found is None:
        return None
    log, names = found
    for version in _commit_versions(names, newest_first=True):
        info = _commit_info(log, version)
        if info is not None and info.get("userMetadata") == user_metadata:
            return {**info, "version": version}
    return None


def commit_time(path: str, version: int) -> datetime | None:
    """When ``version`` of the table at ``path`` was committed (None: its commit is gone from the log)."""
    millis = (_commit_info(lake_path(path) / "_delta_log", version) or {}).get("timestamp")
    return None if millis is None else datetime.fromtimestamp(millis / 1000, tz=UTC)


def _newest_metadata(path: str) -> dict | None:
    """The table's current ``metaData`` action (its id, schema, properties); None: no table."""
    found = _log(path)
    if found is None:
        return None
    log, names = found
    # The checkpoint holds the metaData of its version: only the commits after it can change it
    # (a month of hourly commits kept by log retention is not read every run).
    checkpoint = _newest_checkpoint(log, names)
    for version in _commit_versions(names, newest_first=True):
        if checkpoint is not None and version <= checkpoint:
            break
        for metadata in _actions(log, version, "metaData"):
            return metadata
    for metadata in _checkpoint_actions(log, names, "metaData", checkpoint):
        return metadata
    return None


def table_id(path: str) -> str | None:
    """The table's id (its ``metaData`` action's), which a streaming reader's offsets name as ``reservoirId``."""
    metadata = _newest_metadata(path)
    return metadata and metadata["id"]


def schema_fields(path: str) -> list[dict] | None:
    """The fields of the table's current schema, as its log records them (None: no table)."""
    metadata = _newest_metadata(path)
    return metadata and json.loads(metadata["schemaString"])["fields"]


def partition_columns(path: str) -> list[str] | None:
    """The table's partition columns, as its log records them (None: no table)."""
    metadata = _newest_metadata(path)
    return metadata and list(metadata.get("partitionColumns") or [])


def versions_of_txns(
    path: str, app_id: str, txn_versions: set[int], newest: int = 200
) -> dict[int, int]:
    """Transaction version -> the table version that committed it, for ``app_id``'s writes.

    Searched in the newest ``newest`` JSON commits (a query's batches just committed are recent);
    a batch that wrote nothing (or was not found) is left out.
    """
    found = _log(path)
    if found is None:
        return {}
    log, names = found
    versions: dict[int, int] = {}
    for version in _commit_versions(names, newest_first=True)[:newest]:
        for txn in _actions(log, version, "txn"):
            if txn.get("appId") == app_id and txn.get("version") in txn_versions:
                versions.setdefault(txn["version"], version)
        if len(versions) == len(txn_versions):
            break
    return versions


def data_changed_since(path: str, version: int) -> bool:
    """Does any commit from ``version`` on change the table's data (or its schema)?

    Compaction (OPTIMIZE: files added and removed with ``dataChange: false``) and VACUUM's
    START/END commits do not; a streaming reader finds nothing in them. True when unsure (a
    commit gone from the log, an unreadable line).
    """
    latest = latest_version(path)
    if latest is None:
        return True
    for current in range(version, latest + 1):
        actions = _commit_actions(
            lake_path(path) / "_delta_log", current, ("metaData", "protocol", "add", "remove")
        )
        if actions is None:
            return True
        for action in actions:
            if "metaData" in action or "protocol" in action:
                return True
            change = action.get("add") or action.get("remove")
            if change is not None and change.get("dataChange", True):
                return True
    return False


def bytes_added_since(path: str, version: int) -> int | None:
    """Bytes of the data files the commits from ``version`` on added with new data (not a
    compaction's rewrite): what a streaming reader that has read the versions before gets next.
    None when unsure (no table, a commit gone from the log or unreadable)."""
    latest = latest_version(path)
    if latest is None:
        return None
    total = 0
    for current in range(version, latest + 1):
        actions = _commit_actions(lake_path(path) / "_delta_log", current, ("add",))
        if actions is None:
            return None
        total += sum(
            int(action["add"].get("size") or 0)
            for action in actions
            if action["add"].get("dataChange", True)
        )
    return total


def _live_files(path: str) -> dict[tuple[str, str], dict] | None:
    """The ``add`` actions of the table's live files (None: no table, or a commit that cannot be read).

    The newest checkpoint's ``add`` actions and the commits' after it, less the ``remove``\\ d ones,
    keyed by file and deletion vector (an UPDATE swaps a file's vector).
    """
    found = _log(path)
    if found is None:
        return None
    log, names = found
    after = _newest_checkpoint(log, names)

    def key(action: dict) -> tuple[str, str]:
        return action["path"], json.dumps(action.get("deletionVector"), sort_keys=True)

    live = {key(add): add for add in _checkpoint_actions(log, names, "add", after)}
    for version in _commit_versions(names):
        if after is not None and version <= after:
            continue
        actions = _commit_actions(log, version, ("add", "remove"))
        if actions is None:
            return None
        for action in actions:
            if "remove" in action:
                live.pop(key(action["remove"]), None)
            elif "add" in action:
                live[key(action["add"])] = action["add"]
    return live


def live_files(path: str) -> list[dict] | None:
    """The ``add`` actions of the table's live files: path, partition values, statistics (a JSON
    string, as written) and deletion vector; None when the log cannot tell (no table, a torn commit)."""
    live = _live_files(path)
    if live is None:
        return None
    # A checkpoint's partition values are a map, which pyarrow reads as (key, value) pairs: as dicts,
    # like a JSON commit's.
    return [
        {**add, "partitionValues": dict(add["partitionValues"])}
        if isinstance(add.get("partitionValues"), list)
        else add
        for add in live.values()
    ]


def may_hold_nulls(path: str, column: str) -> bool:
    """Could any row of the table at ``path`` have a null ``column``? False only when every live file's
    statistics say it holds none (no files: none); True when unsure (no table, a file without statistics).

    A file's statistics count its physical rows, deleted ones included: a zero null count is exact.
    """
    live = _live_files(path)
    if live is None:
        return True
    for add in live.values():
        try:
            if json.loads(add.get("stats") or "{}")["nullCount"][column] != 0:
                return True
        except (ValueError, KeyError, TypeError):
            return True
    return False


def data_bytes(*paths: str) -> int | None:
    """Bytes of the live data files of the tables at ``paths``, together; None when unsure (no such
    table, a commit that cannot be read)."""
    total = 0
    for path in paths:
        live = _live_files(path)
        if live is None:
            return None
        total += sum(int(add.get("size") or 0) for add in live.values())
    return total


def files_added(path: str, version: int) -> list[str] | None:
    """The data files commit ``version`` added, relative to the table as the log writes them
    (URL-quoted); None when the commit cannot be read (gone from the log, torn)."""
    actions = _commit_actions(lake_path(path) / "_delta_log", version, ("add",))
    if actions is None:
        return None
    return [action["add"]["path"] for action in actions if "add" in action]
