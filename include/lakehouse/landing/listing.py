"""Which files bronze's file source reads under the landing folder, and how Spark names them.

The names and suffixes the source reads, the producer's layout, the walk of the landing folder
(:func:`list_landing`) that skips hidden names, a file's URI as Spark's file source logs it
(:func:`spark_uri`) and the way back from that URI to the file (:func:`landed_path`).

The walk goes where Spark's listing goes: through symbolic links, to files and to folders alike
(an hour or a day folder linked from elsewhere is read, its files named by their path under the
link). Two links Spark cannot read through are listed apart (:class:`UnreadableLink`): one that
leads nowhere (Spark skips it without a word) and one that leads back to a folder it is in (Spark
would read every file under it again at each level, until the path is too long to resolve).
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from lakehouse.files import S3Path, lake_path, matches_pattern, read_head

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


def source_file_of(uri: str) -> str:
    """A file's URI as bronze's ``source_file`` holds it (Spark's ``_metadata.file_path`` writes a
    local file ``file:/...``, its source log ``file:///...``)."""
    return re.sub(r"^file:/+", "file:/", uri)


def relative_name(path: Path | S3Path, root: Path | S3Path) -> str:
    """``path`` under the landing folder ``root`` (as problems name files), else whole."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def hidden(relative: Path) -> bool:
    """A path under the landing folder that the source skips: a part starting with ``.`` or ``_``."""
    return any(part.startswith((".", "_")) for part in relative.parts)


@dataclass(frozen=True)
class UnreadableLink:
    """A symbolic link under the landing folder that the source cannot read through."""

    path: Path  # the link, as the walk met it (under the landing folder)
    target: str  # what it points to, as written (``os.readlink``)
    loop: bool  # True: it leads back to a folder it is in; False: to nothing that exists


@dataclass(frozen=True)
class Listing:
    """What the walk of the landing folder met: its visible files, the links it cannot follow."""

    files: list[Path | S3Path]  # every file with no hidden part in its path, in name order
    links: list[UnreadableLink]  # by path; none on object storage, which has no links


def list_landing(root: str | Path) -> Listing:
    """Walk the landing folder ``root`` as the source lists it: hidden names skipped, symbolic
    links followed (to files and folders), each folder once on a path (:class:`UnreadableLink`)."""
    root = lake_path(root)
    if isinstance(root, S3Path):  # one listing of every key under the prefix
        files = [path for path, _ in root.walk_files() if not hidden(path.relative_to(root))]
        return Listing(files, [])
    files: list[Path | S3Path] = []
    links: list[UnreadableLink] = []
    _walk(root, (os.path.realpath(root),), files, links)
    return Listing(files, sorted(links, key=lambda link: link.path))


def _walk(folder: Path, chain: tuple[str, ...], files: list, links: list) -> None:
    """Files of ``folder`` first, then its folders, by name (as :func:`os.walk` top-down).

    ``chain``: the real paths of the folders walked down to here; a linked folder that holds one of
    them is a loop (the walk and Spark would meet the link again below it).
    """
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except OSError:  # gone meanwhile, or unreadable: as os.walk, nothing below it
        return
    folders = []
    for entry in entries:
        if entry.name.startswith((".", "_")):
            continue
        path = Path(folder, entry.name)
        if entry.is_symlink():
            if not os.path.exists(path):
                links.append(UnreadableLink(path, os.readlink(path), loop=False))
                continue
            if entry.is_dir():
                real = os.path.realpath(path)
                if any(Path(walked).is_relative_to(real) for walked in chain):
                    links.append(UnreadableLink(path, os.readlink(path), loop=True))
                    continue
                folders.append((path, real))
                continue
        if entry.is_dir():
            folders.append((path, os.path.realpath(path)))
        else:
            files.append(path)
    for path, real in folders:
        _walk(path, (*chain, real), files, links)


def readable_files(root: str | Path) -> dict[str, Path | S3Path]:
    """The files the source reads under ``root`` (visible ``*.jsonl`` and ``*.jsonl.gz`` at any
    depth, through symbolic links), by :func:`spark_uri`."""
    return readable_in(list_landing(root), root)


def readable_in(listing: Listing, root: str | Path) -> dict[str, Path | S3Path]:
    """The files of a walk that the source reads, by :func:`spark_uri` (:func:`readable_files`)."""
    root = lake_path(root)
    return {
        spark_uri(path): path
        for path in listing.files
        if path.name.endswith(READ_SUFFIXES) and not hidden(path.relative_to(root))
    }


def matching_files(root: str | Path, pattern: str) -> list[Path | S3Path]:
    """The visible files whose path under ``root`` matches ``pattern`` (pathlib's glob: ``*`` within
    a name, ``**`` any number of folders), met as the source meets them: through symbolic links.

    pathlib's own glob does not follow a linked folder for ``**`` (Python 3.11): a check made with
    it would not see an hour folder linked from elsewhere that Spark reads.
    """
    root = lake_path(root)
    wanted = pattern.split("/")
    return [
        path
        for path in list_landing(root).files
        if matches_pattern(path.relative_to(root).parts, wanted)
    ]


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
