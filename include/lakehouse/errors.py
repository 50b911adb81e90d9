"""The project's own errors: what is wrong and what to fix, never a traceback a user has to read."""

from __future__ import annotations


class ConfigError(RuntimeError):
    """A setting, argument or declaration is missing or wrong; the message says what to fix."""


class CatalogError(ConfigError):
    """A table declaration is inconsistent; the message names the table and what to fix."""


class DiskFull(ConfigError):
    """A write failed for want of space; the message names the disk, what is free and what to free."""


# How a full disk reads in an error, whichever layer saw it: Hadoop's local file system and the
# JVM (java.io.IOException), Python (OSError errno 28), a quota.
NO_SPACE_MARKERS = ("No space left on device", "Disk quota exceeded", "ENOSPC")


def _error_texts(error: BaseException):
    """The messages of ``error`` and of its causes, with a Spark error's server-side trace."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield str(error)
        yield str(getattr(error, "_stackTrace", "") or "")
        error = error.__cause__ or error.__context__


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def disk_full(error: BaseException, what: str, folders: dict[str, str]) -> DiskFull | None:
    """A :class:`DiskFull` for ``what`` (e.g. a table's name) when ``error`` or one of its causes
    says a disk is full; None otherwise.

    ``folders``: the places the job writes (label -> local path; others, e.g. ``s3a://``, are
    skipped): the message gives each one's free space, so the full one is named, then what can be
    freed and that the rerun is exact (a write that fails before its commit leaves nothing
    committed; the stream resumes from its last committed batch).
    """
    import os
    import shutil
    from urllib.parse import urlparse

    if not any(marker in text for text in _error_texts(error) for marker in NO_SPACE_MARKERS):
        return None
    free = []
    for label, folder in folders.items():
        parsed = urlparse(folder)
        if parsed.scheme not in ("", "file"):
            continue
        path = parsed.path if parsed.scheme else folder
        while path and not os.path.exists(path):
            path = os.path.dirname(path)
        if path:
            usage = shutil.disk_usage(path)
            free.append(f"{label} {folder}: {_size(usage.free)} free of {_size(usage.total)}")
    where = f" ({'; '.join(free)})" if free else ""
    return DiskFull(
        f"{what}: no space left on the disk{where}. Nothing of this write was committed: rerun the "
        "task once there is room and it resumes exactly where it stopped. To free space: VACUUM old "
        "table versions (the ysb_maintenance DAG, or jobs/maintenance.py --table <name>), move "
        "away landed files bronze has read (under landing/) and reports already delivered "
        "(under outbox/), and clear Spark's scratch space (spark.local.dir, the temp folder)."
    )
