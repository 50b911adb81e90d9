"""The YSB lakehouse benchmark (``python -m bench.ysb_bench``, ``make bench``), in parts.

* :mod:`bench.ysb.tasks`: what runs, derived from the table catalog (tasks, labels, tables);
* :mod:`bench.ysb.measuring`: statistics, sizes, peak memory, query progress, timed processes;
* :mod:`bench.ysb.data`: the generated landing data and fresh lakehouses over it;
* :mod:`bench.ysb.worker`: what runs in a measured process: the pipeline's tasks through
  ``lakehouse.runner``, the plain batch baseline, and each measurement of a session;
* :mod:`bench.ysb.overhead`: out-of-process measurements (spark-submit start-up, an idle DAG run);
* :mod:`bench.ysb.benchmark`: every measurement in order, one worker process per configuration;
* :mod:`bench.ysb.figures` and :mod:`bench.ysb.report`: the results as figures and as BENCHMARKS.md.
"""
