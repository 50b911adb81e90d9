"""The safety net of a micro-batch that fails on its data: the failing lines, found and quarantined.

Classification is written so that no line can make it fail (``try_`` forms only). If one still
does (a new expression, an engine change), the batch would fail on every retry and stop the
pipeline. Instead, the batch's lines are bisected by a hash of (source, line) until each line that
makes the transform fail stands alone; those lines are quarantined as ``processing_error`` with the
error, and the rest are classified as usual, in the same micro-batch, so exactly-once holds.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.runtime import log

PROCESSING_ERROR = "processing_error"
# A reason detail is for a person: the error's first line (its condition and message).
MAX_DETAIL_CHARS = 500
_KEY = "_containment_key"


def is_data_error(error: BaseException) -> bool:
    """An error raised by evaluating an expression on a value (SQLSTATE class 22, "data exception")."""
    return isinstance(error, PySparkException) and (error.getSqlState() or "").startswith("22")


def _fails(transform: Callable[[DataFrame], DataFrame], rows: DataFrame) -> str | None:
    """The data error ``transform`` raises on ``rows``, None when it runs through."""
    try:
        transform(rows).write.format("noop").mode("overwrite").save()
    except Exception as error:
        if not is_data_error(error):
            raise
        return str(error).strip().splitlines()[0][:MAX_DETAIL_CHARS]
    return None


def failing_keys(rows: DataFrame, transform: Callable[[DataFrame], DataFrame]) -> dict[int, str]:
    """The keys of the lines on which ``transform`` fails on its own, with the error of each.

    Bisection over the key range: a range that runs through is done; a failing range of one
    distinct key is a culprit; otherwise both halves of the keys it holds are tried. Two Spark jobs
    per failing range, about log2(lines) ranges per culprit, over the cached batch: cheap for the
    rare batch that needs it.
    """
    culprits: dict[int, str] = {}
    pending = [rows]
    while pending:
        part = pending.pop()
        error = _fails(transform, part)
        if error is None:
            continue
        low, high = part.agg(F.min(_KEY), F.max(_KEY)).collect()[0]
        if low == high:
            culprits[low] = error
            continue
        middle = low + (high - low) // 2
        pending += [
            rows.filter(F.col(_KEY).between(low, middle)),
            rows.filter(F.col(_KEY).between(middle + 1, high)),
        ]
    return culprits


def contained(
    rows: DataFrame,
    transform: Callable[[DataFrame], DataFrame],
    quarantined: Callable[[DataFrame, str], DataFrame],
) -> DataFrame:
    """``transform`` over the lines it can take, beside ``quarantined`` rows for the lines it cannot.

    ``rows`` are the batch's upstream lines; ``quarantined(lines, detail)`` gives the transform's
    output columns for failing lines with reason ``processing_error``. Nothing is dropped.
    """
    keyed = rows.withColumn(_KEY, F.xxhash64("source_file", "raw_line")).persist()
    try:
        culprits = failing_keys(keyed, lambda part: transform(part.drop(_KEY)))
        log.warning(
            "%d line(s) made the batch fail; quarantined as %s", len(culprits), PROCESSING_ERROR
        )
        good = transform(keyed.filter(~F.col(_KEY).isin(list(culprits))).drop(_KEY))
        bad = [
            quarantined(keyed.filter(F.col(_KEY) == key).drop(_KEY), detail).select(*good.columns)
            for key, detail in culprits.items()
        ]
        result = good
        for part in bad:
            result = result.unionByName(part)
        return result.localCheckpoint()  # the caller caches it; the bisection's cache can go
    finally:
        keyed.unpersist()
