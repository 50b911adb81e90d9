"""Files of the lakehouse (checkpoint notes, landing files, Delta logs read by hand), local or on S3.

``lake_path(p)`` is a :class:`pathlib.Path` for a local path and an :class:`S3Path` for an
``s3a://`` one: the same small protocol (``/``, ``name``, ``parent``, ``exists``, ``is_dir``,
``iterdir``, ``rglob``, ``read_text``, ``stat``, ``unlink``, ...), so code reads and writes either
without asking where it is. What object storage does differently is said once, here:

* no folders: ``mkdir`` does nothing, a "folder" exists while some object's key starts with it;
* no rename: :func:`write_atomic` is one PUT there (an object appears whole), tmp-and-rename here;
* put-if-absent is a conditional PUT (``If-None-Match: *``): :func:`create_exclusive`.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lakehouse.object_storage import S3Settings, is_object_store, split


def lake_path(path: str | os.PathLike) -> Path | S3Path:
    """``path`` as an object with pathlib's protocol: local or on S3."""
    if isinstance(path, S3Path):
        return path
    text = str(path)
    if is_object_store(text):
        bucket, key = split(text)
        return S3Path(bucket, key.rstrip("/"))
    return Path(text)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Replace ``path``'s content so that readers see the old or the new text, never a part."""
    target = lake_path(path)
    if isinstance(target, S3Path):
        target.write_text(text)  # one PUT: the object appears whole
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def create_exclusive(path: str | os.PathLike, text: str) -> bool:
    """Create ``path`` with ``text`` unless it exists (atomically, also against other machines)."""
    target = lake_path(path)
    if isinstance(target, S3Path):
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            target._store().put(target.key, text.encode(), mode="create")
        except (AlreadyExistsError, PreconditionError):
            return False
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(target, "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        return False
    return True


def read_head(path: str | os.PathLike, size: int) -> bytes:
    """The first ``size`` bytes of a file (one ranged GET on object storage)."""
    target = lake_path(path)
    if isinstance(target, S3Path):
        try:
            return bytes(target._store().get_range(target.key, start=0, length=size))
        except FileNotFoundError:
            raise FileNotFoundError(str(target)) from None
        except Exception as error:  # a range past the end of a shorter object
            if target.stat().st_size < size:
                return target.read_bytes()
            raise error
    with open(target, "rb") as handle:
        return handle.read(size)


def delete_tree(path: str | os.PathLike) -> None:
    """Delete ``path`` and everything under it (a no-op when nothing is there)."""
    target = lake_path(path)
    if isinstance(target, S3Path):
        store = target._store()
        keys = [item["path"] for batch in store.list(f"{target.key}/") for item in batch]
        if target.is_file():
            keys.append(target.key)
        for start in range(0, len(keys), 1000):
            store.delete(keys[start : start + 1000])
        return
    import shutil

    shutil.rmtree(target, ignore_errors=True)


def list_names(path: str | os.PathLike) -> list[str]:
    """Names directly under ``path`` (files and folders); empty when there is nothing."""
    target = lake_path(path)
    if not target.is_dir():
        return []
    return sorted(child.name for child in target.iterdir())


def check_reachable(root: str) -> str | None:
    """What is wrong with the object-storage root ``root`` (endpoint, credentials, bucket), or None."""
    if not is_object_store(root):
        return None
    from obstore.exceptions import BaseError

    settings = S3Settings.from_env()
    where = settings.endpoint or "AWS S3"
    bucket, _ = split(root)
    try:
        list_names(root)
    except BaseError as error:
        return unreachable_reason(str(error) or type(error).__name__, where, bucket, root)
    return None


def unreachable_reason(text: str, where: str, bucket: str, root: str) -> str:
    """What to fix, from the error text of a failed listing of ``root`` at ``where``."""
    # The HTTP status as the client states it; never a bare "403" (request ids and timings in the
    # text may contain one).
    found = re.search(r"status code: (\d{3})\b", text)
    status = found[1] if found else None
    # An unknown key id: S3 answers 403 InvalidAccessKeyId, versitygw (the local server) 404
    # XAdminUserNotFound, so the codes are asked before the status.
    refused = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "XAdminUserNotFound")
    if "NoSuchBucket" not in text and (any(code in text for code in refused) or status == "403"):
        return (
            f"{where} refused the credentials for bucket {bucket!r}: check AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY (the local server's are in .local/s3/keys)."
        )
    if "NoSuchBucket" in text or status == "404":
        return f"No bucket {bucket!r} at {where}: create it, or fix LAKEHOUSE_ROOT."
    return (
        f"Cannot reach {where} for {root} ({text.splitlines()[0]}): start the local server with "
        "`make s3-up`, or fix AWS_ENDPOINT_URL_S3."
    )


@dataclass(frozen=True)
class S3Stat:
    st_size: int
    st_mtime: float
    st_mtime_ns: int


