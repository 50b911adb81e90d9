# Benchmarks. Each one saves what it measured in bench/results/<benchmark>.json (and its keys of
# bench/results/summary.json); BENCHMARKS.md is rendered from those files alone by one command:
#
#   make benchmarks-md                           # BENCHMARKS.md from bench/results/ (seconds: renders, measures nothing)
#
# The benchmarks (each renders BENCHMARKS.md when it ends; the times are for 2 quiet cores):
#
#   make bench-compare                           # per-event CPU beside a minimal Spark job, DuckDB and Polars at 1M and
#                                                # 5M events, every catalog table counted (about 30 minutes; the first
#                                                # run also generates 5M events)
#   make bench-engine                            # DAG runs on the warm engine vs spark-submit (about 45 minutes)
#   make bench-sessions                          # the sessions query on hourly runs
#   make bench-sessions-compare                  # the sessions task beside Spark's session_window, 1M events (about 15 minutes)
#   make bench-reconcile                         # the sessions' reconcile of 100,000 late events (minutes)
#   make bench-codegen                           # small runs with queries interpreted vs compiled (about 15 minutes)
#   make bench-jit                               # the engine's JIT thresholds: HotSpot's vs ten times them (about 25 minutes)
#   make bench-ops-records                       # ops records appended by Spark vs delta-rs (minutes)
#   make bench-driver-start                      # driver JVM options of short runs
#   make bench-storage                           # the hourly run on S3 (a private local server) beside local disk,
#                                                # demo-sized and 1M events, S3 requests by kind (about 15 minutes)
#   make bench                                   # YSB throughput per layer, incremental vs batch, growth, overhead (about 40 minutes)
#   make bench BENCH_ARGS='--sizes 2M,10M'       # other sizes / repetitions / stages
#   make bench-lineage                           # OpenLineage off/on/in a thread on runs with nothing new (minutes)
#   make bench-history                          # bronze's Python checks after 36 vs 35,040 landed files,
#                                                # before and now; records and log growth per run (minutes)
#   make bench-smoke                             # the benchmark code on tiny data (tests/bench)
#
# bench.engine_runs builds its Airflow homes with the tests' tests/airflow_env.py and
# bench.sessions_runs takes the tests' Spark settings (tests/conftest.py): tests/ is on the
# benchmarks' PYTHONPATH (pytest has it from pyproject.toml), so no bench module changes its import path.

BENCH_ARGS ?= --sizes 100k,300k --reps 3 --growth-runs 50 --backfill-eps 2 --tune-growth-runs 3

DRIVER_START_ARGS ?= --reps 3
ENGINE_BENCH_ARGS ?= --reps 3
COMPARE_ARGS ?= --sizes 1M,5M --reps 2
CODEGEN_ARGS ?= --reps 2 --hours 3
OPS_RECORDS_ARGS ?= --reps 4 --appends 20
JIT_ARGS ?= --reps 2 --hours 3 --large-events 1000000

BENCH_OUT := --out $(ROOT)/BENCHMARKS.md --summary $(ROOT)/bench/results/summary.json
BENCH_TARGETS := bench bench-smoke bench-driver-start bench-engine bench-compare bench-sessions bench-sessions-compare bench-reconcile \
                 bench-codegen bench-jit bench-ops-records bench-storage bench-lineage bench-history benchmarks-md

.PHONY: $(BENCH_TARGETS)

$(BENCH_TARGETS): export PYTHONPATH := $(ROOT)/tests:$(PYTHONPATH)

benchmarks-md: venv  ## BENCHMARKS.md from the results files in bench/results/ (renders only; reruns nothing)
	python -m bench.render --results $(ROOT)/bench/results --out $(ROOT)/BENCHMARKS.md

bench: setup  ## the YSB benchmarks (BENCH_ARGS to change sizes, repetitions, stages), then BENCHMARKS.md
	python -m bench.ysb_bench $(BENCH_ARGS) --out $(ROOT)/BENCHMARKS.md

bench-smoke: setup  ## the benchmark's smoke test on tiny data (tests/bench, about two minutes)
	python -m pytest tests/bench -q -ra

bench-driver-start: setup driver-cds  ## CPU and wall time of a pipeline pass per driver JVM option set
	python -m bench.driver_start $(DRIVER_START_ARGS) --out $(ROOT)/BENCHMARKS.md

bench-engine: setup  ## Airflow DAG runs on the warm engine vs spark-submit (bench/results/engine_runs.json)
	python -m bench.engine_runs $(ENGINE_BENCH_ARGS) $(BENCH_OUT)

bench-compare: setup  ## the project's CPU per event beside a minimal Spark job, DuckDB and Polars, every table
	python -m bench.engine_compare $(COMPARE_ARGS) $(BENCH_OUT)

bench-sessions: setup  ## the sessions query on hourly runs: cost beside silver, state size, late events
	python -m bench.sessions_runs $(SESSIONS_BENCH_ARGS) $(BENCH_OUT)

bench-reconcile: setup  ## the sessions' reconcile of 100,000 pending late events, CPU-s (issue 56)
	python -m bench.reconcile_late $(BENCH_OUT)

bench-codegen: setup  ## small runs on the warm engine: queries interpreted (the jobs' choice) vs compiled
	python -m bench.code_generation $(CODEGEN_ARGS) --out $(ROOT)/BENCHMARKS.md

bench-jit: setup  ## the engine's JIT thresholds: HotSpot's defaults vs ten times them, small hours and 1M events
	python -m bench.engine_jit $(JIT_ARGS) --out $(ROOT)/BENCHMARKS.md

bench-ops-records: setup  ## ops records appended by Spark on the engine vs by delta-rs
	python -m bench.ops_records $(OPS_RECORDS_ARGS) --out $(ROOT)/BENCHMARKS.md

SESSIONS_COMPARE_ARGS ?= --events 1M
bench-sessions-compare: setup  ## the sessions task beside Spark's own session_window on the same silver, CPU-s (issue 39; --baseline REV for a before/after)
	python -m bench.sessions_compare $(SESSIONS_COMPARE_ARGS) --results $(ROOT)/bench/results/sessions-compare.json

STORAGE_COMPARE_ARGS ?= --sizes demo,1M --reps 1
bench-storage: setup s3-gateway s3-jars  ## the whole hourly run on S3 (a private server and engine) beside local disk, CPU-s and S3 requests
	python -m bench.storage_compare $(STORAGE_COMPARE_ARGS) $(BENCH_OUT)

LINEAGE_BENCH_ARGS ?= --reps 3
bench-lineage: setup lineage-jars  ## OpenLineage's cost on hourly runs with nothing new: off, on, on in a thread
	python -m bench.lineage_overhead $(LINEAGE_BENCH_ARGS) $(BENCH_OUT)

HISTORY_BENCH_ARGS ?= --hours 9,8760 --baseline 07870b4
bench-history: setup  ## bronze's Python checks per run after a short and a year-long landing history, before and now
	python -m bench.landing_history $(HISTORY_BENCH_ARGS) $(BENCH_OUT)
