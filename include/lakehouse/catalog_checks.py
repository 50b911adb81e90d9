"""The catalog's checks at import time: a mistake in a declaration fails the import, with what to fix.

The DAG reads the catalog at parse time, so a table that would fail a run late fails here first.
"""

from __future__ import annotations

import re

from lakehouse.columns import json_type
from lakehouse.errors import CatalogError
from lakehouse.write_kinds import FLOWS, LAYERS


def check_declarations(declared: dict) -> None:
    """Fail with what to fix when a declaration (``name -> TableSpec``) is inconsistent."""
    for spec in declared.values():
        where = f"{spec.name} (lakehouse/tables/{spec.task or declared.get(spec.written_by, spec).task}.py)"
        if spec.layer not in LAYERS or not re.fullmatch(r"[a-z]+\.[a-z_]+", spec.name):
            raise CatalogError(
                f"{where}: a table name is <layer>.<table> with layer one of {', '.join(LAYERS)}"
            )
        names = spec.column_names
        for column in spec.columns:
            json_type(column.type)
        declared_columns = (
            *spec.partition_by,
            *spec.lineage,
            *spec.first_by,
            *(c for c in (spec.key, spec.event_time) if c),
        )
        missing = [c for c in declared_columns if c not in names]
        if missing:
            raise CatalogError(
                f"{where}: partition, key, first_by or lineage column(s) {missing} are not in its schema"
            )
        for name in spec.upstream:
            if name not in declared:
                raise CatalogError(
                    f"{where}: upstream table {name!r} is not declared; known: {', '.join(declared)}"
                )
        if spec.written_by is not None:
            writer = declared.get(spec.written_by)
            if writer is None or writer.written_by is not None:
                raise CatalogError(
                    f"{where}: written_by {spec.written_by!r} is not a table with a query of its own"
                )
        elif not spec.upstream and not spec.source and not spec.operation:
            raise CatalogError(f"{where}: a table needs upstream tables or a source")
        spec.flow.check(spec, where)  # its write kind's layout, grain and required declarations
        layout = spec.flow.layout(spec.grain)
        if spec.batch and not spec.flow.periodic:
            kinds = ", ".join(f.kind.value for f in FLOWS.values() if f.periodic)
            raise CatalogError(
                f"{where}: only tables addressed by event period ({kinds}) have a batch form"
            )
        _check_expectations(spec, where, layout)
    _check_shared_tasks(declared)


def _check_shared_tasks(declared: dict) -> None:
    """Tables may share a task only as one query's members: each replaced by period from the same
    upstream tables, each declared in a module of its own."""
    by_task: dict[str, list] = {}
    for spec in declared.values():
        if spec.written_by is None and spec.operation is None:
            by_task.setdefault(spec.task, []).append(spec)
    for task, specs in by_task.items():
        if len(specs) < 2:
            continue
        names = ", ".join(s.name for s in specs)
        modules = [s.transform.__module__ for s in specs if s.transform]
        if len(set(modules)) < len(modules):
            raise CatalogError(
                f"Task {task} declares two tables with queries in one module ({names}): a table's "
                "module is its code (its version); give each table a module of its own"
            )
        kinds = {s.write.value for s in specs}
        upstreams = {s.upstream for s in specs}
        if kinds != {"replace periods"} or len(upstreams) > 1 or not all(s.batch for s in specs):
            raise CatalogError(
                f"Task {task} is shared by {names}: tables share a task only when each is "
                "replaced by period (write=Write.REPLACE_PERIODS, batch=True) from the same "
                "upstream tables, so that one query over their change recomputes them all"
            )


def _check_expectations(spec, where: str, layout: dict | None) -> None:
    rules = [e.rule for e in spec.expectations]
    for rule in spec.expectations:
        rule.bound  # noqa: B018 - raises on a holds= that is not '<op> <number>'
        if rule.on_failure not in ("warn", "fail"):
            raise CatalogError(
                f"{where}: rule {rule.rule!r}: on_failure is 'warn' or 'fail', not {rule.on_failure!r}"
            )
        if rule.per not in ("hour", "batch"):
            raise CatalogError(
                f"{where}: rule {rule.rule!r}: per is 'hour' or 'batch', not {rule.per!r}"
            )
        if rule.per == "hour" and not layout:
            raise CatalogError(
                f"{where}: rule {rule.rule!r} is per hour (per period), but only tables replaced by "
                "period are written by the period"
            )
        if rule.per == "batch" and (
            "batch_id" not in spec.column_names or rule.on_failure != "warn"
        ):
            # A batch is checked once, when it is written; a failure a retry cannot see again cannot gate.
            raise CatalogError(
                f"{where}: rule {rule.rule!r} is per batch: its table needs a batch_id column and it can only warn"
            )
        if rules.count(rule.rule) > 1:
            raise CatalogError(f"{where}: two rules are named {rule.rule!r}")


def upstream_first(declared: dict) -> list[str]:
    """Names ordered so every table comes after its upstream tables and its writer; fails on a cycle."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise CatalogError(
                f"Tables depend on each other in a cycle: {' -> '.join((*path, name))}"
            )
        state[name] = "visiting"
        spec = declared[name]
        for before in (*spec.upstream, *([spec.written_by] if spec.written_by else [])):
            visit(before, (*path, name))
        state[name] = "done"
        order.append(name)

    for name in sorted(
        declared,
        key=lambda n: (LAYERS.index(n.split(".")[0]) if n.split(".")[0] in LAYERS else 99, n),
    ):
        visit(name, ())
    return order