@cache
def _bucket_store(bucket: str):
    from obstore.store import S3Store

    settings = S3Settings.from_env()
    options = {"region": settings.region}
    if settings.endpoint:
        options["endpoint"] = settings.endpoint
        options["virtual_hosted_style_request"] = False
    if settings.access_key and settings.secret_key:
        options["access_key_id"] = settings.access_key
        options["secret_access_key"] = settings.secret_key
    client_options = {"allow_http": True} if settings.plain_http else None
    return S3Store(bucket, client_options=client_options, **options)


@dataclass(frozen=True)
class S3Path:
    """An object (or a key prefix, a "folder") in a bucket, with pathlib's protocol."""

    bucket: str
    key: str

    def __str__(self) -> str:
        return f"s3a://{self.bucket}/{self.key}"

    def as_posix(self) -> str:
        return str(self)

    def __fspath__(self) -> str:  # for code that formats paths; there is no local file
        return str(self)

    def __truediv__(self, part: str | os.PathLike) -> S3Path:
        return S3Path(self.bucket, posixpath.join(self.key, str(part)).strip("/"))

    def __lt__(self, other: S3Path) -> bool:
        return str(self) < str(other)

    def _store(self):
        return _bucket_store(self.bucket)

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)

    @property
    def parent(self) -> S3Path:
        return S3Path(self.bucket, posixpath.dirname(self.key))

    @property
    def suffix(self) -> str:
        return posixpath.splitext(self.name)[1]

    def with_name(self, name: str) -> S3Path:
        return self.parent / name

    def relative_to(self, other: S3Path) -> Path:
        return Path(posixpath.relpath(self.key, other.key))

    def absolute(self) -> S3Path:
        return self

    def _head(self):

        try:
            return self._store().head(self.key)
        except FileNotFoundError:
            return None

    def is_file(self) -> bool:
        return bool(self.key) and self._head() is not None

    def is_dir(self) -> bool:
        listing = self._store().list_with_delimiter(f"{self.key}/" if self.key else None)
        return bool(listing["objects"] or listing["common_prefixes"])

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def iterdir(self):
        if not self.is_dir():
            raise FileNotFoundError(str(self))
        listing = self._store().list_with_delimiter(f"{self.key}/" if self.key else None)
        for prefix in listing["common_prefixes"]:
            yield S3Path(self.bucket, prefix.rstrip("/"))
        for item in listing["objects"]:
            yield S3Path(self.bucket, item["path"])

    def walk_files(self):
        """Every object under this prefix, with its listing metadata (one listing, no HEADs)."""
        for batch in self._store().list(f"{self.key}/" if self.key else None):
            for item in batch:
                yield S3Path(self.bucket, item["path"]), item

    def rglob(self, pattern: str):
        yield from self.glob(f"**/{pattern}")

    def glob(self, pattern: str):
        """pathlib's glob over one listing: ``*`` within a name, ``**`` any number of folders."""
        wanted = pattern.split("/")
        for path, _ in self.walk_files():
            if matches_pattern(posixpath.relpath(path.key, self.key).split("/"), wanted):
                yield path

    def read_bytes(self) -> bytes:

        try:
            return bytes(self._store().get(self.key).bytes())
        except FileNotFoundError:
            raise FileNotFoundError(str(self)) from None

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> None:
        self._store().put(self.key, data)

    def write_text(self, text: str, encoding: str = "utf-8") -> None:
        self.write_bytes(text.encode(encoding))

    def open(self, mode: str = "r", encoding: str | None = None, newline: str | None = None):
        """The object read whole into memory (landing and log files are small)."""
        import io

        if "r" not in mode:
            raise ValueError(
                f"{self}: objects are written whole (write_text), not opened for {mode}"
            )
        data = self.read_bytes()
        if "b" in mode:
            return io.BytesIO(data)
        return io.TextIOWrapper(io.BytesIO(data), encoding=encoding or "utf-8", newline=newline)

    def stat(self) -> S3Stat:
        meta = self._head()
        if meta is None:
            raise FileNotFoundError(str(self))
        mtime = meta["last_modified"].timestamp()
        return S3Stat(st_size=meta["size"], st_mtime=mtime, st_mtime_ns=int(mtime * 1e9))

    def unlink(self, missing_ok: bool = False) -> None:
        if not missing_ok and not self.is_file():
            raise FileNotFoundError(str(self))
        self._store().delete(self.key)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to make: a "folder" on object storage exists once an object is under it."""


def matches_pattern(parts: tuple[str, ...] | list[str], pattern: list[str]) -> bool:
    """Whether path ``parts`` match a glob split by ``/`` (``**`` any number of folders)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(matches_pattern(parts[skip:], pattern[1:]) for skip in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and matches_pattern(parts[1:], pattern[1:])
    )
