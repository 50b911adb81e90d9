"""What bronze read of a landed file, taken from bronze's own rows when the file itself cannot say.

Bronze records a file it has read by its size and SHA-256 (:mod:`lakehouse.landing.manifest`).
That record is only right if the file is still what Spark read. A file still being written when
Spark listed it has a newer modification time than the one Spark logged, and Spark may have read
more of it than it had at listing: its line reader goes on to the end of the line that starts at
the listed end. So the record is then taken from what Spark wrote: the bronze rows of the file,
found in the one commit of the batch that read it (its transaction id is the query's id and the
batch's id), compared with the file's lines now. :func:`bytes_read` gives how many of the file's
leading bytes those rows are: the whole file (read whole, nothing to report), a prefix (bytes
appended after the read, refused with the exact fix), or None (the file was rewritten: refused by
name, or the rows are not found).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from urllib.parse import unquote

from lakehouse import delta_log
from lakehouse.files import lake_path
from lakehouse.landing.listing import GZIP_EVENTS_SUFFIX, landed_path, source_file_of

# What Spark's line reader splits on (a CR alone ends a line too).
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def bytes_read(checkpoint: str, table_path: str, uri: str, batch: int) -> int | None:
    """How many leading bytes of the landed file ``uri`` (read by ``batch`` of the query whose
    checkpoint is ``checkpoint``) bronze's rows at ``table_path`` hold; None when unknown.

    The rows are the file's first lines now, whole (the read ended at a line end), or those lines
    and the start of the next one (the read ended inside a line still being written). Anything
    else (other lines, fewer bytes than read) is a rewrite. A ``.jsonl.gz`` file is not read back.
    """
    if uri.endswith(GZIP_EVENTS_SUFFIX):
        return None
    rows = _rows_of(checkpoint, table_path, uri, batch)
    if rows is None:
        return None
    try:
        data = landed_path(uri).read_bytes()
    except OSError:
        return None
    return prefix_read(rows, data)


def _rows_of(checkpoint: str, table_path: str, uri: str, batch: int) -> list[bytes] | None:
    """The lines bronze wrote for ``uri`` in ``batch``, as bytes; None when they cannot be found."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        query = json.loads((lake_path(checkpoint) / "metadata").read_text(encoding="utf-8"))["id"]
    except (OSError, ValueError, KeyError):
        return None
    version = delta_log.versions_of_txns(table_path, query, {batch}).get(batch)
    files = None if version is None else delta_log.files_added(table_path, version)
    if files is None:
        return None
    source_file = source_file_of(uri)
    rows: list[bytes] = []
    for file in files:
        try:
            data = (lake_path(table_path) / unquote(file)).read_bytes()
        except OSError:  # compacted and vacuumed since
            return None
        found = pq.read_table(
            pa.BufferReader(data),
            columns=["raw_line", "raw_bytes"],
            filters=[("source_file", "==", source_file)],
        )
        texts, raws = found.column("raw_line").to_pylist(), found.column("raw_bytes").to_pylist()
        # raw_bytes: the exact bytes of a line that is not UTF-8 (raw_line is then repaired).
        rows += [raw if raw is not None else text.encode("utf-8") for text, raw in zip(texts, raws)]
    return rows


def prefix_read(rows: list[bytes], data: bytes) -> int | None:
    """The length of the prefix of ``data`` whose lines (Spark's) are ``rows``, in any order."""
    lines = []  # (start, end of its text, start of the next line)
    start = 0
    for brk in _LINE_BREAK.finditer(data):
        lines.append((start, brk.start(), brk.end()))
        start = brk.end()
    if start < len(data):
        lines.append((start, len(data), len(data)))
    count = len(rows)
    if count == 0:
        return 0
    if count > len(lines):
        return None
    read = Counter(rows)
    if read == Counter(data[a:b] for a, b, _ in lines[:count]):
        return lines[count - 1][2]  # whole lines: with the last one's break, if it has one now
    rest = read - Counter(data[a:b] for a, b, _ in lines[: count - 1])
    if rest.total() == 1:
        [fragment] = rest
        begin, end, _ = lines[count - 1]
        if len(fragment) < end - begin and data[begin:end].startswith(fragment):
            return begin + len(fragment)  # a line cut mid-write: its fragment was read
    return None
