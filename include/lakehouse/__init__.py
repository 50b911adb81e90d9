"""The YSB lakehouse: bronze / silver / gold Delta tables for the Yahoo! Streaming Benchmark.

One module per table under ``lakehouse.tables`` holds that table's pure transformations; the
``jobs/`` entry points wire sources, transformations and sinks; ``dags/`` only orchestrates.
"""
