"""What the benchmark runs and reports, derived from the table catalog (nothing here names a table).

A task is a table with a query of its own (``catalog.tasks()``): the DAG's task id, the argument
of ``jobs/run.py`` and the key of every per-job figure. Its label in the report is its table's name.
"""

from __future__ import annotations

from lakehouse import catalog
from lakehouse.catalog import Write

# Every task, in DAG order (upstream first): one incremental pass of the pipeline.
PIPELINE = tuple(entry.task for entry in catalog.tasks())
# The tasks whose query is a stream: each hourly run's work, and the layers of the throughput tables.
STREAMED = tuple(entry.task for entry in catalog.tasks() if entry.streamed)
# The tasks that replace their table from a file (a dimension): loaded once before a series of runs.
SNAPSHOTS = tuple(entry.task for entry in catalog.tasks() if not entry.streamed)
# The tasks with a batch form (``--mode batch --start --end``) and those a backfill loads once before.
BATCH = tuple(entry.task for entry in catalog.tasks() if entry.batch)
LOADED_ONCE = tuple(entry.task for entry in catalog.tasks() if not entry.batch)


def label(task: str) -> str:
    """A task's name in the report: its table's (``layer.table``); anything else as it is."""
    return catalog.task(task).name if task in PIPELINE else task


def labels(tasks: tuple[str, ...] | list[str]) -> str:
    """``a, b and c``: the labels of ``tasks`` in a sentence."""
    names = [label(task) for task in tasks]
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


def task_of_query(query_name: str) -> str:
    """The task of a streaming query (a query is named after its table)."""
    for entry in catalog.tasks():
        if query_name in (entry.name, entry.task):
            return entry.task
    return query_name


def sized_tables() -> list[str]:
    """The streamed tasks' own tables: their files and log versions are reported after the hourly runs."""
    return [catalog.task(task).name for task in STREAMED]


def data_tables() -> list[str]:
    """Every table but the pipeline's own records (the ops layer): the snapshots an idle run loads."""
    return [entry.name for entry in catalog.tables() if entry.layer != "ops"]


def merge_table() -> catalog.TableSpec:
    """The table written by insert-only MERGE (silver): the one profiled step by step."""
    return next(entry for entry in catalog.tasks() if entry.write is Write.MERGE_NEW)


def layers_of(tasks: tuple[str, ...] | list[str]) -> list[str]:
    """The layers the tables of ``tasks`` sit in, in the order data flows through them."""
    return sorted({catalog.task(task).layer for task in tasks}, key=catalog.LAYERS.index)


def transform_chain() -> str:
    """The tasks' transforms by layer, ``a → b → c / d``: what the plain batch job applies."""
    by_layer: dict[str, list[str]] = {}
    for entry in catalog.tasks():
        by_layer.setdefault(entry.layer, []).append(f"`{entry.transform.__name__}`")
    return " → ".join(" / ".join(names) for names in by_layer.values())
