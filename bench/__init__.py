"""Benchmarks of the YSB lakehouse (``make bench``): :mod:`bench.ysb_bench` (its parts in :mod:`bench.ysb`) and :mod:`bench.driver_start`."""
