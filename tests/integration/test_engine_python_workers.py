"""The engine's Python workers are forked from its fork server (lakehouse_tools.python_workers):
a Python UDF and a foreachBatch function run on the engine run in processes that descend from
that server. Real engine, real queries."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from lakehouse.spark import engine as engine_kind
from lakehouse_tools import engine


@pytest.mark.skipif(engine_kind() != "connect", reason="the jobs run on the engine only there")
def test_a_python_udf_and_a_foreach_batch_function_run_in_forks_of_the_engine_s_server(
    spark, tmp_path
):
    def ancestors() -> str:
        """This process's parent, its parent, ... up to init: run in the engine's workers (a local
        function, so that it is pickled by value)."""
        import os

        chain, pid = [], os.getpid()
        while pid > 1:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
            chain.append(pid)
        return " ".join(map(str, chain))

    server = engine.python_workers_pid()
    assert server, "the engine runs no fork server (LAKEHOUSE_ENGINE_PYTHON_FORKS=1 is the default)"

    chain = spark.range(1).select(F.udf(lambda _: ancestors(), StringType())("id")).first()[0]
    assert str(server) in chain.split(), f"the UDF's worker ({chain}) is not {server}'s"

    chains, source = tmp_path / "foreach-batch-ancestors", tmp_path / "source"
    source.mkdir()
    (source / "one.txt").write_text("a line\n")

    def note_ancestors(batch, batch_id):
        with open(chains, "a") as out:
            out.write(ancestors() + "\n")

    query = (
        spark.readStream.format("text")
        .load(str(source))
        .writeStream.foreachBatch(note_ancestors)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    query.awaitTermination(120)
    chain = chains.read_text().splitlines()[0]
    assert str(server) in chain.split(), f"foreachBatch's worker ({chain}) is not {server}'s"
