# Benchmarks: scenarios on one harness (bench/harness.py). Each saves what it measured in
# bench/results/<scenario>.json (and its keys of bench/results/summary.json); BENCHMARKS.md is
# rendered from bench/BENCHMARKS.md.template and those files alone by one command:
#
#   make benchmarks-md                           # BENCHMARKS.md from bench/results/ (seconds: renders, measures nothing)
#
# The scenarios (each renders BENCHMARKS.md when it ends; the times are for 2 quiet cores):
#
#   make bench-compare                           # per-event CPU beside a lean plain-Spark job and Polars at 1M and 5M
#                                                # events, every catalog table counted (about 30 minutes; the first
#                                                # run also generates 5M events)
#   make bench-sessions                          # the sessions query on hourly runs
#   make bench-sessions-compare                  # the sessions task beside Spark's session_window, 1M events (about 15 minutes)
#   make bench-reconcile                         # the sessions' reconcile of 100,000 late events (minutes)
#   make bench-history                           # a small hour after a year of history vs on a fresh lakehouse,
#                                                # and what each run adds to logs and checkpoints (the first run
#                                                # catches a year up: about an hour; later runs reuse it)
#   make bench-small-hour                        # every task's CPU for a 2,000-event hour, and a no-data run with late
#                                                # events pending, task by task and as a DAG run (about 15 minutes)
#   make bench-smoke                             # the comparison on tiny data (tests/bench)
#
# A new scenario (bench/<name>.py) needs no line here to be rendered: its results file is enough
# (bench/__init__.py); a make target for it is one more line below.
#
# The harness's local driver takes the tests' Spark settings (tests/conftest.py): tests/ is on the
# benchmarks' PYTHONPATH (pytest has it from pyproject.toml), so no bench module changes its import path.

COMPARE_ARGS ?= --sizes 1M,5M --reps 2

BENCH_OUT := --out $(ROOT)/BENCHMARKS.md --summary $(ROOT)/bench/results/summary.json
BENCH_TARGETS := bench-smoke bench-compare bench-sessions bench-sessions-compare bench-reconcile \
                 bench-history bench-small-hour benchmarks-md

.PHONY: $(BENCH_TARGETS)

$(BENCH_TARGETS): export PYTHONPATH := $(ROOT)/tests:$(PYTHONPATH)

benchmarks-md: venv  ## BENCHMARKS.md from the results files in bench/results/ (renders only; reruns nothing)
	python -m bench.render --results $(ROOT)/bench/results --out $(ROOT)/BENCHMARKS.md

bench-smoke: setup  ## the comparison's test on tiny data (tests/bench, minutes)
	python -m pytest tests/bench -q -ra

bench-compare: setup  ## the project's CPU per event beside a minimal Spark job and Polars, every table
	python -m bench.engine_compare $(COMPARE_ARGS) $(BENCH_OUT)

bench-sessions: setup  ## the sessions query on hourly runs: cost beside silver, state size, late events
	python -m bench.sessions_runs $(SESSIONS_BENCH_ARGS) $(BENCH_OUT)

bench-reconcile: setup  ## the sessions' reconcile of 100,000 pending late events, CPU-s (issue 56)
	python -m bench.reconcile_late $(BENCH_OUT)

SESSIONS_COMPARE_ARGS ?= --events 1M
bench-sessions-compare: setup  ## the sessions task beside Spark's own session_window on the same silver, CPU-s (issue 39; --baseline REV for a before/after)
	python -m bench.sessions_compare $(SESSIONS_COMPARE_ARGS) $(BENCH_OUT)

HISTORY_BENCH_ARGS ?= --history-hours 8760 --reps 4
bench-history: setup  ## a small hour after a year of history against a fresh lakehouse; artefacts' growth per run (issue 56)
	python -m bench.history $(HISTORY_BENCH_ARGS) $(BENCH_OUT)

SMALL_HOUR_ARGS ?=
bench-small-hour: setup  ## every task's CPU for one ~2,000-event hour and a no-data run with late events pending (issue 60)
	python -m bench.small_hour $(SMALL_HOUR_ARGS) $(BENCH_OUT)
