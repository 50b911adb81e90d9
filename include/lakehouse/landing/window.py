"""Which hour folders bronze's own checks list in a run: the ones that can hold new files, and a
few older ones in turn.

Spark's file source lists the whole landing folder at each run and reads every file it has not
read, wherever it landed. Bronze's checks in Python (copies, gzip payloads, files changed after
they were read, names the source skips) must not cost more as the landing zone grows (a year at
16 files an hour is 140,160 files), so a run lists, under ``<date>/<hour>/``:

* every hour folder newer than the newest one bronze has read a file from (a catch-up lists its
  whole backlog: it reads all of it anyway), and at least the :data:`RECENT_HOURS` newest ones
  (a producer may still be landing the hours before);
* :data:`OLDER_PER_RUN` older hour folders, in turn (newest first, then round again), so that a
  file changed after it was read, or landed late, in an old folder is found by the checks within
  ``older folders / OLDER_PER_RUN`` runs.

Listing the landing folder's own entries (one name per day) is the only part that grows, by a
name a day.

Once a day (:data:`WHOLE_LOOK_EVERY`, and at the first run) the checks list the whole landing
folder: a file landed late in an old hour folder is found then, or earlier when its folder's turn
comes, and checked like any other before it is read.

Spark's file source lists only the date folders that hold the new files the checks found
(:func:`dates_to_read`): listed whole, it compares every file ever landed with its log at each run
(seconds a run after a year). It lists the whole landing folder when a new file lies above the
date folders, or the new files span more dates than :data:`MAX_DATES_NAMED` (a catch-up). A file
it reads from an hour folder the checks did not list (one landed meanwhile in a listed date) is
named after the read (:func:`lakehouse.landing.changes.late_files`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath

from lakehouse.files import S3Path, lake_path
from lakehouse.landing.listing import Listing, UnreadableLink, _walk, hidden

RECENT_HOURS = 48  # a producer lands an hour during the next; a day of lateness is usual
OLDER_PER_RUN = 24  # a year's 8,760 older folders are all looked at within a year of hourly runs
# A run's checks list the whole landing folder when their last whole look is this old.
WHOLE_LOOK_EVERY = timedelta(hours=24)
MAX_DATES_NAMED = 31  # the source lists more date folders than this as the whole landing folder
# Date names a Hadoop glob matches as they are (no glob character, no colon, not hidden).
_GLOB_SAFE_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z.=+-]*")


@dataclass(frozen=True)
class Window:
    """The landing folder as one run's checks see it: the hour folders listed and what they hold."""

    listing: Listing  # the files (and unreadable links) of the folders below, and loose files
    folders: tuple[str, ...]  # the hour folders listed, as "<date>/<hour>" under the landing folder
    audited: tuple[str, ...]  # those among them that are older, looked at in turn
    next_audit: str | None  # where the next run's turn of older folders starts (exclusive)


def _entries(folder: Path | S3Path, chain: tuple[str, ...]) -> tuple[list, list, list]:
    """A folder's visible sub-folders (by name) and files, and the links the source cannot follow."""
    folders, files, links = [], [], []
    if isinstance(folder, S3Path):  # one listing by delimiter: prefixes are the folders
        listing = folder._store().list_with_delimiter(f"{folder.key}/" if folder.key else None)
        folders = [S3Path(folder.bucket, p.rstrip("/")) for p in listing["common_prefixes"]]
        files = [S3Path(folder.bucket, item["path"]) for item in listing["objects"]]
        return (
            sorted(p for p in folders if not p.name.startswith((".", "_"))),
            sorted(p for p in files if not p.name.startswith((".", "_"))),
            links,
        )
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except OSError:  # gone meanwhile
        return folders, files, links
    for entry in entries:
        if entry.name.startswith((".", "_")):
            continue
        path = Path(folder, entry.name)
        if entry.is_symlink() and not os.path.exists(path):
            links.append(UnreadableLink(path, os.readlink(path), loop=False))
        elif entry.is_dir():
            real = os.path.realpath(path)
            if entry.is_symlink() and any(Path(w).is_relative_to(real) for w in chain):
                links.append(UnreadableLink(path, os.readlink(path), loop=True))
            else:
                folders.append((path, real))
        else:
            files.append(path)
    return folders, files, links


