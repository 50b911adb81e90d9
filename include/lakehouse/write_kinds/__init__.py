"""The write kinds: one :class:`Flow` per kind, one module each, registered here by direct import.

``flow_of(Write.REPLACE_PERIODS)`` (or ``spec.flow``) is the object the runner, the catalog's checks,
the Airflow assets, recompute and status ask what a table's writes mean.
"""

from __future__ import annotations

from lakehouse.write_kinds.append import Append
from lakehouse.write_kinds.base import LAYERS, Flow, Layout, Write
from lakehouse.write_kinds.merge_new import MergeNew
from lakehouse.write_kinds.overwrite import Overwrite
from lakehouse.write_kinds.replace_periods import ReplacePeriods
from lakehouse.write_kinds.sessions import Sessions

__all__ = ["FLOWS", "LAYERS", "Flow", "Layout", "Write", "flow_of"]

FLOWS: dict[Write, Flow] = {
    flow.kind: flow for flow in (Overwrite(), Append(), MergeNew(), ReplacePeriods(), Sessions())
}


def flow_of(kind: Write) -> Flow:
    """The flow that writes tables of ``kind``."""
    return FLOWS[kind]
