"""One module per task: the table it writes declared with its pure ``DataFrame -> DataFrame`` transform.

Every function here is shared by the incremental (streaming) and the batch (backfill) runs; none
writes, collects, counts or starts a query. The catalog imports every module here, and the DAG
imports the catalog at parse time, so these modules import no Spark at module level: ``F`` is
``pyspark.sql.functions``, imported on first use.
"""

from __future__ import annotations

import importlib


class _LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str):
        return getattr(importlib.import_module(self._name), attribute)


F = _LazyModule("pyspark.sql.functions")