def select_folders(
    root: str | Path,
    newest_read: str | None,
    audit_after: str | None,
    recent: int = RECENT_HOURS,
    older: int = OLDER_PER_RUN,
) -> Window:
    """The hour folders one run's checks list, and every file under them (links followed).

    ``newest_read``: the newest ``<date>/<hour>`` bronze has read a file from (None: none yet, so
    every folder); ``audit_after``: where the previous run's turn of older folders ended.
    """
    root = lake_path(root)
    local = not isinstance(root, S3Path)
    chain = (os.path.realpath(root),) if local else ()
    dates, files, links = _entries(root, chain)
    files, links = list(files), list(links)
    hours: dict[str, list] = {}

    def hours_of(date) -> list:
        path, real = date if local else (date, "")
        name = path.name
        if name not in hours:
            found, loose, lost = _entries(path, (*chain, real) if local else ())
            files.extend(loose)
            links.extend(lost)
            hours[name] = [(f"{name}/{_path(h).name}", h, (*chain, real)) for h in found]
        return hours[name]

    def newest_first(below: str | None):
        """Hour folders older than ``below`` (all: None), newest first, each date listed once."""
        for date in reversed(dates):
            if below and _path(date).name > below.split("/")[0]:
                continue  # a whole day newer than the bound: not even listed
            for item in reversed(hours_of(date)):
                if below is None or item[0] < below:
                    yield item

    listed = []
    for item in newest_first(None):
        if newest_read is not None and len(listed) >= recent and item[0] <= newest_read:
            break  # None: nothing read yet, every folder can hold new files
        listed.append(item)
    taken = {key for key, _, _ in listed}
    audited = []
    # Older folders in turn: those before ``audit_after`` (newest first), then round again.
    for below in (audit_after, None) if audit_after else (None,):
        for item in newest_first(below):
            if len(audited) >= older:
                break
            if item[0] not in taken:
                taken.add(item[0])
                audited.append(item)
    found: list = []
    for _, hour, up in (*listed, *audited):
        path = _path(hour)
        if local:
            if os.path.islink(path) and not os.path.exists(path):
                continue
            _walk(path, (*up, hour[1]), found, links)
        else:
            found += [p for p, _ in path.walk_files() if not hidden(p.relative_to(root))]
    next_audit = audited[-1][0] if audited else None
    return Window(
        Listing(sorted(files) + found, sorted(links, key=lambda link: link.path)),
        tuple(key for key, _, _ in (*listed, *audited)),
        tuple(key for key, _, _ in audited),
        next_audit,
    )


def _path(entry) -> Path | S3Path:
    return entry[0] if isinstance(entry, tuple) else entry


def folder_key(uri: str, root_uri: str) -> str | None:
    """The ``<date>/<hour>`` of a landed file's URI under the landing folder's URI, else None."""
    from urllib.parse import unquote

    prefix = root_uri.rstrip("/") + "/"
    if not uri.startswith(prefix):
        return None
    parts = unquote(uri[len(prefix) :]).split("/")
    return "/".join(parts[:2]) if len(parts) >= 3 else None


def whole_look_due(state: dict, every: timedelta, now: datetime) -> bool:
    """Is it time for a whole look (``state``: bronze's records' state; never looked: yes)?"""
    last = state.get("whole_look_at")
    return last is None or now - datetime.fromisoformat(last) >= every


def dates_to_read(new_files: list[str], folders: tuple[str, ...]) -> tuple[str, ...] | None:
    """The date folders the source lists to find the run's new files, or None: the whole landing
    folder (a new file outside a date folder, a date name a glob would misread, too many dates).

    ``new_files``: the new files' names under the landing folder; ``folders``: the hour folders
    the checks listed, newest first (with no new file, a batch to replay lists the newest date;
    none: a whole look, the whole folder).
    """
    dates = set()
    for name in new_files:
        parts = PurePosixPath(name).parts
        if len(parts) < 2:
            return None  # loose in the landing folder
        dates.add(parts[0])
    if not dates and folders:
        dates.add(folders[0].split("/")[0])
    if not dates or len(dates) > MAX_DATES_NAMED:
        return None
    if not all(_GLOB_SAFE_NAME.fullmatch(date) for date in dates):
        return None
    return tuple(sorted(dates))
