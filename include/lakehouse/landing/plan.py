"""Before a run, how bronze's source reads its new files: copies skipped, gzip payloads one line.

:func:`plan_new_files` makes the :class:`ReadPlan`: a new file whose bytes equal those of a file
bronze has read, or of another new file (renamed, moved to another hour, copied), is a copy and
gives no line (:func:`copied_files` names each with its original); a ``*.jsonl`` file holding a
gzip payload gives one bronze row, its first line; a ``.jsonl.gz`` that does not decompress, or
a symbolic link back to a folder it is in, refuses the run (:meth:`ReadPlan.refusal`).
"""

from __future__ import annotations

import gzip
import re
import shlex
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse.files import S3Path, lake_path, read_head
from lakehouse.landing.listing import (
    EVENTS_SUFFIX,
    GZIP_EVENTS_SUFFIX,
    Listing,
    UnreadableLink,
    landed_path,
    list_landing,
    readable_in,
    relative_name,
    starts_with_gzip,
)
from lakehouse.landing.manifest import (
    LandedIndex,
    folder_of,
    identity,
    mtime_ms,
    record_ingested_files,
    sha256_of,
)
from lakehouse.landing.problems import LandingProblem, Problem
from lakehouse.landing.window import dates_to_read, select_folders, whole_look_due


@dataclass(frozen=True)
class ReadPlan:
    """How the source reads a run's new files (by :func:`spark_uri`); every other file, line by line.

    ``manifest``: bronze's records of the files in the folders listed (every file, on a whole look).
    """

    copies: dict[str, str]  # not read: the same bytes as an original (URI) bronze reads or read
    gzip_payloads: dict[str, bytes]  # a gzip payload under a .jsonl name: only this first line kept
    manifest: dict[str, dict]  # bronze's manifest with this plan's decisions
    broken_gzip: dict[str, str] = field(default_factory=dict)  # a .jsonl.gz that does not unzip
    link_loops: tuple[UnreadableLink, ...] = ()  # a link to a folder it is in: read many times
    listing: Listing | None = None  # what the checks listed (the same walk serves every check)
    folders: tuple[str, ...] | None = None  # the hour folders listed (None: the whole folder)
    new_bytes: int = 0  # the bytes of the files listed that the source has not read
    new_files: int = 0  # how many of them there are
    read_dates: tuple[str, ...] | None = None  # the date folders the source lists (None: all)
    # Files there that bronze read in an earlier checkpoint generation (lakehouse.landing.source_log):
    # the source, whose log starts empty in a new generation, gives no line of them.
    read_before: frozenset[str] = frozenset()
    folder_uris: frozenset[str] = frozenset()  # the folders of the files listed, as in their URIs
    index: LandedIndex | None = None  # bronze's records, as loaded for this plan

    def refusal(self, root: str | Path) -> str | None:
        """Why the run must not start (a broken .jsonl.gz would fail it half-way, a link loop
        would have Spark read the same files many times), or None."""
        root = lake_path(root)
        reasons = []
        if self.broken_gzip:
            named = "; ".join(
                f"{relative_name(landed_path(uri), root)} ({why})"
                for uri, why in sorted(self.broken_gzip.items())
            )
            reasons.append(
                f"landing file(s) named .jsonl.gz that do not decompress: {named}. Hide each one "
                "(rename it to start with '.') or move it out of the landing zone, and land a "
                "good copy under a new name."
            )
        if self.link_loops:
            named = "; ".join(
                f"{relative_name(link.path, root)} -> {link.target}" for link in self.link_loops
            )
            fix = " && ".join(f"rm {shlex.quote(str(link.path))}" for link in self.link_loops)
            reasons.append(
                f"symbolic link(s) in the landing zone to a folder they are in: {named}; Spark "
                "would read every file under each again at each level. Remove each link (it "
                f"removes no file: {fix}) or point it at the folder it should hold."
            )
        if not reasons:
            return None
        return " ".join(reasons) + " Nothing was read; the next run reads the other files as usual."

    def source_path(self, root: str) -> str:
        """What the source lists: the landing folder, or a glob of the date folders to read
        (Hadoop's glob on the date names alone; the files below are listed, not globbed)."""
        if self.read_dates is None:
            return root
        return f"{root.rstrip('/')}/{{{','.join(self.read_dates)}}}"

    def describe_reading(self) -> str:
        """What the source lists, for the run's log."""
        if self.read_dates is None:
            return "the source lists the whole landing folder"
        return (
            f"the source lists {len(self.read_dates)} date folder(s): {', '.join(self.read_dates)}"
        )


