"""Benchmarks of the YSB lakehouse (``make bench``); see :mod:`bench.ysb_bench`."""
