# Benchmarks (issue 6): YSB throughput per layer and end to end, incremental vs batch, cost growth,
# fixed overhead, backfill, driver memory, tuning. bench/ysb_bench.py is the command line (its
# docstring has the options), bench/ysb/ does the work; the tasks and tables it runs and reports come
# from the table catalog. Data is generated once into .local/bench/data and reused.
#
#   make bench                                   # the full run, writes BENCHMARKS.md (about 40 minutes on 2 quiet cores)
#   make bench BENCH_ARGS='--sizes 2M,10M'       # other sizes / repetitions / stages
#   make bench-smoke                             # the benchmark code on tiny data (also in `make test`)
#   make bench-driver-start                      # driver JVM options of short runs: section 10 of BENCHMARKS.md
#   make bench-engine                            # DAG runs on the warm engine vs spark-submit: section 11 (about 45 minutes on 2 quiet cores)
#   make bench-compare                           # per-event CPU beside a minimal Spark job, DuckDB and Polars at 1M and 5M events:
#                                                # section 12 (about 25 minutes on 2 quiet cores, 30 with --baseline; the first run also generates 5M events)

BENCH_ARGS ?= --sizes 100k,300k --reps 3 --growth-runs 50 --backfill-eps 2 --tune-growth-runs 3

DRIVER_START_ARGS ?= --reps 3
ENGINE_BENCH_ARGS ?= --reps 3
COMPARE_ARGS ?= --sizes 1M,5M --reps 2

.PHONY: bench bench-smoke bench-driver-start bench-engine bench-compare bench-sessions

bench: setup  ## the benchmarks: BENCHMARKS.md from a full run (BENCH_ARGS to change sizes, repetitions, stages)
	python -m bench.ysb_bench $(BENCH_ARGS) --out $(ROOT)/BENCHMARKS.md

bench-smoke: setup  ## the benchmark's smoke test on tiny data (tests/bench, about two minutes)
	python -m pytest tests/bench -q -ra

bench-driver-start: setup driver-cds  ## CPU and wall time of a pipeline pass per driver JVM option set (BENCHMARKS.md section 10)
	python -m bench.driver_start $(DRIVER_START_ARGS) --out $(ROOT)/BENCHMARKS.md

bench-engine: setup  ## Airflow DAG runs on the warm engine vs spark-submit (BENCHMARKS.md section 11, bench/results/summary.json)
	python -m bench.engine_runs $(ENGINE_BENCH_ARGS) --out $(ROOT)/BENCHMARKS.md --summary $(ROOT)/bench/results/summary.json

bench-compare: setup  ## the project's CPU per event beside a minimal Spark job, DuckDB and Polars (BENCHMARKS.md section 12, summary.json)
	python -m bench.engine_compare $(COMPARE_ARGS) --out $(ROOT)/BENCHMARKS.md --summary $(ROOT)/bench/results/summary.json

bench-sessions: setup  ## the sessions query on hourly runs: cost beside silver, state size, late events (BENCHMARKS.md section 13)
	python -m bench.sessions_runs $(SESSIONS_BENCH_ARGS) --out $(ROOT)/BENCHMARKS.md --summary $(ROOT)/bench/results/summary.json
