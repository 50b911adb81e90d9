"""Commits on object storage: writers that never coordinate except through the store's put-if-absent.

The engine (Delta/Spark, through the project's S3ConditionalPutLogStore) and delta-rs (as the ops
tables' appends and rollback's RESTORE write) append to one table at the same time: every commit
is kept, each at a version of its own, and the losers of a race retried at the next version.
"""

from __future__ import annotations

import re
import threading

import pyarrow as pa
import pytest
from helpers import s3_faults, s3_requests

from lakehouse import files, object_storage
from lakehouse.errors import ConfigError
from lakehouse.runtime import leases
from lakehouse.runtime.locks import CheckpointBusy, checkpoint_lock

# The engine appends while delta-rs does, at least APPENDS times and until the server has refused
# a commit (put-if-absent of a version taken): the race then did happen. Once warm, an engine's
# append takes about a second and meets 4-6 of delta-rs's commits: 2-3 commits were refused in
# each of five runs (4 on a cold engine). delta-rs pauses between its appends: unpaced, it kept
# both cores busy (itself and the S3 server) and grew the log each engine append replays by ~10
# commits a second (an append then took 13-25 s, the test ~160 s of a CI worker).
APPENDS, MOST_APPENDS = 3, 12
DELTA_RS_PAUSE_S = 0.2


