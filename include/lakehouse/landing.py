"""The landing zone's file contract, checked in plain Python (no Spark): what bronze reads, what it won't.

Bronze's file source reads every visible ``*.jsonl`` file under the landing folder, at any depth
(the producer's layout is ``<date>/<hour>/<part>.jsonl``; a file elsewhere is read too, and
reported, since ``lakehouse status`` places files in producer hours by their folder). A file or
folder whose name starts with ``.`` or ``_`` is hidden: a producer still writing it, ignored until
renamed. Any other name the file system allows (colons, spaces, glob characters, backslashes,
Unicode) is read exactly once: the source lists folders without Hadoop's glob and reads through
the raw local file system (:func:`lakehouse.sources.landing_lines_stream`).

A landed file is immutable once read (Spark's file source and Auto Loader assume the same): the
source never reads a path twice. Bronze records each file it has read (size, modification time,
SHA-256) in a manifest beside its checkpoint; a file appended to or rewritten afterwards is
reported by name with the exact fix (:func:`changed_files`), never read again in part or twice.

:func:`landing_report` is what ``lakehouse status`` (and bronze's summary) say about it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse import checkpoint_log
from lakehouse.files import S3Path, lake_path, read_head, write_atomic

if TYPE_CHECKING:
    from lakehouse.config import Lakehouse

# What the source reads: the name's suffix, and the producer's layout (for status's producer hours).
EVENTS_SUFFIX = ".jsonl"
LAYOUT_DEPTH = 3  # <date>/<hour>/<part>.jsonl under the landing folder
GZIP_MAGIC = b"\x1f\x8b"
_COMPRESSED_SUFFIXES = (".gz", ".gzip", ".bz2", ".zst", ".zstd", ".xz", ".lz4", ".snappy", ".zip")
# Characters java.net.URI keeps as they are in a path (RFC 2396 unreserved, punct, "/" and "@");
# every other ASCII character is percent-encoded, as are non-ASCII spaces and controls.
_URI_PATH_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'(),;:$&+=/@"
)


def spark_uri(path: Path | S3Path) -> str:
    """A landed file's URI as Spark's file source logs it (``file:///...`` or ``s3a://bucket/...``,
    Hadoop's quoting).

    Unlike :meth:`pathlib.Path.as_uri`, colons, ``*`` and non-ASCII letters stay as they are.
    """
    if isinstance(path, S3Path):
        return f"s3a://{path.bucket}" + _quoted(f"/{path.key}")
    return "file://" + _quoted(str(Path(path).absolute()))


def _quoted(path: str) -> str:
    quoted = []
    for char in path:
        if char in _URI_PATH_SAFE or (
            ord(char) > 127 and unicodedata.category(char) not in ("Zs", "Zl", "Zp", "Cc", "Cs")
        ):
            quoted.append(char)
        else:
            quoted.append(
                "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogateescape"))
            )
    return "".join(quoted)


def hidden(relative: Path) -> bool:
    """A path under the landing folder that the source skips: a part starting with ``.`` or ``_``."""
    return any(part.startswith((".", "_")) for part in relative.parts)


def readable_files(root: str | Path) -> dict[str, Path | S3Path]:
    """The files the source reads under ``root`` (visible ``*.jsonl`` at any depth), by :func:`spark_uri`."""
    root = lake_path(root)
    return {
        spark_uri(path): path
        for path in _visible_files(root)
        if path.name.endswith(EVENTS_SUFFIX) and not hidden(path.relative_to(root))
    }


def _visible_files(root: Path | S3Path):
    if isinstance(root, S3Path):  # one listing of every key under the prefix
        for path, _ in root.walk_files():
            if not hidden(path.relative_to(root)):
                yield path
        return
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(name for name in folders if not name.startswith((".", "_")))
        for name in sorted(files):
            if not name.startswith((".", "_")):
                yield Path(folder, name)


@dataclass(frozen=True)
class LandingProblem:
    """A landing file the source does not read as it is, or reads with a caveat, and what to do."""

    file: str  # its path under the landing folder
    reason: str  # a stable code (below)
    detail: str
    what_to_do: str
    read: bool  # True: bronze reads (or has read) it, False: bronze does not
    command: str | None = None  # the fix as one shell command, where there is one

    def as_dict(self) -> dict:
        return asdict(self)


class Problem:
    """Reason codes of :class:`LandingProblem` (stable strings, as the quarantine's)."""

    NOT_JSONL = "not_jsonl"  # a name the source does not read (.json, .txt, no suffix)
    COMPRESSED = "compressed_file"  # .jsonl.gz and the like: not read
    GZIP_PAYLOAD = "gzip_payload_in_jsonl"  # read as text: its lines are quarantined
    OUTSIDE_LAYOUT = "outside_layout"  # read, but not in <date>/<hour>/: no producer hour
    APPENDED = "appended_after_ingestion"  # grew after bronze read it: the new bytes not read
    REWRITTEN = "rewritten_after_ingestion"  # changed after bronze read it: not read again


def ignored_files(root: str | Path) -> list[LandingProblem]:
    """The visible files under the landing folder ``root`` that the source will not read as events.

    Hidden names (a producer still writing) are not listed: they are read once renamed.
    """
    root = lake_path(root)
    problems = []
    if not root.is_dir():
        return problems
    for path in _visible_files(root):
        relative = path.relative_to(root).as_posix()
        name = path.name
        if name.endswith(EVENTS_SUFFIX):
            depth = len(path.relative_to(root).parts)
            if _starts_with_gzip(path):
                problems.append(
                    LandingProblem(
                        relative,
                        Problem.GZIP_PAYLOAD,
                        "the file holds gzip-compressed bytes under a .jsonl name: read as text, its "
                        "'lines' are binary and quarantined",
                        "decompress it under a new name (gunzip -c F > .F.tmp && mv .F.tmp "
                        "F-unzipped.jsonl, in its folder) and move the compressed file out of the "
                        "landing zone; its quarantine rows stay as history",
                        True,
                    )
                )
            elif depth != LAYOUT_DEPTH:
                problems.append(
                    LandingProblem(
                        relative,
                        Problem.OUTSIDE_LAYOUT,
                        f"{depth - 1} folder(s) deep, not <date>/<hour>/: read, but lakehouse status "
                        "cannot place it in a producer hour",
                        "land later files in <date>/<hour>/ (this one stays read, exactly once)",
                        True,
                    )
                )
            continue
        lowered = name.lower()
        if lowered.endswith(_COMPRESSED_SUFFIXES):
            problems.append(
                LandingProblem(
                    relative,
                    Problem.COMPRESSED,
                    "a compressed file: the source reads uncompressed *.jsonl files only",
                    f"decompress it into its folder under a hidden name, then rename it to a .jsonl "
                    f"name (e.g. gunzip -c {shlex.quote(name)} > .part.tmp && mv .part.tmp "
                    f"{shlex.quote(_stem(name) + EVENTS_SUFFIX)}), and move the compressed file out",
                    False,
                )
            )
        else:
            problems.append(
                LandingProblem(
                    relative,
                    Problem.NOT_JSONL,
                    f"not a *{EVENTS_SUFFIX} name: the source does not read it",
                    f"if it holds events, rename it to a *{EVENTS_SUFFIX} name (e.g. "
                    f"{shlex.quote(_stem(name) + EVENTS_SUFFIX)}); else move it out of the landing zone",
                    False,
                )
            )
    return problems


def _stem(name: str) -> str:
    for suffix in (*_COMPRESSED_SUFFIXES, EVENTS_SUFFIX, ".json", ".txt", ".ndjson"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or "part"


def _starts_with_gzip(path: Path | S3Path) -> bool:
    try:
        return read_head(path, 2) == GZIP_MAGIC
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# Files read, and files changed since


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


def _sha256(path: Path, limit: int | None = None) -> str:
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


def _read_manifest(checkpoint: str) -> dict[str, dict]:
    try:
        return json.loads(manifest_path(checkpoint).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_manifest(checkpoint: str, manifest: dict[str, dict]) -> None:
    write_atomic(manifest_path(checkpoint), json.dumps(manifest, sort_keys=True))


def _landed_path(uri: str) -> Path | S3Path:
    from urllib.parse import unquote_to_bytes, urlsplit

    parts = urlsplit(uri)
    path = os.fsdecode(unquote_to_bytes(parts.path))
    if parts.scheme in ("s3a", "s3"):
        return S3Path(parts.netloc, path.lstrip("/"))
    return Path(path)


def _mtime_ms(stat) -> int:
    return stat.st_mtime_ns // 1_000_000


def record_ingested_files(checkpoint: str, write: bool = True) -> dict[str, dict]:
    """Add the files the source read since the last call to bronze's manifest; the manifest.

    ``write=False`` leaves the stored manifest as it is (a read-only look, e.g. status).

    A file is recorded (size, mtime, SHA-256) when its mtime is still the one the source logged
    when it read it; one that changed in between is recorded without them (its change is reported).
    """
    manifest = _read_manifest(checkpoint)
    added = False
    for uri, logged_mtime in ingested_files(checkpoint).items():
        if uri in manifest:
            continue
        path = _landed_path(uri)
        try:
            stat = path.stat()
            same = _mtime_ms(stat) == logged_mtime
            manifest[uri] = {
                "mtime_ms": logged_mtime,
                "size": stat.st_size if same else None,
                "sha256": _sha256(path) if same else None,
            }
        except OSError:
            manifest[uri] = {"mtime_ms": logged_mtime, "size": None, "sha256": None}
        added = True
    if added and write:
        _write_manifest(checkpoint, manifest)
    return manifest


def changed_files(checkpoint: str, root: str | Path, write: bool = True) -> list[LandingProblem]:
    """The files bronze has read that were appended to or rewritten since, each with its fix.

    A file whose modification time alone changed (``touch``, a copy with the same bytes) is fine:
    its size and SHA-256 are compared, and the manifest then keeps its new time. A file moved away
    or deleted is not reported here (bronze keeps its lines). ``write=False``: the manifest beside
    the checkpoint is read, never written (bronze's job writes it).
    """
    manifest = record_ingested_files(checkpoint, write)
    root = lake_path(root)
    problems = []
    touched = False
    for uri, known in sorted(manifest.items()):
        path = _landed_path(uri)
        try:
            stat = path.stat()
        except OSError:
            continue
        if _mtime_ms(stat) == known["mtime_ms"] and stat.st_size == known.get("size"):
            continue
        size, sha = known.get("size"), known.get("sha256")
        if size is not None and stat.st_size == size and _sha256(path) == sha:
            known["mtime_ms"] = _mtime_ms(stat)  # touched: the same bytes
            touched = True
            continue
        problems.append(_changed(path, root, size, sha, stat.st_size))
    if touched and write:
        _write_manifest(checkpoint, manifest)
    return problems


def _changed(path: Path, root: Path, size: int | None, sha: str | None, now: int) -> LandingProblem:
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = str(path)
    quoted = shlex.quote(str(path))
    rest = path.with_name(f"{_stem(path.name)}-after-{size}{EVENTS_SUFFIX}")
    temp = path.with_name(f".{rest.name}.tmp")
    if size is not None and now > size and _sha256(path, size) == sha:
        # A shell command for a local landing zone; on object storage the same steps by its tools.
        command = (
            None
            if isinstance(path, S3Path)
            else f"tail -c +{size + 1} {quoted} > {shlex.quote(str(temp))} && truncate -s {size} "
            f"{quoted} && mv {shlex.quote(str(temp))} {shlex.quote(str(rest))}"
        )
        return LandingProblem(
            relative,
            Problem.APPENDED,
            f"{now - size} byte(s) appended after bronze read its first {size} byte(s); a landed "
            "file is read once, so they are not read",
            "move the appended bytes into a new file and cut this one back to what bronze read "
            f"({command or f'its first {size} byte(s); the rest into {rest}'}); the next run "
            "reads the new file",
            False,
            command,
        )
    was = f"{size} byte(s), sha256 {sha}" if size is not None else "its content then"
    return LandingProblem(
        relative,
        Problem.REWRITTEN,
        f"changed after bronze read it ({was}; now {now} byte(s)); a landed file is read once, so "
        "its new content is not read",
        "put its original content back (bronze.ad_events holds its lines: SELECT raw_line FROM "
        f"bronze.ad_events WHERE source_file = '{spark_uri(path)}') and land the new content "
        "under a new name: lines whose event_id silver already holds are counted as duplicates, "
        "the rest are inserted",
        False,
    )


def landing_report(
    lakehouse: Lakehouse, source: str = "events", generation: int | None = None
) -> dict:
    """What the landing zone holds that bronze will not read as events, for ``lakehouse status``.

    ``{"ignored": [...], "changed": [...]}``, each a list of :class:`LandingProblem` dicts (file
    under the landing folder, reason code, detail, what to do, whether bronze reads it). Reads
    files only, writes nothing, starts no Spark. ``generation``: bronze's checkpoint generation
    (default: the current one).
    """
    bronze = lakehouse.table("bronze.ad_events")
    root = lakehouse.landing(source)
    checkpoint = bronze.checkpoint() if generation is None else bronze.checkpoint(generation)
    return {
        "ignored": [problem.as_dict() for problem in ignored_files(root)],
        "changed": [problem.as_dict() for problem in changed_files(checkpoint, root, write=False)],
    }
