"""`lakehouse audit`: what a writer without conditional put may have done to the tables' logs.

Delta's rule on S3: a commit is safe only when it is created by put-if-absent (the project's
drivers through its S3ConditionalPutLogStore, delta-rs through its conditional put). A writer
without it (a Spark session without ``spark.delta.logStore.s3a.impl``, a raw PUT) checks whether
the version exists and then writes it: two such writers both take a version, one commit silently
replaces the other, and both were told success. Two traces can be found afterwards:

* **a version overwritten**: on a versioned bucket (``make s3-up`` enables versioning on the local
  server), a ``_delta_log/<version>.json`` with more than one object version;
* **a data file added by two commits**: what a writer that took a lost answer for a conflict does
  (it commits its data file again at the next version); a reader going commit by commit (a Delta
  streaming source, the change feed) reads that file twice.

Each table's JSON commits are read once (Delta's log clean-up bounds them: 30 days by default),
and its log's object versions are listed once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlparse

from lakehouse import catalog, files, object_storage
from lakehouse.config import Lakehouse

_COMMIT = re.compile(r"^(\d{20})\.json$")
_S3 = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@dataclass(frozen=True)
class Finding:
    """One trace of an unsafe writer in one table's log."""

    table: str
    problem: str

    def __str__(self) -> str:
        return f"{self.table}: {self.problem}"


def commit_adds(path: str) -> dict[int, list[str]]:
    """The data files each JSON commit of the table at ``path`` adds, by version (commit by commit,
    as a streaming reader sees them, not the table's state, where one file is one file)."""
    log = files.lake_path(path) / "_delta_log"
    commits = {}
    for entry in log.iterdir() if log.is_dir() else ():
        if found := _COMMIT.match(entry.name):
            lines = entry.read_text().splitlines()
            actions = [json.loads(line) for line in lines if line.strip()]
            commits[int(found[1])] = [a["add"]["path"] for a in actions if "add" in a]
    return dict(sorted(commits.items()))


def doubled_files(commits: dict[int, list[str]]) -> dict[str, list[int]]:
    """The data files added by more than one commit, with the versions that added them."""
    versions: dict[str, list[int]] = {}
    for version, added in commits.items():
        for file in added:
            versions.setdefault(file, []).append(version)
    return {file: found for file, found in versions.items() if len(found) > 1}


def overwritten_versions(path: str) -> dict[int, int] | None:
    """The commit versions of the table at ``path`` that were written more than once, with how many
    times, from the bucket's object versions; None when its bucket keeps no object versions."""
    if not object_storage.is_object_store(path):
        return {}  # Delta and delta-rs create a local commit file exclusively (a link, not a PUT)
    bucket, key = object_storage.split(path)
    if not bucket_versioned(bucket):
        return None
    counts: dict[int, int] = {}
    for object_key in _object_versions(bucket, f"{key}/_delta_log/"):
        if found := _COMMIT.match(object_key.rsplit("/", 1)[-1]):
            counts[int(found[1])] = counts.get(int(found[1]), 0) + 1
    return {version: count for version, count in sorted(counts.items()) if count > 1}


def table_findings(name: str, path: str) -> tuple[list[Finding], bool]:
    """What the log of table ``name`` at ``path`` shows of an unsafe writer (none: nothing), and
    whether its overwrites could be checked (its bucket keeps object versions)."""
    overwritten = overwritten_versions(path)
    findings = [
        Finding(name, f"version {version} was written {count} times (one commit replaced another)")
        for version, count in (overwritten or {}).items()
    ]
    for file, versions in doubled_files(commit_adds(path)).items():
        listed = ", ".join(str(v) for v in versions)
        findings.append(Finding(name, f"data file {file} was added by commits {listed}"))
    return findings, overwritten is not None


def audit(lakehouse: Lakehouse) -> tuple[list[Finding], list[str]]:
    """The findings over every declared table of ``lakehouse`` that exists, and the names of the
    tables whose overwrites could not be checked (their bucket keeps no object versions)."""
    findings, unversioned = [], []
    for spec in catalog.tables():
        name, path = spec.name, lakehouse.table(spec.name).path
        if not (files.lake_path(path) / "_delta_log").is_dir():
            continue
        found, checked = table_findings(name, path)
        findings += found
        if not checked:
            unversioned.append(name)
    return findings, unversioned


# The bucket's versioning and object versions: S3 calls the obstore client does not make.


def bucket_versioned(bucket: str) -> bool:
    """True when ``bucket`` keeps every version of an object (its versioning is Enabled)."""
    status, body = _request("GET", bucket, "", "versioning=")
    if status != 200:
        return False
    found = ElementTree.fromstring(body).find(f"{_S3}Status")
    return found is not None and found.text == "Enabled"


def _object_versions(bucket: str, prefix: str) -> list[str]:
    """The key of every object version under ``prefix`` (a key once per version it has)."""
    keys, marker = [], ""
    while True:
        query = f"prefix={quote(prefix, safe='')}&versions="
        if marker:
            query = f"key-marker={quote(marker, safe='')}&{query}"
        status, body = _request("GET", bucket, "", query)
        if status != 200:
            raise OSError(f"listing the object versions of s3://{bucket}/{prefix}: HTTP {status}")
        listing = ElementTree.fromstring(body)
        keys += [v.findtext(f"{_S3}Key") for v in listing.iter(f"{_S3}Version")]
        if listing.findtext(f"{_S3}IsTruncated") != "true":
            return keys
        marker = listing.findtext(f"{_S3}NextKeyMarker")


def _request(method: str, bucket: str, key: str, query: str = "") -> tuple[int, bytes]:
    """One request to ``bucket``, signed with SigV4 from the AWS_* settings: status and body."""
    settings = object_storage.S3Settings.from_env()
    endpoint = settings.endpoint or f"https://s3.{settings.region}.amazonaws.com"
    host = urlparse(endpoint).netloc
    now = datetime.now(UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    path = quote(f"/{bucket}/{key}")
    headers = {
        "host": host,
        "x-amz-date": stamp,
        "x-amz-content-sha256": hashlib.sha256(b"").hexdigest(),
    }
    names = ";".join(sorted(headers))
    canonical_query = "&".join(sorted(p if "=" in p else p + "=" for p in query.split("&") if p))
    canonical = "\n".join(
        [method, path, canonical_query, *(f"{n}:{headers[n]}" for n in sorted(headers)), ""]
        + [names, headers["x-amz-content-sha256"]]
    )
    scope = f"{day}/{settings.region}/s3/aws4_request"
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    signing = f"AWS4{settings.secret_key}".encode()
    for part in (day, settings.region, "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{digest}"
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={settings.access_key}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    url = endpoint + path + (f"?{canonical_query}" if canonical_query else "")
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def run(lakehouse: Lakehouse) -> int:
    """Print the findings (one line each) and what could not be checked; exit code 1 when there is
    a finding, else 0."""
    findings, unversioned = audit(lakehouse)
    for finding in findings:
        print(finding)
    if unversioned:
        print(
            f"not checked for overwritten versions (the bucket keeps no object versions): "
            f"{', '.join(unversioned)}"
        )
    if not findings:
        print("audit: no commit overwritten, no data file added twice")
        return 0
    print(
        f"audit: {len(findings)} trace(s) of a writer without conditional put: every writer of an "
        "S3 table must commit by put-if-absent (docs/deployment.md, 'Object storage')"
    )
    return 1
