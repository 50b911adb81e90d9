"""What bronze has read: the file source's log of files, and bronze's manifest of their bytes.

Spark's file source logs each file it reads (URI, modification time) in its checkpoint
(:func:`ingested_files`); bronze adds what a later look needs to tell a changed file from a
touched one or a copy (size, SHA-256) in a manifest beside the checkpoint
(:func:`record_ingested_files`, ``gen=N.landed_files.json``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lakehouse import checkpoint_log
from lakehouse.files import S3Path, lake_path, write_atomic
from lakehouse.landing.listing import landed_path


def ingested_files(checkpoint: str) -> dict[str, int]:
    """The files the source has read in its committed batches, by URI, with their mtime (ms) then.

    From the file source's log (``sources/0``): the newest compaction up to the committed batch,
    then one entry per batch. Empty when nothing is committed or the log cannot be read (the
    checkpoint check reports a damaged checkpoint).
    """
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
    files: dict[str, int] = {}
    for n in range(first, log_offset + 1):
        if n not in entries:
            continue
        for line in entries[n].read_text(encoding="utf-8").splitlines()[1:]:
            entry = json.loads(line)
            files[entry["path"]] = int(entry["timestamp"])
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


def record_ingested_files(checkpoint: str, write: bool = True) -> dict[str, dict]:
    """Add the files the source read since the last call to bronze's manifest; the manifest.

    ``write=False`` leaves the stored manifest as it is (a read-only look, e.g. status).

    A file is recorded (size, mtime, SHA-256) when its mtime is still the one the source logged
    when it read it; one that changed in between is recorded without them (its change is reported).
    """
    manifest = read_manifest(checkpoint)
    added = False
    for uri, logged_mtime in ingested_files(checkpoint).items():
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
    if added and write:
        write_manifest(checkpoint, manifest)
    return manifest
