"""What the landing zone holds that bronze does not read as events, each with what to do.

:class:`LandingProblem` is one such file (its reason a stable :class:`Problem` code, as the
quarantine's reasons are); :func:`ignored_files` finds the files the source skips by their name or
reads with a caveat (a gzip payload under a ``.jsonl`` name, a file outside the producer's layout),
and the symbolic links it cannot read through.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from lakehouse.files import S3Path, lake_path
from lakehouse.landing.listing import (
    COMPRESSED_SUFFIXES,
    EVENTS_SUFFIX,
    GZIP_EVENTS_SUFFIX,
    LAYOUT_DEPTH,
    READ_SUFFIXES,
    Listing,
    UnreadableLink,
    list_landing,
    starts_with_gzip,
    stem,
)


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
    BROKEN_GZIP = "broken_gzip"  # a new .jsonl.gz that does not decompress: bronze refuses to run
    LINK_LOOP = "symlink_loop"  # a link to a folder it is in: bronze refuses to run
    BROKEN_LINK = "broken_symlink"  # a link to nothing: nothing under it read until it resolves
    LATE_IN_OLD_FOLDER = "late_in_old_folder"  # read, but checked only after the read


def ignored_files(root: str | Path, listing: Listing | None = None) -> list[LandingProblem]:
    """The visible files under the landing folder ``root`` that the source will not read as events.

    Hidden names (a producer still writing) are not listed: they are read once renamed. Symbolic
    links the source cannot read through are (:func:`link_problem`). ``listing``: the files a
    run's checks listed (:mod:`lakehouse.landing.window`); None: the whole landing folder.
    """
    root = lake_path(root)
    problems = []
    if not root.is_dir():
        return problems
    listing = listing or list_landing(root)
    for path in listing.files:
        relative = path.relative_to(root).as_posix()
        name = path.name
        if name.endswith(READ_SUFFIXES):
            depth = len(path.relative_to(root).parts)
            if name.endswith(EVENTS_SUFFIX) and starts_with_gzip(path):
                gz = path.with_name(stem(name) + GZIP_EVENTS_SUFFIX)
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
        if lowered.endswith(COMPRESSED_SUFFIXES):
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
                    f"{shlex.quote(stem(name) + EVENTS_SUFFIX)}); else move it out of the landing zone",
                    False,
                )
            )
    return [*problems, *(link_problem(link, root) for link in listing.links)]


def link_problem(link: UnreadableLink, root: Path) -> LandingProblem:
    """A symbolic link the source cannot read through, with what to do."""
    relative = link.path.relative_to(root).as_posix()
    if link.loop:
        return LandingProblem(
            relative,
            Problem.LINK_LOOP,
            f"a symbolic link to {link.target}, a folder it is in: Spark's listing would follow "
            "it again at each level and read every file under it many times, so bronze refuses "
            "to run until it is gone",
            "remove the link (it removes no file) or point it at the folder it should hold; the "
            "next run then reads every file once",
            False,
            f"rm {shlex.quote(str(link.path))}",
        )
    return LandingProblem(
        relative,
        Problem.BROKEN_LINK,
        f"a symbolic link to {link.target}, which does not exist (not mounted, moved or "
        "deleted): nothing under it is read",
        f"restore {link.target} (the next run then reads its files, once) or remove the link",
        False,
    )


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
            f"{shlex.quote(stem(name) + GZIP_EVENTS_SUFFIX)})"
        )
    tool = next((t for s, t in _DECOMPRESSORS.items() if name.lower().endswith(s)), None)
    example = (
        f" (e.g. {tool} {quoted} > .part.tmp && mv .part.tmp "
        f"{shlex.quote(stem(name) + EVENTS_SUFFIX)})"
        if tool
        else ""
    )
    return (
        "decompress it into its folder under a hidden name, then rename it to a .jsonl name"
        f"{example}, and move the compressed file out"
    )