def test_engine_and_delta_rs_appending_at_once_lose_no_commit(s3_lakehouse, s3_reader, s3_engine):
    path = f"{s3_lakehouse.root}/tables/race"
    schema = pa.schema([("writer", pa.string()), ("n", pa.int64())])
    object_storage.write_delta(path, pa.table({"writer": ["created"], "n": [0]}, schema=schema))
    refused_before = s3_requests(s3_engine).get("precondition-failed", 0)
    errors, spark_done, spark_rows, delta_rs_rows = [], threading.Event(), [], []

    def refused() -> int:
        return s3_requests(s3_engine).get("precondition-failed", 0) - refused_before

    def spark_appends():
        try:
            while len(spark_rows) < APPENDS or (not refused() and len(spark_rows) < MOST_APPENDS):
                row = ("spark", len(spark_rows) + 1)
                s3_reader.createDataFrame([row], "writer string, n long").write.format(
                    "delta"
                ).mode("append").save(path)
                spark_rows.append(row)
        except Exception as error:  # reported below, with the other writer's result
            errors.append(error)
        finally:
            spark_done.set()

    def delta_rs_appends():
        # Appends all the while the engine does, so the engine's commits meet its own.
        try:
            while not spark_done.is_set():
                n = len(delta_rs_rows) + 1
                object_storage.write_delta(
                    path, pa.table({"writer": ["delta-rs"], "n": [n]}, schema=schema), mode="append"
                )
                delta_rs_rows.append(("delta-rs", n))
                spark_done.wait(DELTA_RS_PAUSE_S)
        except Exception as error:
            errors.append(error)

    writers = [threading.Thread(target=spark_appends), threading.Thread(target=delta_rs_appends)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == []

    table = object_storage.delta_table(path)
    rows = sorted(tuple(row.values()) for row in table.to_pyarrow_table().to_pylist())
    assert rows == sorted([("created", 0), *delta_rs_rows, *spark_rows])
    # One commit per append, at versions 0..N with none missing or written twice.
    versions = sorted(commit["version"] for commit in table.history())
    assert versions == list(range(1 + len(spark_rows) + len(delta_rs_rows)))
    log = files.lake_path(path) / "_delta_log"
    assert sorted(p.name for p in log.iterdir() if p.name.endswith(".json")) == [
        f"{v:020d}.json" for v in versions
    ]
    # The writers did race: some commit found its version taken and was retried at the next one.
    print(
        f"{len(spark_rows)} engine appends, {len(delta_rs_rows)} by delta-rs; {refused()} refused"
    )
    assert refused() > 0


def test_a_commit_whose_answer_was_lost_is_committed_once(s3_lakehouse, s3_reader, s3_engine):
    # The server applies the engine's put-if-absent of version 1 and closes the connection instead
    # of answering: the SDK's retry is refused (412, the key exists). The store must read the file,
    # find its own commit there and report success, not a conflict that commits it again at 2.
    path = f"{s3_lakehouse.root}/tables/lost_answer"
    s3_reader.createDataFrame([("first", 0)], "writer string, n long").write.format("delta").save(
        path
    )
    _, key = object_storage.split(path)
    commit = f"{key}/_delta_log/{1:020d}.json"
    s3_faults(s3_engine, lose_answer=re.escape(commit) + "$")
    s3_reader.createDataFrame([("second", 1)], "writer string, n long").write.format("delta").mode(
        "append"
    ).save(path)
    assert [lost.endswith(commit) for lost in s3_faults(s3_engine)["lost"]] == [True]

    log = files.lake_path(path) / "_delta_log"
    assert sorted(p.name for p in log.iterdir() if p.name.endswith(".json")) == [
        f"{v:020d}.json" for v in (0, 1)
    ]
    table = object_storage.delta_table(path)
    rows = sorted(tuple(row.values()) for row in table.to_pyarrow_table().to_pylist())
    assert rows == [("first", 0), ("second", 1)]


def test_a_delta_rs_commit_whose_answer_was_lost_is_committed_once(s3_lakehouse, s3_server):
    # delta-rs's client retries the PUT of version 1 and is refused (412): without its transaction
    # id, delta-rs took that for another writer's commit and committed the same file again at 2.
    path = f"{s3_lakehouse.root}/tables/lost_answer_delta_rs"
    schema = pa.schema([("n", pa.int64())])
    object_storage.write_delta(path, pa.table({"n": [0]}, schema=schema))
    _, key = object_storage.split(path)
    commit = f"{key}/_delta_log/{1:020d}.json"
    s3_faults(s3_server, lose_answer=re.escape(commit) + "$")
    object_storage.write_delta(path, pa.table({"n": [1]}, schema=schema), mode="append")
    assert [lost.endswith(commit) for lost in s3_faults(s3_server)["lost"]] == [True]

    log = files.lake_path(path) / "_delta_log"
    assert sorted(p.name for p in log.iterdir() if p.name.endswith(".json")) == [
        f"{v:020d}.json" for v in (0, 1)
    ]
    rows = object_storage.delta_table(path).to_pyarrow_table().to_pylist()
    assert sorted(row["n"] for row in rows) == [0, 1]


def test_a_second_driver_on_an_s3_checkpoint_is_refused_until_the_first_lease_expires(
    s3_lakehouse, monkeypatch
):
    checkpoint = f"{s3_lakehouse.root}/checkpoints/silver/ad_events/gen=0"
    with checkpoint_lock(checkpoint, "first") as lease:
        assert leases.lease_problem(checkpoint, lease) is None
        with pytest.raises(CheckpointBusy, match="another driver holds checkpoint"):
            with checkpoint_lock(checkpoint, "second"):
                pass
    # Released: the next driver takes it at once, and the first one's batches would stop.
    with checkpoint_lock(checkpoint, "third") as third:
        assert leases.lease_problem(checkpoint, lease) == "another client took it over"
        assert leases.lease_problem(checkpoint, third) is None
    # A holder killed -9 never releases: its lease is taken over once it has expired.
    monkeypatch.setattr(leases, "EXPIRES_S", 4.0)
    monkeypatch.setattr(
        leases, "_renew_s", lambda expires: 3600
    )  # it never renews, as after SIGKILL
    # Entered and never exited (kept referenced: a collected generator would run its cleanup).
    killed_driver = leases.driver_lease(checkpoint, "killed", CheckpointBusy)
    killed = killed_driver.__enter__()
    with pytest.raises(CheckpointBusy):
        with checkpoint_lock(checkpoint, "too early"):
            pass
    import time

    time.sleep(4.5)
    assert leases.lease_problem(checkpoint, killed) == "its client is gone"
    with checkpoint_lock(checkpoint, "after expiry") as taken:
        assert leases.lease_problem(checkpoint, taken) is None


def test_bad_s3_settings_are_named_before_any_job_starts(s3_lakehouse, monkeypatch):
    root = s3_lakehouse.root
    assert files.check_reachable(root) is None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "NOTOURKEY")
    files._bucket_store.cache_clear()
    assert "refused the credentials" in files.check_reachable(root)
    monkeypatch.undo()
    files._bucket_store.cache_clear()
    assert "No bucket 'no-such-bucket'" in files.check_reachable("s3a://no-such-bucket/lakehouse")
    with pytest.raises(ConfigError, match="make s3-jars"):
        object_storage.require_jars([])
