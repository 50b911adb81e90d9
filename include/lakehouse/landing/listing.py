"""Which files bronze's file source reads under the landing folder, and how Spark names them.

The names and suffixes the source reads, the producer's layout, the walk of the landing folder
that skips hidden names, a file's URI as Spark's file source logs it (:func:`spark_uri`) and the
way back from that URI to the file (:func:`landed_path`).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from lakehouse.files import S3Path, lake_path, read_head

# What the source reads: the name's suffix, and the producer's layout (for status's producer hours).
EVENTS_SUFFIX = ".jsonl"
GZIP_EVENTS_SUFFIX = ".jsonl.gz"  # read too: Spark's text source picks the gzip codec by the suffix
READ_SUFFIXES = (EVENTS_SUFFIX, GZIP_EVENTS_SUFFIX)
# The source's file-name filter (Hadoop's GlobFilter, on the name alone): both suffixes.
READ_NAMES_GLOB = "*.{jsonl,jsonl.gz}"
LAYOUT_DEPTH = 3  # <date>/<hour>/<part>.jsonl under the landing folder
GZIP_MAGIC = b"\x1f\x8b"
COMPRESSED_SUFFIXES = (".gz", ".gzip", ".bz2", ".zst", ".zstd", ".xz", ".lz4", ".snappy", ".zip")
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


def landed_path(uri: str) -> Path | S3Path:
    """The file behind a URI of the source's log (the inverse of :func:`spark_uri`)."""
    from urllib.parse import unquote_to_bytes, urlsplit

    parts = urlsplit(uri)
    path = os.fsdecode(unquote_to_bytes(parts.path))
    if parts.scheme in ("s3a", "s3"):
        return S3Path(parts.netloc, path.lstrip("/"))
    return Path(path)


def relative_name(path: Path | S3Path, root: Path | S3Path) -> str:
    """``path`` under the landing folder ``root`` (as problems name files), else whole."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


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
        for path in visible_files(root)
        if path.name.endswith(READ_SUFFIXES) and not hidden(path.relative_to(root))
    }


def visible_files(root: Path | S3Path):
    """Every file under ``root`` whose path has no hidden part, in name order."""
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


def starts_with_gzip(path: Path | S3Path) -> bool:
    """Does the file begin with gzip's magic bytes (a gzip payload, whatever its name)?"""
    try:
        return read_head(path, 2) == GZIP_MAGIC
    except OSError:
        return False


def stem(name: str) -> str:
    """A file name without its event, text or compression suffixes (a base for a fix's new name)."""
    for suffix in (*COMPRESSED_SUFFIXES, EVENTS_SUFFIX, ".json", ".txt", ".ndjson"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or "part"