def plan_new_files(
    checkpoint: str,
    root: str | Path,
    write: bool = True,
    table_path: str | None = None,
    whole: bool = False,
    whole_every: timedelta | None = None,
    now: datetime | None = None,
) -> ReadPlan:
    """Before a run: which new files are copies of a file bronze has read (or of another new file),
    and which ``*.jsonl`` files hold a gzip payload; the decisions recorded in bronze's index.

    The hour folders that can hold new files are listed, and a few older ones in turn
    (:func:`lakehouse.landing.window.select_folders`); ``whole=True`` lists everything (a whole
    look: ``lakehouse status``), as does a run whose last whole look is ``whole_every`` old or
    more (bronze's runs: once a day; ``now`` for a test). A file's identity is its size and SHA-256
    (and whether it is a gzip payload); only a file of a size another file has is hashed here. Of
    identical new files, the first by URI is the original. Decisions on files no committed batch
    has read are made again each run (a planned file may be gone or changed since); a committed
    one stays, so a run retried after a crash that read a copy before its original still reads
    the original.
    ``write=False``: a read-only look (status). ``table_path``: bronze's table, for the record of
    a file read while still being written
    (:func:`lakehouse.landing.manifest.record_ingested_files`).
    """
    index = record_ingested_files(checkpoint, False, table_path, root)
    state = index.state
    now = now or datetime.now(UTC)
    whole = whole or (whole_every is not None and whole_look_due(state, whole_every, now))
    if whole:
        listing, folders, next_audit = list_landing(root), None, state["audit_after"]
    else:
        window = select_folders(root, state["newest_read"], state["audit_after"])
        listing, folders, next_audit = window.listing, window.folders, window.next_audit
    new = {}
    folder_uris = set()
    for uri, path in readable_in(listing, root).items():
        folder_uris.add(folder_of(uri))
        if not index.read(uri):
            try:
                new[uri] = (path, path.stat())
            except OSError:  # gone meanwhile
                continue
    new_sizes = Counter(stat.st_size for _, stat in new.values())
    fresh: dict[str, str] = {}  # identity -> the first new file of it
    copies, payloads = {}, {}
    broken = {}
    for uri, (path, stat) in sorted(new.items()):
        if path.name.endswith(GZIP_EVENTS_SUFFIX):
            why = _gzip_error(path)
            if why:
                broken[uri] = why
                index.drop(uri)
                continue
        payload = path.name.endswith(EVENTS_SUFFIX) and starts_with_gzip(path)
        entry = None
        if stat.st_size and (new_sizes[stat.st_size] > 1 or index.has_size(stat.st_size)):
            entry = _entry(path, stat, payload)
            original = index.original(entry) or fresh.setdefault(identity(entry), uri)
            if original != uri:
                copies[uri] = original
                index.put(uri, {**entry, "copy_of": original})
                continue
        if payload:
            payloads[uri] = _first_line(path)
            index.put(uri, entry or _entry(path, stat, payload))
        else:
            index.drop(uri)
    if write:
        state["audit_after"] = next_audit
        if whole:
            state["whole_look_at"] = now.isoformat()
        index.save()
    loops = tuple(link for link in listing.links if link.loop)
    read_dates = dates_to_read(
        [relative_name(path, lake_path(root)) for path, _ in new.values()], folders or ()
    )
    read_before = (
        _read_before(index, root, read_dates)
        if state.get("carried_from") is not None
        else frozenset()
    )
    manifest = index.every_record() if whole else index.records(folder_uris)
    return ReadPlan(
        copies,
        payloads,
        manifest,
        broken,
        loops,
        listing=listing,
        folders=folders,
        new_bytes=sum(stat.st_size for _, stat in new.values()),
        new_files=len(new),
        read_dates=read_dates,
        read_before=read_before,
        folder_uris=frozenset(folder_uris),
        index=index,
    )


def _read_before(
    index: LandedIndex, root: str | Path, dates: tuple[str, ...] | None
) -> frozenset[str]:
    """The files under ``dates`` (None: the whole landing folder) that bronze has read."""
    if dates is None:
        return frozenset(uri for uri, known in index.every_record().items() if "batch" in known)
    root = lake_path(root)
    return frozenset(
        uri
        for date in dates
        for uri in readable_in(list_landing(root / date), root)
        if index.read(uri)
    )


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
        "mtime_ms": mtime_ms(stat),
        "size": stat.st_size,
        "sha256": sha256_of(path),
        "gzip_payload": payload,
    }


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
        path = landed_path(uri)
        if not path.exists():
            continue
        original = relative_name(landed_path(known["copy_of"]), root)
        problems.append(
            LandingProblem(
                relative_name(path, root),
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
