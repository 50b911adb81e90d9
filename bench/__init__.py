"""Benchmarks of the YSB lakehouse: scenarios on one harness, rendered into BENCHMARKS.md.

- :mod:`bench.harness`: the progress line, repetitions and medians, the process-tree CPU timer, an
  engine of a scenario's own on a free port, the results files (``bench/results/<scenario>.json``
  and the scenario's keys of the shared ``bench/results/summary.json``);
- :mod:`bench.render` (``make benchmarks-md``): BENCHMARKS.md from ``bench/BENCHMARKS.md.template``
  and the results files, rerunning nothing;
- :mod:`bench.data`: generated landing data and fresh lakehouses over it;
- the scenarios, each ``python -m bench.<name>`` with its ``make bench-*`` target: the whole
  pipeline against lean plain Spark and Polars (:mod:`bench.engine_compare`, contenders in
  :mod:`bench.compare`), the sessions on hourly runs (:mod:`bench.sessions_runs`) and beside
  Spark's ``session_window`` (:mod:`bench.sessions_compare`), the late events' reconcile and a
  catch-up (:mod:`bench.reconcile_late`), a small hour's fixed cost (:mod:`bench.small_hour`) and
  the same hour after a year of history (:mod:`bench.history`).

A new scenario ``bench/<name>.py`` measures with the harness, then saves its figures:
``harness.save_results("<name>", figures={...}, title="...", command="make bench-<name>")``
(or, with a ``render(results) -> str`` of its own, ``results=...``). ``make benchmarks-md`` then
renders its section with no other edit: at the template's ``{{other scenarios}}``, or where a
line ``{{scenario <name> | <command>}}`` in the template puts it.
"""
