"""Files bronze has read that changed since: appended to or rewritten, each refused with its fix.

A landed file is immutable once read (Spark's file source and Auto Loader assume the same): the
source never reads a path twice. :func:`changed_files` compares each file bronze's manifest knows
with what is on disk now and names every change with the exact fix: appended bytes (and a line cut
mid-write, whole) move to a new file; a rewritten file's original content is put back.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path

from lakehouse.files import S3Path, lake_path
from lakehouse.landing.listing import (
    EVENTS_SUFFIX,
    landed_path,
    relative_name,
    source_file_of,
    spark_uri,
    stem,
)
from lakehouse.landing.manifest import (
    LandedIndex,
    folder_of,
    mtime_ms,
    record_ingested_files,
    sha256_of,
)
from lakehouse.landing.problems import LandingProblem, Problem


def changed_files(
    checkpoint: str,
    root: str | Path,
    write: bool = True,
    table_path: str | None = None,
    folders: Iterable[str] | None = None,
    index: LandedIndex | None = None,
) -> list[LandingProblem]:
    """The files bronze has read that were appended to or rewritten since, each with its fix.

    A file whose modification time alone changed (``touch``, a copy with the same bytes) is fine:
    its size and SHA-256 are compared, and the index then keeps its new time. A file moved away
    or deleted is not reported here (bronze keeps its lines). ``write=False``: the index beside
    the checkpoint is read, never written (bronze's job writes it). ``table_path``: bronze's table,
    whose rows say what was read of a file still being written when Spark listed it
    (:func:`record_ingested_files`); without it such a file is reported as rewritten.
    ``folders``: the folders (as in the files' URIs) a run's checks listed: only their files (and
    the ones read while still being written) are looked at; None: every file (a whole look).
    ``index``: bronze's index as the caller has just recorded it (else recorded here).
    """
    index = index or record_ingested_files(checkpoint, False, table_path, root)
    if folders is None:
        records = index.every_record()
    else:
        records = index.records({*folders, *map(folder_of, index.state["unsettled"])})
    root = lake_path(root)
    problems = []
    for uri, known in sorted(records.items()):
        if "batch" not in known:
            continue  # a decision about a file not read yet
        path = landed_path(uri)
        try:
            stat = path.stat()
        except OSError:
            continue
        if mtime_ms(stat) == known["mtime_ms"] and stat.st_size == known.get("size"):
            continue
        size, sha = known.get("size"), known.get("sha256")
        if size is not None and stat.st_size == size and sha256_of(path) == sha:
            index.put(uri, {**known, "mtime_ms": mtime_ms(stat)})  # touched: the same bytes
            continue
        problems.append(_changed(path, root, known, stat.st_size))
    if write:
        index.save()
    return problems


def late_files(index: LandedIndex, root: str | Path, listed: Iterable[str]) -> list[LandingProblem]:
    """The files this run read (``index.recorded_now``) from folders its checks did not list.

    The source reads any new file of the date folders it lists; the checks before the run
    (copies, gzip payloads) list only the hour folders that can hold new files
    (:mod:`lakehouse.landing.window`), so such a file is named here, after the read, and recorded
    like any other.
    """
    root = lake_path(root)
    listed = set(listed)
    problems = []
    for uri in sorted(index.recorded_now):
        if folder_of(uri) in listed:
            continue
        known = index.get(uri) or {}
        original = None
        if known.get("sha256") and known.get("size") is not None:
            original = index.original(known)
        copy = (
            f"; the same bytes as {relative_name(landed_path(original), root)}, so its lines are "
            "in bronze twice (silver counts the second as duplicates)"
            if original and original != uri
            else ""
        )
        problems.append(
            LandingProblem(
                relative_name(landed_path(uri), root),
                Problem.LATE_IN_OLD_FOLDER,
                "landed in an hour folder older than the ones bronze's checks list each run: read "
                f"by the file source, checked after the read{copy}",
                "nothing if it is a late delivery of that hour; land new files in the current "
                "hour's folder so that they are checked before they are read",
                True,
                copy_of=relative_name(landed_path(original), root) if copy else None,
            )
        )
    return problems


def _changed(path: Path, root: Path, known: dict, now: int) -> LandingProblem:
    relative = relative_name(path, root)
    size, sha = known.get("size"), known.get("sha256")
    quoted = shlex.quote(str(path))
    rest = path.with_name(f"{stem(path.name)}-after-{size}{EVENTS_SUFFIX}")
    temp = path.with_name(f".{rest.name}.tmp")
    if size is not None and now > size and sha256_of(path, size) == sha:
        # A line cut mid-write (bronze read its fragment) moves whole into the new file: the
        # completed line is read from there, the fragment stays as read (quarantined as history).
        start = _line_start(path, size)
        cut = (
            ""
            if start == size
            else f", which ended {size - start} byte(s) into a line cut mid-write (bronze read "
            "that fragment: quarantined as malformed_json)"
        )
        # A shell command for a local landing zone; on object storage the same steps by its tools.
        command = (
            None
            if isinstance(path, S3Path)
            else f"tail -c +{start + 1} {quoted} > {shlex.quote(str(temp))} && truncate -s {size} "
            f"{quoted} && mv {shlex.quote(str(temp))} {shlex.quote(str(rest))}"
        )
        moved = (
            "the appended bytes" if start == size else "the cut line, whole, and the bytes after it"
        )
        return LandingProblem(
            relative,
            Problem.APPENDED,
            f"{now - size} byte(s) appended after bronze read its first {size} byte(s){cut}; a "
            "landed file is read once, so they are not read",
            f"move {moved} into a new file and cut this one back to what bronze read "
            f"({command or f'its first {size} byte(s); bytes {start} on into {rest}'}); the next "
            "run reads the new file"
            + ("" if start == size else "; the fragment's quarantine row stays as history"),
            False,
            command,
        )
    was = f"{size} byte(s), sha256 {sha}" if size is not None else "its content then"
    source_file = source_file_of(
        known.get("copy_of") or spark_uri(path)
    )  # a copy's: its original's
    return LandingProblem(
        relative,
        Problem.REWRITTEN,
        f"changed after bronze read it ({was}; now {now} byte(s)); a landed file is read once, so "
        "its new content is not read",
        "put its original content back (bronze.ad_events holds its lines: SELECT raw_line FROM "
        f"bronze.ad_events WHERE source_file = '{source_file}') and land the new content "
        "under a new name: lines whose event_id silver already holds are counted as duplicates, "
        "the rest are inserted",
        False,
    )


def _line_start(path: Path | S3Path, size: int) -> int:
    """Where the line holding byte ``size`` starts: ``size`` itself when the first ``size`` bytes
    end with a line break (CR or LF, as Spark's line reader splits) or are empty."""
    end = size
    with path.open("rb") as handle:
        while end > 0:
            begin = max(0, end - (1 << 20))
            handle.seek(begin)
            chunk = handle.read(end - begin)
            found = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            if found >= 0:
                return begin + found + 1
            end = begin
    return 0
