"""The layers and the write kinds a table declares; each kind has its flow in ``lakehouse.flows``."""

from __future__ import annotations

from enum import Enum

# Layers in the order data flows through them; ops holds the pipeline's own records.
LAYERS = ("dims", "bronze", "silver", "gold", "ops")


class Write(str, Enum):  # noqa: UP042 (str() of a member stays its name, as logs print it)
    """How a table's query writes it (each kind has its flow in ``lakehouse.flows``)."""

    OVERWRITE = "overwrite"  # the whole table replaced by each run (a small dimension from a file)
    APPEND = "append"  # new rows appended once per micro-batch (bronze, side outputs)
    # rows with a new key inserted, in the event hours a batch touches
    MERGE_NEW = "insert-only merge"
    # the event hours a batch touches recomputed from upstream and replaced
    REPLACE_HOURS = "replace hours"
    SESSIONS = "sessions"  # a stateful query emits each session once, when the watermark closes it


# The columns each hour-addressed write kind needs: they select and replace whole event hours.
HOUR_LAYOUTS = {
    Write.MERGE_NEW: {"partition_by": ("event_date", "event_hour"), "columns": ("event_time",)},
    Write.REPLACE_HOURS: {"partition_by": ("event_date",), "columns": ("hour_start",)},
}
