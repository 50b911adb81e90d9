"""Benchmarks of the YSB lakehouse: scenarios on one harness (:mod:`bench.harness`), rendered into BENCHMARKS.md by :mod:`bench.render`."""
