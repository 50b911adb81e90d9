"""The landing zone's file contract, checked in plain Python (no Spark): what bronze reads, what it won't.

Bronze's file source reads every visible ``*.jsonl`` and ``*.jsonl.gz`` (decompressed by Spark's
gzip codec) file under the landing folder, at any depth
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

Before each run, bronze plans how the source reads its new files (:func:`plan_new_files`): a file
whose bytes equal those of a file bronze has read, or of another new file (renamed, moved to
another hour, copied), is a copy: its lines are not read again, and it is reported as a copy of
its original (:func:`copied_files`). A ``*.jsonl`` file holding a gzip payload becomes one bronze
row, its first line, so one quarantine entry names the file, instead of thousands of binary lines.

:func:`landing_report` is what ``lakehouse status`` (and bronze's summary) say about it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shlex
import unicodedata
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse import checkpoint_log
from lakehouse.files import S3Path, lake_path, read_head, write_atomic

if TYPE_CHECKING:
    from lakehouse.config import Lakehouse

# What the source reads: the name's suffix, and the producer's layout (for status's producer hours).
EVENTS_SUFFIX = ".jsonl"
GZIP_EVENTS_SUFFIX = ".jsonl.gz"  # read too: Spark's text source picks the gzip codec by the suffix
READ_SUFFIXES = (EVENTS_SUFFIX, GZIP_EVENTS_SUFFIX)
# The source's file-name filter (Hadoop's GlobFilter, on the name alone): both suffixes.
READ_NAMES_GLOB = "*.{jsonl,jsonl.gz}"
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
    """The files the source reads under ``root`` (visible ``*.jsonl`` and ``*.jsonl.gz`` at any
    depth), by :func:`spark_uri`."""
    root = lake_path(root)
    if not root.is_dir():
        return {}
    return {
        spark_uri(path): path
        for path in _visible_files(root)
        if path.name.endswith(READ_SUFFIXES) and not hidden(path.relative_to(root))
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
    copy_of: str | None = None  # a copy's original, under the landing folder (or its URI)

    def as_dict(self) -> dict:
        return asdict(self)


class Problem:
    """Reason codes of :class:`LandingProblem` (stable strings, as the quarantine's)."""

    NOT_JSONL = "not_jsonl"  # a name the source does not read (.json, .txt, no suffix)
    COMPRESSED = "compressed_file"  # .jsonl.bz2, .zip and the like (not .jsonl.gz): not read
    GZIP_PAYLOAD = "gzip_payload_in_jsonl"  # one bronze row (its first line), one quarantine entry
    COPY = "copy_of_ingested"  # the same bytes as a file bronze has read: not read again
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
        if name.endswith(READ_SUFFIXES):
            depth = len(path.relative_to(root).parts)
            if name.endswith(EVENTS_SUFFIX) and _starts_with_gzip(path):
                gz = path.with_name(_stem(name) + GZIP_EVENTS_SUFFIX)
                temp = path.with_name(f".{gz.name}.tmp")
                command = (
                    None
                    if isinstance(path, S3Path)
                    else f"cp {shlex.quote(str(path))} {shlex.quote(str(temp))} && mv "
                    f"{shlex.quote(str(temp))} {shlex.quote(str(gz))}"
                )
                problems.append(
                    LandingProblem(
                        relative,
                        Problem.GZIP_PAYLOAD,
                        "the file holds gzip-compressed bytes under a .jsonl name: not read as "
                        "lines; bronze keeps one row for it (its first line), quarantined as "
                        "gzip_payload with this file as its source_file",
                        "land its bytes again under a .jsonl.gz name, which bronze reads "
                        f"decompressed ({command or f'copy it to {gz.name}'}); leave this file "
                        "where it is (its one quarantine row stays as history)",
                        True,
                        command,
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
                    "a compressed file: the source reads *.jsonl files and gzip-compressed "
                    "*.jsonl.gz files only",
                    _decompress_fix(name),
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


# The command-line decompressor of each suffix the source does not read (a .gz is renamed instead).
_DECOMPRESSORS = {
    ".bz2": "bunzip2 -c",
    ".xz": "xz -dc",
    ".zst": "zstd -dc",
    ".zstd": "zstd -dc",
    ".lz4": "lz4 -dc",
    ".zip": "unzip -p",
}


def _decompress_fix(name: str) -> str:
    quoted = shlex.quote(name)
    if name.lower().endswith((".gz", ".gzip")):
        return (
            f"rename it to a .jsonl.gz name, which the source reads decompressed (mv {quoted} "
            f"{shlex.quote(_stem(name) + GZIP_EVENTS_SUFFIX)})"
        )
    tool = next((t for s, t in _DECOMPRESSORS.items() if name.lower().endswith(s)), None)
    example = (
        f" (e.g. {tool} {quoted} > .part.tmp && mv .part.tmp "
        f"{shlex.quote(_stem(name) + EVENTS_SUFFIX)})"
        if tool
        else ""
    )
    return (
        "decompress it into its folder under a hidden name, then rename it to a .jsonl name"
        f"{example}, and move the compressed file out"
    )


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


@dataclass(frozen=True)
class ReadPlan:
    """How the source reads a run's new files (by :func:`spark_uri`); every other file, line by line."""

    copies: dict[str, str]  # not read: the same bytes as an original (URI) bronze reads or read
    gzip_payloads: dict[str, bytes]  # a gzip payload under a .jsonl name: only this first line kept
    manifest: dict[str, dict]  # bronze's manifest with this plan's decisions
    broken_gzip: dict[str, str] = field(default_factory=dict)  # a .jsonl.gz that does not unzip

    def refusal(self, root: str | Path) -> str | None:
        """Why the run must not start (a broken .jsonl.gz would fail it half-way), or None."""
        if not self.broken_gzip:
            return None
        named = "; ".join(
            f"{_relative(_landed_path(uri), lake_path(root))} ({why})"
            for uri, why in sorted(self.broken_gzip.items())
        )
        return (
            f"landing file(s) named .jsonl.gz that do not decompress: {named}. Nothing was read. "
            "Hide each one (rename it to start with '.') or move it out of the landing zone, and "
            "land a good copy under a new name; the next run reads the other files as usual."
        )


def plan_new_files(checkpoint: str, root: str | Path, write: bool = True) -> ReadPlan:
    """Before a run: which new files are copies of a file bronze has read (or of another new file),
    and which ``*.jsonl`` files hold a gzip payload; the decisions recorded in the manifest.

    A file's identity is its size and SHA-256 (and whether it is a gzip payload); only a file of a
    size another file has is hashed here. Of identical new files, the first by URI is the original.
    Decisions on files no committed batch has read are made again each run (a planned file may be
    gone or changed since); a committed one stays, so a run retried after a crash that read a copy
    before its original still reads the original. ``write=False``: a read-only look (status).
    """
    committed = set(ingested_files(checkpoint))
    manifest = {
        uri: known
        for uri, known in record_ingested_files(checkpoint, write=False).items()
        if uri in committed
    }
    originals: dict[tuple, str] = {}
    for uri, known in sorted(manifest.items()):
        if known.get("sha256") and not known.get("copy_of"):
            originals.setdefault(_identity(known), uri)
    known_sizes = {size for _, size, _ in originals}
    new = {}
    for uri, path in readable_files(root).items():
        if uri not in committed:
            try:
                new[uri] = (path, path.stat())
            except OSError:  # gone meanwhile
                continue
    new_sizes = Counter(stat.st_size for _, stat in new.values())
    copies, payloads = {}, {}
    broken = {}
    for uri, (path, stat) in sorted(new.items()):
        if path.name.endswith(GZIP_EVENTS_SUFFIX):
            why = _gzip_error(path)
            if why:
                broken[uri] = why
                continue
        payload = path.name.endswith(EVENTS_SUFFIX) and _starts_with_gzip(path)
        entry = None
        if stat.st_size and (stat.st_size in known_sizes or new_sizes[stat.st_size] > 1):
            entry = _entry(path, stat, payload)
            original = originals.setdefault(_identity(entry), uri)
            if original != uri:
                copies[uri] = original
                manifest[uri] = {**entry, "copy_of": original}
                continue
        if payload:
            payloads[uri] = _first_line(path)
            manifest[uri] = entry or _entry(path, stat, payload)
    if write and manifest != _read_manifest(checkpoint):
        _write_manifest(checkpoint, manifest)
    return ReadPlan(copies, payloads, manifest, broken)


def _gzip_error(path: Path | S3Path) -> str | None:
    """Why a gzip file does not decompress to its end (truncated, not gzip), or None."""
    try:
        with path.open("rb") as raw, gzip.GzipFile(fileobj=raw) as unzipped:
            while unzipped.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as error:
        return f"{type(error).__name__}: {error}"
    return None


def _entry(path: Path | S3Path, stat, payload: bool) -> dict:
    return {
        "mtime_ms": _mtime_ms(stat),
        "size": stat.st_size,
        "sha256": _sha256(path),
        "gzip_payload": payload,
    }


def _identity(known: dict) -> tuple:
    return (bool(known.get("gzip_payload")), known["size"], known["sha256"])


def _first_line(path: Path | S3Path) -> bytes:
    """A file's first line as Spark's line reader gives it (up to the first CR or LF)."""
    head = read_head(path, 1 << 20)
    cut = re.search(rb"\r|\n", head)
    return head[: cut.start()] if cut else path.read_bytes()


def copied_files(root: str | Path, manifest: dict[str, dict]) -> list[LandingProblem]:
    """The files in the landing zone that are copies of a file bronze has read (or reads in this
    run), each named with its original: recognised by content, not read again."""
    root = lake_path(root)
    problems = []
    for uri, known in sorted(manifest.items()):
        if not known.get("copy_of"):
            continue
        path = _landed_path(uri)
        if not path.exists():
            continue
        original = _relative(_landed_path(known["copy_of"]), root)
        problems.append(
            LandingProblem(
                _relative(path, root),
                Problem.COPY,
                f"the same {known['size']} byte(s) (sha256 {known['sha256']}) as {original}, "
                "which bronze has read: renamed, moved or copied, its lines are not read again",
                f"nothing if it was renamed or moved on purpose: its lines are in bronze once, as "
                f"{original}'s; remove it if it is a stray copy",
                True,
                copy_of=original,
            )
        )
    return problems


def _relative(path: Path | S3Path, root: Path | S3Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


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
        problems.append(_changed(path, root, known, stat.st_size))
    if touched and write:
        _write_manifest(checkpoint, manifest)
    return problems


def _changed(path: Path, root: Path, known: dict, now: int) -> LandingProblem:
    relative = _relative(path, root)
    size, sha = known.get("size"), known.get("sha256")
    quoted = shlex.quote(str(path))
    rest = path.with_name(f"{_stem(path.name)}-after-{size}{EVENTS_SUFFIX}")
    temp = path.with_name(f".{rest.name}.tmp")
    if size is not None and now > size and _sha256(path, size) == sha:
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
    source_file = _source_file(known.get("copy_of") or spark_uri(path))  # a copy's: its original's
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


def _source_file(uri: str) -> str:
    """A file's URI as bronze's ``source_file`` holds it (Spark's ``_metadata.file_path`` writes a
    local file ``file:/...``, its source log ``file:///...``)."""
    return re.sub(r"^file:/+", "file:/", uri)


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


def landing_report(
    lakehouse: Lakehouse, source: str = "events", generation: int | None = None
) -> dict:
    """What the landing zone holds that bronze will not read as events, for ``lakehouse status``.

    ``{"ignored": [...], "changed": [...], "copies": [...]}``, each a list of
    :class:`LandingProblem` dicts (file under the landing folder, reason code, detail, what to do,
    whether bronze reads it; a copy's original). Copies include the new files the next run will
    recognise as copies. Reads files only, writes nothing, starts no Spark. ``generation``:
    bronze's checkpoint generation (default: the current one).
    """
    bronze = lakehouse.table("bronze.ad_events")
    root = lakehouse.landing(source)
    checkpoint = bronze.checkpoint() if generation is None else bronze.checkpoint(generation)
    plan = plan_new_files(checkpoint, root, write=False)
    broken = [
        LandingProblem(
            _relative(_landed_path(uri), lake_path(root)),
            Problem.BROKEN_GZIP,
            f"named .jsonl.gz but does not decompress ({why}): bronze refuses to run until it is "
            "gone",
            "hide it (rename it to start with '.') or move it out of the landing zone, and land a "
            "good copy under a new name",
            False,
        )
        for uri, why in sorted(plan.broken_gzip.items())
    ]
    return {
        "ignored": [problem.as_dict() for problem in (*ignored_files(root), *broken)],
        "changed": [problem.as_dict() for problem in changed_files(checkpoint, root, write=False)],
        "copies": [problem.as_dict() for problem in copied_files(root, plan.manifest)],
    }
