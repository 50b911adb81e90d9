"""The fault harness: SIGKILL the Spark driver of every layer, rerun it, and prove nothing was lost or doubled.

Usage (the command is :mod:`~lakehouse_tools.fault_harness.cli`; ``make faults`` runs it):
    python -m lakehouse_tools.fault_harness --trials 3 --seed 1 [--engine spark-submit|connect]

Each trial runs the whole pipeline on fresh data as the DAG would, every streaming job as a real
``spark-submit`` (local[2]) or, with ``--engine connect``, as a client of a warm engine of the
harness's own. Each job is killed once (at a random moment, or at a named fault point of
:mod:`lakehouse.faults` such as ``silver.after_merge``: after silver's Delta commit and before the
checkpoint's) and run again until it exits 0, as an Airflow task retry would. Successive trials
rotate through each job's kill modes from a seeded start, so N trials cover every mode about
N / modes times. Then every table is compared with the landing files and the plain-Python oracle.

Modules, in the order a run uses them:

* ``plan``: the pipeline's stages and each job's kill plan, a function of the seed alone.
* ``launch``: a job's command and environment, started in a process group of its own, and killed.
* ``harness_engine``: connect mode's own engine (started on a free port, killed, awaited, stopped).
* ``checkpoint_state``: where a query stood when it died (read from its checkpoint and tables).
* ``attempt``: one run of a job, killed as planned; the learned batch durations.
* ``trials``: one kill trial (data, kills, reruns, check).
* ``verdict``: every row exactly once, against the landing files and the oracle.
* ``checkpoint_trials``: damaged checkpoints, their refusal and the recovery they print.
* ``report``: the totals, the printed lines and the JSON report (``--report``, ``--resume``).
* ``cli``: the options, the run, the exit status.
"""
