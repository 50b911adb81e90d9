"""A job's queries are interpreted when what they read is small, compiled otherwise (lakehouse.spark.fit_code_generation)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse.spark import GENERATED_CODE_FROM_BYTES, fit_code_generation

CODEGEN = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")


@pytest.fixture
def restored(spark):
    yield spark
    fit_code_generation(
        spark, None
    )  # the session is shared by the tests: compiled, Spark's default


@pytest.mark.parametrize(
    ("input_bytes", "said", "settings"),
    [
        (1024, "input at most 0.0 MiB: queries interpreted", ("false", "NO_CODEGEN")),
        (
            GENERATED_CODE_FROM_BYTES,
            "input at most 16.0 MiB: queries compiled",
            ("true", "FALLBACK"),
        ),
        (None, "input of unknown size: queries compiled", ("true", "FALLBACK")),
    ],
)
def test_the_input_size_chooses_interpreted_or_generated_code_and_both_give_the_same_rows(
    restored, input_bytes, said, settings
):
    spark = restored
    assert fit_code_generation(spark, input_bytes) == said
    assert tuple(spark.conf.get(name) for name in CODEGEN) == settings
    # A projection, a filter, an aggregation and a join: every kind of generated class a job uses.
    events = (
        spark.range(1000)
        .select((F.col("id") % 7).alias("ad"), F.col("id").alias("n"))
        .filter("n % 2 = 0")
    )
    ads = spark.range(7).select(F.col("id").alias("ad"), (F.col("id") * 10).alias("campaign"))
    counted = (
        events.join(ads, "ad")
        .groupBy("campaign")
        .agg(F.count("*").alias("events"), F.sum("n").alias("total"))
    )
    expected = {}
    for n in range(0, 1000, 2):
        events_, total = expected.get(n % 7 * 10, (0, 0))
        expected[n % 7 * 10] = (events_ + 1, total + n)
    rows = [(campaign, events_, total) for campaign, (events_, total) in expected.items()]
    assertDataFrameEqual(
        counted, spark.createDataFrame(rows, "campaign long, events long, total long")
    )


def test_an_incremental_run_s_log_says_its_figure_is_what_is_new_upstream(restored):
    # Not "at most": the run also reads the periods the new rows touch (issue 56).
    said = fit_code_generation(restored, 629_146, new_only=True)
    assert said == "input 0.6 MiB new upstream (and the periods it touches): queries interpreted"
