"""The landing zone's file contract, checked in plain Python (no Spark): what bronze reads, what it won't.

Bronze's file source reads every visible ``*.jsonl`` and ``*.jsonl.gz`` (decompressed by Spark's
gzip codec) file under the landing folder, at any depth
(the producer's layout is ``<date>/<hour>/<part>.jsonl``; a file elsewhere is read too, and
reported, since ``lakehouse status`` places files in producer hours by their folder). A file or
folder whose name starts with ``.`` or ``_`` is hidden: a producer still writing it, ignored until
renamed. Any other name the file system allows (colons, spaces, glob characters, backslashes,
Unicode) is read exactly once: the source lists folders without Hadoop's glob and reads through
the raw local file system (:func:`lakehouse.sources.landing_lines_stream`). Symbolic links are
followed, to files and folders, as Spark's listing follows them; every check here walks the folder
the same way (:func:`list_landing`), and a link Spark cannot read through (one to nothing, one
back to a folder it is in) is reported by name.

A landed file is immutable once read (Spark's file source and Auto Loader assume the same): the
source never reads a path twice. Bronze records each file it has read (size, modification time,
SHA-256) in an index beside its checkpoint, kept by folder and size; a file appended to or
rewritten afterwards is reported by name with the exact fix (:func:`changed_files`), never read
again in part or twice. A run's checks list only the hour folders that can hold new files and a
few older ones in turn (:mod:`~lakehouse.landing.window`): their cost does not grow with the
landing zone, and the whole landing folder once a day, when a file landed late in an older
folder is found, checked and read; the source lists the date folders of the new files (one it
reads from a folder the checks did not list is named after the read: :func:`late_files`).

Before each run, bronze plans how the source reads its new files (:func:`plan_new_files`): a file
whose bytes equal those of a file bronze has read, or of another new file (renamed, moved to
another hour, copied), is a copy: its lines are not read again, and it is reported as a copy of
its original (:func:`copied_files`). A ``*.jsonl`` file holding a gzip payload becomes one bronze
row, its first line, so one quarantine entry names the file, instead of thousands of binary lines.

:func:`landing_report` is what ``lakehouse status`` (and bronze's summary) say about it.

The modules, by concept:

* :mod:`~lakehouse.landing.listing`: which files the source reads, their URIs as Spark logs them;
* :mod:`~lakehouse.landing.problems`: a file not read as events (:class:`LandingProblem`, its
  :class:`Problem` code), and the files ignored by their name or read with a caveat;
* :mod:`~lakehouse.landing.window`: the hour folders a run's checks list (the whole zone once a
  day), the date folders its source lists;
* :mod:`~lakehouse.landing.manifest`: what bronze has read (the source's log, bronze's index);
* :mod:`~lakehouse.landing.read_back`: what bronze read of a file still being written (its rows);
* :mod:`~lakehouse.landing.plan`: a run's new files planned (copies, gzip payloads, broken gzip);
* :mod:`~lakehouse.landing.changes`: files changed after bronze read them, refused with the fix;
* :mod:`~lakehouse.landing.report`: all of it for ``lakehouse status``.
"""

from lakehouse.landing.changes import changed_files, late_files
from lakehouse.landing.listing import (
    EVENTS_SUFFIX,
    GZIP_EVENTS_SUFFIX,
    GZIP_MAGIC,
    LAYOUT_DEPTH,
    READ_NAMES_GLOB,
    READ_SUFFIXES,
    UnreadableLink,
    hidden,
    list_landing,
    matching_files,
    readable_files,
    spark_uri,
)
from lakehouse.landing.manifest import (
    LandedIndex,
    ingested_files,
    manifest_path,
    record_ingested_files,
)
from lakehouse.landing.plan import ReadPlan, copied_files, plan_new_files
from lakehouse.landing.problems import LandingProblem, Problem, ignored_files
from lakehouse.landing.report import landing_report

__all__ = [
    "EVENTS_SUFFIX",
    "GZIP_EVENTS_SUFFIX",
    "GZIP_MAGIC",
    "LAYOUT_DEPTH",
    "READ_NAMES_GLOB",
    "READ_SUFFIXES",
    "LandedIndex",
    "LandingProblem",
    "Problem",
    "ReadPlan",
    "UnreadableLink",
    "changed_files",
    "late_files",
    "copied_files",
    "hidden",
    "ignored_files",
    "ingested_files",
    "landing_report",
    "list_landing",
    "manifest_path",
    "matching_files",
    "plan_new_files",
    "readable_files",
    "record_ingested_files",
    "spark_uri",
]
