"""`lakehouse audit` finds what a writer without conditional put did to a table on S3.

A server of this module's own keeps every object version (``LAKEHOUSE_S3_VERSIONING``). The
project's writer (delta-rs, put-if-absent) commits; then a foreign writer with plain PUTs, as a
Spark session without the project's LogStore commits (it checks that a version is free, then
writes it), replaces one commit and adds a data file again at the next version.
"""

from __future__ import annotations

import json
import secrets

import pyarrow as pa
import pytest
from helpers import s3_requests
from s3_server import BUCKET, running_s3_server, s3_environment, signed_request

from lakehouse import object_storage
from lakehouse.config import Lakehouse
from lakehouse_tools import audit, cli

TABLE = "silver.ad_events"  # any declared table: the audit goes over the catalog's


@pytest.fixture(scope="module")
def versioned_s3(tmp_path_factory):
    """A private server whose bucket keeps every object version, in this process's environment."""
    with (
        running_s3_server(tmp_path_factory.mktemp("s3-versioned"), versioning=True) as settings,
        pytest.MonkeyPatch.context() as patch,
        s3_environment(settings, patch.setenv),
    ):
        yield settings


def commit_key(path: str, version: int) -> str:
    return f"{object_storage.split(path)[1]}/_delta_log/{version:020d}.json"


def test_audit_names_an_overwritten_version_and_a_file_added_twice(versioned_s3, capsys):
    lakehouse = Lakehouse(root=f"s3a://{BUCKET}/audit-{secrets.token_hex(3)}")
    path = lakehouse.table(TABLE).path
    schema = pa.schema([("n", pa.int64())])
    for n in range(3):  # versions 0, 1, 2 by the project's writer
        object_storage.write_delta(path, pa.table({"n": [n]}, schema=schema), mode="append")
    assert cli.main(["audit", "--lakehouse-root", lakehouse.root]) == 0
    assert capsys.readouterr().out == "audit: no commit overwritten, no data file added twice\n"

    # The foreign writer: version 2 looked free to it, so it PUT its commit there (no
    # If-None-Match): version 2's commit is gone, and both writers were told success.
    _, first = signed_request(versioned_s3, "GET", commit_key(path, 1))
    (add,) = [action["add"] for action in map(json.loads, first.splitlines()) if "add" in action]
    foreign = {"add": {**add, "path": "foreign.parquet"}}
    commit = json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n" + json.dumps(foreign)
    assert signed_request(versioned_s3, "PUT", commit_key(path, 2), commit.encode())[0] == 200
    # ... and, its answer lost, it committed its file again at the next version.
    assert signed_request(versioned_s3, "PUT", commit_key(path, 3), commit.encode())[0] == 200

    assert s3_requests(versioned_s3)["unconditional-commits"] == 2  # the project's: none
    assert audit.overwritten_versions(path) == {2: 2}
    assert audit.doubled_files(audit.commit_adds(path)) == {"foreign.parquet": [2, 3]}
    assert cli.main(["audit", "--lakehouse-root", lakehouse.root]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{TABLE}: version 2 was written 2 times (one commit replaced another)",
        f"{TABLE}: data file foreign.parquet was added by commits 2, 3",
        "audit: 2 trace(s) of a writer without conditional put: every writer of an S3 table "
        "must commit by put-if-absent (docs/deployment.md, 'Object storage')",
    ]
