"""What bronze has read: the file source's log of files, and bronze's index of their bytes.

Spark's file source logs each file it reads (URI, modification time) in its checkpoint
(:func:`ingested_files`); bronze adds what a later look needs to tell a changed file from a
touched one or a copy (size, SHA-256) in an index beside the checkpoint (:class:`LandedIndex`,
``gen=N.landed_files/``, kept by folder and by identity so that a run reads only the records it
looks up), from the source log's entries of the batches since the last record
(:func:`record_ingested_files`); for a file that changed between Spark's listing and the record,
from bronze's rows (:mod:`lakehouse.landing.read_back`). It is an index of small JSON files, not
a Delta table: it lives beside the checkpoint on local disk or S3 alike, needs no engine, and a
run's few lookups are a few small reads, where a table would add a commit (and a log to trim)
to every run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lakehouse import checkpoint_log
from lakehouse.files import S3Path, delete_tree, lake_path, write_atomic
from lakehouse.landing.listing import landed_path, spark_uri
from lakehouse.landing.read_back import bytes_read


def ingested_files(checkpoint: str) -> dict[str, int]:
    """The files the source has read in its committed batches, by URI, with their mtime (ms) then.

    From the file source's log (``sources/0``): the newest compaction up to the committed batch,
    then one entry per batch. Empty when nothing is committed or the log cannot be read (the
    checkpoint check reports a damaged checkpoint).
    """
    return {uri: logged_mtime for uri, (logged_mtime, _) in _source_log(checkpoint).items()}


def _source_log(checkpoint: str) -> dict[str, tuple[int, int]]:
    """:func:`ingested_files`, each with the batch that read it: URI -> (mtime in ms, batch id)."""
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
    files: dict[str, tuple[int, int]] = {}
    for n in range(first, log_offset + 1):
        if n not in entries:
            continue
        for line in entries[n].read_text(encoding="utf-8").splitlines()[1:]:
            entry = json.loads(line)
            files[entry["path"]] = (int(entry["timestamp"]), int(entry.get("batchId", n)))
    return files


def sha256_of(path: Path | S3Path, limit: int | None = None) -> str:
    """The SHA-256 of a file's bytes (of its first ``limit`` bytes, when given)."""
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


def mtime_ms(stat) -> int:
    """A file's modification time in milliseconds, as the file source logs it."""
    return stat.st_mtime_ns // 1_000_000


def manifest_path(checkpoint: str) -> Path | S3Path:
    """Where bronze keeps what it knows of each file it has read (beside the checkpoint folder)."""
    return lake_path(f"{checkpoint}.landed_files")


def _legacy_path(checkpoint: str) -> Path | S3Path:
    # Before the index: one JSON object of every file, read and parsed whole several times a run.
    return lake_path(f"{checkpoint}.landed_files.json")


