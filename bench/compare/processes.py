"""Moved to :mod:`bench.harness`; kept for a scenario written before it (bench/small_hour.py)."""

from bench.harness import become_subreaper, run_tree, tree_cpu  # noqa: F401
