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
from datetime import datetime, timezone
from pathlib import Path

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d{10}\.\d{10})?\.parquet$")


def is_delta_table(path: str) -> bool:
    """True when ``path`` holds a Delta table (a log with at least one commit or checkpoint)."""
    log = Path(path) / "_delta_log"
    try:
        return any(_COMMIT.match(p.name) or _CHECKPOINT.match(p.name) for p in log.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return False


def committed_txns(path: str) -> dict[str, int]:
    """App id -> the newest transaction version committed under it ({} when there is no table)."""
    log = Path(path) / "_delta_log"
    try:
        names = [p.name for p in log.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return {}
    txns: dict[str, int] = {}
    checkpoint = _newest_checkpoint(log, names)
    if checkpoint is not None:
        import pyarrow.parquet as pq  # pyspark's client needs pyarrow: always installed

        parts = sorted(n for n in names if (m := _CHECKPOINT.match(n)) and int(m[1]) == checkpoint)
        for part in parts:
            table = pq.read_table(log / part)
            if "txn" not in table.column_names:
                continue
            for txn in table.column("txn").to_pylist():
                if txn:
                    txns[txn["appId"]] = txn["version"]
    after = checkpoint if checkpoint is not None else -1
    commits = sorted(int(m[1]) for n in names if (m := _COMMIT.match(n)) and int(m[1]) > after)
    for version in commits:
        with open(log / f"{version:020d}.json", encoding="utf-8") as commit:
            for line in commit:
                if '"txn"' in line:
                    action = json.loads(line).get("txn")
                    if action:
                        txns[action["appId"]] = action["version"]
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
            v for v, files in versions.items()
            if len(files) == 1 and ".checkpoint.parquet" in files[0] or len(files) == int(files[0].split(".")[-2])
        ]  # fmt: skip
        return max(complete, default=None)


def latest_version(path: str) -> int | None:
    """The newest committed version of the table at ``path`` (None: no table)."""
    log = Path(path) / "_delta_log"
    try:
        versions = [int(m[1]) for p in log.iterdir() if (m := _COMMIT.match(p.name))]
    except (FileNotFoundError, NotADirectoryError):
        return None
    return max(versions, default=None)


def latest_commit_info(path: str) -> dict:
    """The ``commitInfo`` of the newest commit ({} when there is none)."""
    version = latest_version(path)
    if version is None:
        return {}
    with open(Path(path) / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as commit:
        for line in commit:
            if '"commitInfo"' in line:
                return json.loads(line).get("commitInfo") or {}
    return {}


def tagged_commit_info(path: str, user_metadata: str) -> dict | None:
    """The ``commitInfo`` of the newest commit whose ``userMetadata`` is ``user_metadata`` (None: none).

    Searched newest first: the commits looked for (a micro-batch's MERGE) are recent. Only the
    JSON commits are searched; those that log clean-up removed are gone from the history too.
    """
    log = Path(path) / "_delta_log"
    try:
        versions = sorted((int(m[1]) for p in log.iterdir() if (m := _COMMIT.match(p.name))), reverse=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    for version in versions:
        try:
            with open(log / f"{version:020d}.json", encoding="utf-8") as commit:
                for line in commit:
                    if '"commitInfo"' in line:
                        info = json.loads(line).get("commitInfo") or {}
                        if info.get("userMetadata") == user_metadata:
                            return info
                        break
        except FileNotFoundError:  # removed by log clean-up meanwhile
            continue
    return None


def commit_time(path: str, version: int) -> datetime | None:
    """When ``version`` of the table at ``path`` was committed (None: its commit is gone from the log)."""
    try:
        with open(Path(path) / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as commit:
            for line in commit:
                if '"commitInfo"' in line:
                    millis = (json.loads(line).get("commitInfo") or {}).get("timestamp")
                    if millis is not None:
                        return datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    except FileNotFoundError:
        return None
    return None


def table_id(path: str) -> str | None:
    """The table's id (its ``metaData`` action's), which a streaming reader's offsets name as ``reservoirId``."""
    log = Path(path) / "_delta_log"
    try:
        names = [p.name for p in log.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return None
    for version in sorted((int(m[1]) for n in names if (m := _COMMIT.match(n))), reverse=True):
        with open(log / f"{version:020d}.json", encoding="utf-8") as commit:
            for line in commit:
                if '"metaData"' in line:
                    action = json.loads(line).get("metaData")
                    if action:
                        return action["id"]
    checkpoint = _newest_checkpoint(log, names)
    if checkpoint is not None:
        import pyarrow.parquet as pq

        for part in sorted(n for n in names if (m := _CHECKPOINT.match(n)) and int(m[1]) == checkpoint):
            for action in pq.read_table(log / part, columns=["metaData"]).column("metaData").to_pylist():
                if action:
                    return action["id"]
    return None


def versions_of_txns(path: str, app_id: str, txn_versions: set[int], newest: int = 200) -> dict[int, int]:
    """Transaction version -> the table version that committed it, for ``app_id``'s writes.

    Searched in the newest ``newest`` JSON commits (a query's batches just committed are recent);
    a batch that wrote nothing (or was not found) is left out.
    """
    log = Path(path) / "_delta_log"
    try:
        versions = sorted((int(m[1]) for p in log.iterdir() if (m := _COMMIT.match(p.name))), reverse=True)[:newest]
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found: dict[int, int] = {}
    for version in versions:
        try:
            with open(log / f"{version:020d}.json", encoding="utf-8") as commit:
                for line in commit:
                    if '"txn"' in line:
                        action = json.loads(line).get("txn") or {}
                        if action.get("appId") == app_id and action.get("version") in txn_versions:
                            found.setdefault(action["version"], version)
        except FileNotFoundError:
            continue
        if len(found) == len(txn_versions):
            break
    return found


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
        try:
            with open(Path(path) / "_delta_log" / f"{current:020d}.json", encoding="utf-8") as commit:
                for line in commit:
                    action = json.loads(line)
                    if "metaData" in action or "protocol" in action:
                        return True
                    change = action.get("add") or action.get("remove")
                    if change is not None and change.get("dataChange", True):
                        return True
        except (OSError, ValueError):
            return True
    return False
