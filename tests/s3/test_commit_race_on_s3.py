"""Four writers race on one S3 table while the server loses answers: every commit is kept once.

Two Spark drivers with the project's settings (the engine, and a spark-submit of
tests/s3/spark_appends.py as the DAG's tasks start one) and two delta-rs writers (the ops tables'
path, ``object_storage.write_delta``) append to one table at once, through the server's front
(include/s3/server.py), which applies every third commit PUT of each kind of writer and then closes
the connection instead of answering (``lose_answer``). The writers' clients retry, are refused (412,
the version exists) and must find their own commit there: none lost, none doubled, none overwritten.

While the drivers run, no process's command line holds the S3 secret (``ps -eo args`` shows them to
every local user).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
from helpers import s3_faults, s3_requests

from lakehouse import object_storage
from lakehouse_tools import audit
from lakehouse_tools.fault_harness.launch import (
    job_environment,
    kill_group,
    log_tail,
    short_driver,
)

APPENDS = 5  # per writer: 1 + 4 * 5 commits
LOSE_EVERY = 3  # of each kind of writer's commit PUTs (their retries included)
DELTA_RS_PAUSE_S = 0.5  # about a Spark append's time: delta-rs's commits spread over the race
# A commit PUT: the table's next _delta_log version.
COMMIT_KEY = r"/_delta_log/\d{20}\.json$"
# Each kind of writer as the server tells it: its client's User-Agent.
AGENTS = {"delta-rs": "object_store", "spark": "aws-sdk-java"}
SPARK_APPENDS = Path(__file__).with_name("spark_appends.py")
READY_WITHIN_S = 180  # the spark-submit driver's start, on a busy machine


def command_lines() -> dict[int, str]:
    """Every process's command line, as ``ps -eo args`` shows it to any local user."""
    lines = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:  # ended meanwhile
                continue
    return {pid: line.decode(errors="replace") for pid, line in lines.items()}


def spark_submit(table: str, writer: str, lakehouse, go: Path) -> subprocess.Popen:
    """A driver appending to ``table`` as ``writer`` once ``go`` exists, started by spark-submit
    as a task's driver is (local[2], the fast-start JVM options); its output in ``go``.log."""
    command = [
        *short_driver(lakehouse),
        str(SPARK_APPENDS),
        table,
        writer,
        str(APPENDS),
        str(go),
    ]
    with open(go.with_suffix(".log"), "w") as log:
        return subprocess.Popen(
            command,
            env=job_environment(lakehouse),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_four_writers_through_lost_answers_keep_every_commit_once(
    s3_lakehouse, s3_reader, s3_engine, tmp_path
):
    path = f"{s3_lakehouse.root}/tables/race"
    schema = pa.schema([("writer", pa.string()), ("n", pa.int64())])
    object_storage.write_delta(path, pa.table({"writer": ["created"], "n": [0]}, schema=schema))
    secret = s3_engine["AWS_SECRET_ACCESS_KEY"]
    unconditional_before = s3_requests(s3_engine).get("unconditional-commits", 0)
    go = tmp_path / "go"
    driver = spark_submit(path, "spark-submit", s3_lakehouse, go)
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while not go.with_suffix(".ready").exists():
            assert driver.poll() is None, log_tail(str(go.with_suffix(".log")))
            assert time.monotonic() < deadline, log_tail(str(go.with_suffix(".log")))
            time.sleep(0.2)
        for agent in AGENTS.values():
            s3_faults(s3_engine, lose_answer=COMMIT_KEY, agent=agent, every=LOSE_EVERY)
        errors, seen_lines = [], Counter()

        def engine_appends():
            try:
                for n in range(1, APPENDS + 1):
                    s3_reader.createDataFrame(
                        [("engine", n)], "writer string, n long"
                    ).write.format("delta").mode("append").save(path)
            except Exception as error:  # reported below, with the other writers' results
                errors.append(error)

        def delta_rs_appends(writer: str):
            try:
                for n in range(1, APPENDS + 1):
                    rows = pa.table({"writer": [writer], "n": [n]}, schema=schema)
                    object_storage.write_delta(path, rows, mode="append")
                    time.sleep(DELTA_RS_PAUSE_S)
            except Exception as error:
                errors.append(error)

        writers = [
            threading.Thread(target=engine_appends),
            threading.Thread(target=delta_rs_appends, args=("delta-rs-1",)),
            threading.Thread(target=delta_rs_appends, args=("delta-rs-2",)),
        ]
        go.touch()
        for writer in writers:
            writer.start()
        # While they write: no command line on this machine shows the secret.
        while any(writer.is_alive() for writer in writers) or driver.poll() is None:
            for pid, line in command_lines().items():
                assert secret not in line, f"process {pid} shows the S3 secret: {line[:300]}"
                seen_lines["spark-submit driver"] += str(SPARK_APPENDS) in line
                seen_lines["engine"] += "SparkConnectServer" in line
                seen_lines["s3 gateway"] += "versitygw" in line
            time.sleep(0.5)
        for writer in writers:
            writer.join()
        assert driver.wait(timeout=60) == 0, log_tail(str(go.with_suffix(".log")))
    finally:
        kill_group(driver)
        armed = s3_faults(s3_engine)["armed"]
        s3_faults(s3_engine, "/drop")  # disarmed: the session's next tests share the server
    assert errors == []
    # The command lines looked at were those of the processes that hold the secret's settings.
    assert all(seen_lines[name] > 0 for name in ("spark-submit driver", "engine", "s3 gateway"))

    # Answers were lost, to both kinds of writer.
    assert [fault["fired"] > 0 for fault in armed] == [True, True], armed
    lost = sum(fault["fired"] for fault in armed)

    # No version overwritten: every commit was created by put-if-absent, none by a plain PUT.
    assert s3_requests(s3_engine).get("unconditional-commits", 0) == unconditional_before
    # Every commit kept once: versions 0..20, each one file, and the 21 rows written.
    commits = audit.commit_adds(path)
    assert sorted(commits) == list(range(1 + 4 * APPENDS))
    added = [file for files in commits.values() for file in files]
    assert len(added) == len(set(added)) == 1 + 4 * APPENDS  # no data file added twice
    table = object_storage.delta_table(path)
    rows = sorted(tuple(row.values()) for row in table.to_pyarrow_table().to_pylist())
    writers_rows = [
        (writer, n)
        for writer in ("engine", "spark-submit", "delta-rs-1", "delta-rs-2")
        for n in range(1, APPENDS + 1)
    ]
    assert rows == sorted([("created", 0), *writers_rows])
    print(f"{lost} answers lost; {len(commits)} versions")