def _shard_name(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".json"


def folder_of(uri: str) -> str:
    """The folder part of a landed file's URI: the key of its shard of the index."""
    return uri.rsplit("/", 1)[0]


class LandedIndex:
    """What bronze knows of each landed file, kept by key so a run reads only what it looks up.

    A folder beside the checkpoint (:func:`manifest_path`):

    * ``folders/<hash of the folder's URI>.json``: ``{uri: record}`` of the files of one folder
      (an hour folder, in the producer's layout): size, mtime, SHA-256, ``batch`` (the source log
      batch that read it; absent: a decision for a file not read yet), ``copy_of``, ``gzip_payload``;
    * ``originals/<size>/<payload 0|1>-<sha256>``: the URI of the file read first with those
      bytes (not a copy), for the copy check of a new file (a size with no folder: no hash needed);
    * ``state.json``: the source log batch recorded through, the newest ``<date>/<hour>`` read,
      where the turn of older folders is, and the files read while still being written.

    A run loads the shards of the folders it lists and the sizes of its new files: its cost does
    not depend on how many files bronze has read before. Writes replace whole small files.
    """

    def __init__(self, checkpoint: str, fresh: bool = False) -> None:
        """``fresh``: ignore what is stored (it is replaced whole at the next :meth:`save`)."""
        self.checkpoint = checkpoint
        self.path = manifest_path(checkpoint)
        self._replace = fresh
        self._folders: dict[str, dict] = {}
        self._sizes: dict[int, bool] = {}  # is there an original of that size?
        self._originals: dict[str, str | None] = {}  # identity -> its original's URI
        self._dirty: set[tuple[str, object]] = set()
        self.loaded_bytes = 0  # what this index read from storage (the benchmark reports it)
        self.recorded_now: list[str] = []  # the files :func:`record_ingested_files` just added
        try:
            self.state = (
                {"version": 1}
                if fresh
                else json.loads((self.path / "state.json").read_text(encoding="utf-8"))
            )
        except (OSError, ValueError):
            self.state = {}
        self.state.setdefault("recorded_batch", -1)
        self.state.setdefault("newest_read", None)
        self.state.setdefault("audit_after", None)
        self.state.setdefault("unsettled", {})
        self._legacy = None
        if not self.state.get("version"):
            self._migrate()

    def _migrate(self) -> None:
        """Take the records of the JSON manifest of before (once: the index replaces it)."""
        self.state["version"] = 1
        try:
            legacy = json.loads(_legacy_path(self.checkpoint).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        logged = _source_log(self.checkpoint)
        for uri, known in legacy.items():
            if uri in logged:
                known = {**known, "batch": logged[uri][1]}
            self.put(uri, known)
            if "batch" in known and known.get("size") is None:
                self.state["unsettled"][uri] = known["batch"]
            elif "batch" in known:
                self.add_original(uri, known)
        self._legacy = _legacy_path(self.checkpoint)

    def _read_text(self, path) -> str:
        if self._replace:
            return ""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return ""
        self.loaded_bytes += len(text)
        return text

    def _read(self, path) -> dict:
        text = self._read_text(path)
        return json.loads(text) if text else {}

    def folder(self, folder: str) -> dict[str, dict]:
        """The records of the files of ``folder`` (a URI, :func:`folder_of`), by URI."""
        if folder not in self._folders:
            stored = self._read(self.path / "folders" / _shard_name(folder))
            self._folders[folder] = stored.get("files", {})
        return self._folders[folder]

    def get(self, uri: str) -> dict | None:
        return self.folder(folder_of(uri)).get(uri)

    def read(self, uri: str) -> bool:
        """Has the source read ``uri`` in a committed batch?"""
        known = self.get(uri)
        return known is not None and "batch" in known

    def put(self, uri: str, record: dict) -> None:
        folder = folder_of(uri)
        self.folder(folder)[uri] = record
        self._dirty.add(("folder", folder))

    def drop(self, uri: str) -> None:
        """Forget a decision about a file not read (it is no longer a copy, or gone)."""
        folder = folder_of(uri)
        if self.folder(folder).pop(uri, None) is not None:
            self._dirty.add(("folder", folder))

    def has_size(self, size: int) -> bool:
        """Has bronze read an original (not a copy) of ``size`` bytes? (No hash needed if not.)"""
        if size not in self._sizes:
            self._sizes[size] = (self.path / "originals" / str(size)).is_dir()
        return bool(self._sizes[size])

    def original(self, record: dict) -> str | None:
        """The original read with the same bytes as ``record`` (size, SHA-256, payload), or None."""
        key = identity(record)
        if key not in self._originals:
            if self._sizes.get(record["size"]) is False:
                return None
            found = self._read_text(self.path / "originals" / str(record["size"]) / key)
            self._originals[key] = found or None
        return self._originals[key]

    def add_original(self, uri: str, record: dict) -> None:
        """Remember ``uri`` as the original of its bytes, unless another file is already."""
        if record.get("sha256") and not record.get("copy_of") and record.get("size") is not None:
            if self.original(record) is None:
                self._originals[identity(record)] = uri
                self._sizes[record["size"]] = True
                self._dirty.add(("original", (record["size"], identity(record))))

    def records(self, folders) -> dict[str, dict]:
        """The records of the files of ``folders`` (URIs), by URI."""
        return {uri: known for folder in folders for uri, known in self.folder(folder).items()}

    def every_record(self) -> dict[str, dict]:
        """Every record: a whole look (``lakehouse status``), never a run's."""
        shards = self.path / "folders"
        if not self._replace and shards.is_dir():
            for shard in shards.iterdir():
                if shard.name.endswith(".json"):
                    stored = self._read(shard)
                    self._folders.setdefault(
                        stored.get("folder", shard.name), stored.get("files", {})
                    )
        return {uri: known for files in self._folders.values() for uri, known in files.items()}

    def save(self) -> None:
        """Write the shards changed and the state (a reader sees each file old or new)."""
        if self._replace:
            delete_tree(self.path)
            self._replace = False
        for kind, key in sorted(self._dirty, key=str):
            if kind == "folder":
                write_atomic(
                    self.path / "folders" / _shard_name(key),
                    json.dumps({"folder": key, "files": self._folders[key]}, sort_keys=True),
                )
            else:
                size, key = key
                write_atomic(self.path / "originals" / str(size) / key, self._originals[key])
        write_atomic(self.path / "state.json", json.dumps(self.state, sort_keys=True))
        self._dirty.clear()
        if self._legacy is not None:
            self._legacy.unlink(missing_ok=True)
            self._legacy = None


def identity(record: dict) -> str:
    """What makes two files the same: gzip payload or not, and their bytes' SHA-256."""
    return f"{int(bool(record.get('gzip_payload')))}-{record['sha256']}"


def committed_log_batch(checkpoint: str) -> int | None:
    """The source log batch of the newest committed batch (None: none committed, or unreadable)."""
    committed = checkpoint_log.newest(checkpoint, "commits")
    if committed is None:
        return None
    try:
        offsets = (lake_path(checkpoint) / "offsets" / str(committed)).read_text(encoding="utf-8")
        return int(json.loads(offsets.splitlines()[2])["logOffset"])
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return None


def source_entries(checkpoint: str, after: int, through: int) -> list[tuple[str, int, int]] | None:
    """The source log's entries of batches ``after + 1 .. through``: (URI, mtime ms, batch).

    Read by key: each batch's own file, or, for batches folded into a compaction (every tenth
    batch holds every entry before it, in batch order), that file's tail back to ``after``. None
    when a batch is in neither (the checkpoint check reports a damaged checkpoint).
    """
    folder = lake_path(checkpoint) / "sources" / "0"
    found: list[tuple[str, int, int]] = []
    batch = after + 1
    while batch <= through:
        try:
            text = (folder / str(batch)).read_text(encoding="utf-8")
        except OSError:
            compacted = next(
                (n for n in range(batch, through + 1) if (folder / f"{n}.compact").is_file()), None
            )
            if compacted is None:
                return None
            found += [
                e for e in _tail_entries(folder / f"{compacted}.compact", after) if e[2] >= batch
            ]
            batch = compacted + 1
            continue
        found += [_entry_of(line, batch) for line in text.splitlines()[1:] if line]
        batch += 1
    return found


def _entry_of(line: str, batch: int) -> tuple[str, int, int]:
    entry = json.loads(line)
    return entry["path"], int(entry["timestamp"]), int(entry.get("batchId", batch))


def _tail_entries(path, after: int, block: int = 1 << 16) -> list[tuple[str, int, int]]:
    """The entries of a compacted source log file with a batch after ``after``, read from its end."""
    found: list[tuple[str, int, int]] = []
    with path.open("rb") as handle:
        end = handle.seek(0, 2)
        rest = b""
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start) + rest
            end = start
            lines = chunk.split(b"\n")
            rest = lines.pop(0) if start > 0 else b""
            for line in reversed(lines):
                if not line.startswith(b"{"):
                    continue
                entry = _entry_of(line.decode("utf-8"), after + 1)
                if entry[2] <= after:
                    return found[::-1]
                found.append(entry)
    return found[::-1]


def record_ingested_files(
    checkpoint: str,
    write: bool = True,
    table_path: str | None = None,
    root: str | Path | None = None,
) -> LandedIndex:
    """Add the files the source read since the last call to bronze's index; the index.

    Only the source log's batches after the last one recorded are read (:func:`source_entries`).
    ``write=False`` leaves the stored index as it is (a read-only look, e.g. status).

    A file is recorded (size, mtime, SHA-256) when its mtime is still the one the source logged
    when it read it. One that changed in between (still being written when Spark listed it) is
    recorded by what bronze's rows at ``table_path`` hold of it
    (:func:`lakehouse.landing.read_back.bytes_read`): its size and SHA-256 then those of the bytes
    read. Without ``table_path``, or when the rows are not its first lines (a rewrite), it is
    recorded without them (its change is reported), and looked at again at each call.
    ``root``: the landing folder, to keep the newest ``<date>/<hour>`` read (where the next run's
    listing of new hour folders stops, :mod:`lakehouse.landing.window`).
    """
    from lakehouse.landing.window import folder_key

    index = LandedIndex(checkpoint)
    through = committed_log_batch(checkpoint)
    if through is not None and through < index.state["recorded_batch"]:
        # The checkpoint went back (batches forgotten): records of later batches would call files
        # read that the source reads again. Recorded anew from the whole log, once.
        index = LandedIndex(checkpoint, fresh=True)
    state = index.state
    entries = (
        source_entries(checkpoint, state["recorded_batch"], through)
        if through is not None and through > state["recorded_batch"]
        else None
    )
    for uri, logged_mtime, batch in entries or ():
        known = index.get(uri)
        if known is not None and "batch" in known:
            continue
        record = dict(known or {})  # a plan's decision (a copy, a gzip payload) stays
        record.update(mtime_ms=logged_mtime, batch=batch)
        if not known:
            path = landed_path(uri)
            try:
                stat = path.stat()
                same = mtime_ms(stat) == logged_mtime
                record.update(
                    size=stat.st_size if same else None,
                    sha256=sha256_of(path) if same else None,
                )
            except OSError:
                record.update(size=None, sha256=None)
        index.put(uri, record)
        if record.get("size") is None:
            state["unsettled"][uri] = batch
        else:
            index.add_original(uri, record)
    if entries is not None:
        state["recorded_batch"] = through
        if root is not None:
            root_uri = spark_uri(lake_path(root))
            keys = [folder_key(uri, root_uri) for uri, _, _ in entries]
            state["newest_read"] = max(
                (k for k in (*keys, state["newest_read"]) if k), default=None
            )
    index.recorded_now = [uri for uri, _, _ in entries or ()]
    if table_path is not None:
        for uri, batch in list(state["unsettled"].items()):
            size = bytes_read(checkpoint, table_path, uri, batch)
            if size is not None:
                known = index.get(uri) or {}
                known.update(size=size, sha256=sha256_of(landed_path(uri), size))
                index.put(uri, known)
                index.add_original(uri, known)
                del state["unsettled"][uri]
    if write and (entries or index._dirty or index._legacy is not None):
        index.save()
    return index
