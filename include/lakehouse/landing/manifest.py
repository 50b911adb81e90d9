"""What bronze has read: the file source's log of files, and bronze's manifest of their bytes.

Spark's file source logs each file it reads (URI, modification time) in its checkpoint
(:func:`ingested_files`); bronze adds what a later look needs to tell a changed file from a
touched one or a copy (size, SHA-256) in a manifest beside the checkpoint
(:func:`record_ingested_files`, ``gen=N.landed_files.json``); for a file that changed between
Spark's listing and the record, from bronze's rows (:mod:`lakehouse.landing.read_back`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lakehouse import checkpoint_log
from lakehouse.files import S3Path, lake_path, write_atomic
from lakehouse.landing.listing import landed_path
from lakehouse.landing.read_back import bytes_read


def ingested_files(checkpoint: str) -> dict[str, int]:
    """The files the source has read in its committed batches, by URI, with their mtime (ms) then.

    From the file source's log (``sources/0``): the newest compaction up to the committed batch,
    then one entry per batch. Empty when nothing is committed or the log cannot be read (the
    checkpoint check reports a damaged checkpoint).
    """
    return {uri: logged_mtime for uri, (logged_mtime, _) in _source_log(checkpoint).items()}


def _source_log(checkpoint: str) -> dict[str, tuple[int, int]]:
    """:func:`ingested_files`, each with the batch that read it: URI -> (mtime in ms, batch id)."""
    committed = checkpoint_log.newest(checkpoint, "commits")
    if committed is None:
        return {}
    try:
        offsets = (lake_path(checkpoint) / "offsets" / str(committed)).read_text(encoding="utf-8")
        log_offset = int(json.loads(offsets.splitlines()[2])["logOffset"])
        entries = {
            int(p.name.split(".")[0]): p
            for p in (lake_path(checkpoint) / "sources" / "0").iterdir()
            if p.name.split(".")[0].isdigit()
        }
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return {}
    first = max(
        (n for n, p in entries.items() if p.name.endswith(".compact") and n <= log_offset),
        default=0,
    )
    files: dict[str, tuple[int, int]] = {}
    for n in range(first, log_offset + 1):
        if n not in entries:
            continue
        for line in entries[n].read_text(encoding="utf-8").splitlines()[1:]:
            entry = json.loads(line)
            files[entry["path"]] = (int(entry["timestamp"]), int(entry.get("batchId", n)))
    return files


def manifest_path(checkpoint: str) -> Path | S3Path:
    """Where bronze keeps what it knows of each file it has read (beside the checkpoint folder)."""
    return lake_path(f"{checkpoint}.landed_files.json")


def sha256_of(path: Path | S3Path, limit: int | None = None) -> str:
    """The SHA-256 of a file's bytes (of its first ``limit`` bytes, when given)."""
    digest = hashlib.sha256()
    left = limit
    with path.open("rb") as handle:
        while left is None or left > 0:
            chunk = handle.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            digest.update(chunk)
            if left is not None:
                left -= len(chunk)
    return digest.hexdigest()


def read_manifest(checkpoint: str) -> dict[str, dict]:
    """Bronze's manifest as stored (empty when there is none yet, or it cannot be read)."""
    try:
        return json.loads(manifest_path(checkpoint).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def write_manifest(checkpoint: str, manifest: dict[str, dict]) -> None:
    """Replace bronze's manifest, whole (readers see the old one or the new one)."""
    write_atomic(manifest_path(checkpoint), json.dumps(manifest, sort_keys=True))


def mtime_ms(stat) -> int:
    """A file's modification time in milliseconds, as the file source logs it."""
    return stat.st_mtime_ns // 1_000_000


def record_ingested_files(
    checkpoint: str, write: bool = True, table_path: str | None = None
) -> dict[str, dict]:
    """Add the files the source read since the last call to bronze's manifest; the manifest.

    ``write=False`` leaves the stored manifest as it is (a read-only look, e.g. status).

    A file is recorded (size, mtime, SHA-256) when its mtime is still the one the source logged
    when it read it. One that changed in between (still being written when Spark listed it) is
    recorded by what bronze's rows at ``table_path`` hold of it
    (:func:`lakehouse.landing.read_back.bytes_read`): its size and SHA-256 then those of the bytes
    read. Without ``table_path``, or when the rows are not its first lines (a rewrite), it is
    recorded without them (its change is reported), and looked at again at each call.
    """
    manifest = read_manifest(checkpoint)
    logged = _source_log(checkpoint)
    added = False
    for uri, (logged_mtime, _) in logged.items():
        if uri in manifest:
            continue
        path = landed_path(uri)
        try:
            stat = path.stat()
            same = mtime_ms(stat) == logged_mtime
            manifest[uri] = {
                "mtime_ms": logged_mtime,
                "size": stat.st_size if same else None,
                "sha256": sha256_of(path) if same else None,
            }
        except OSError:
            manifest[uri] = {"mtime_ms": logged_mtime, "size": None, "sha256": None}
        added = True
    if table_path is not None:
        for uri, known in manifest.items():
            if known.get("size") is None and uri in logged:
                size = bytes_read(checkpoint, table_path, uri, logged[uri][1])
                if size is not None:
                    known.update(size=size, sha256=sha256_of(landed_path(uri), size))
                    added = True
    if added and write:
        write_manifest(checkpoint, manifest)
    return manifest
