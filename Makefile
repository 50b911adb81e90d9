# The YSB lakehouse: one Makefile installs everything a fresh machine needs (venv, pinned Python
# packages, Spark jars, an Airflow metadata DB) and runs the demo, the tests and the benchmarks.
# Stamps make a second run skip what is already there: nothing is downloaded twice.

SHELL := /bin/bash
.DEFAULT_GOAL := help

ROOT        := $(abspath .)
PYTHON      ?= python3.11
VENV        := $(ROOT)/.venv
JARS_DIR    := $(ROOT)/.jars

# Maven Central only (include/jars/settings.xml). One Maven and one apt-get at a time: `make test`
# builds its prerequisites two at a time, and two Mavens filling ~/.m2 at once, or two apt-gets
# (dpkg's lock), can fail each other. .local/ exists from here on (the engine token below).
MVN         := flock $(ROOT)/.local/mvn.lock mvn --batch-mode --quiet -s $(ROOT)/include/jars/settings.xml
APT_LOCK    := flock $(ROOT)/.local/apt.lock

# One environment for every command below; `make env` prints it for a shell (the exported names
# are read from the export lines of this file and include/make/*.mk, so the list is never restated).
ENV_VARS = $(shell sed -n 's/^export \([A-Z_0-9]*\).*/\1/p' $(MAKEFILE_LIST) | sort -u)
export AIRFLOW_HOME                    ?= $(ROOT)/airflow_home
export LAKEHOUSE_ROOT                  ?= $(ROOT)/lakehouse_data
export LAKEHOUSE_JARS_DIR              := $(JARS_DIR)
export PYTHONPATH                      := $(ROOT)/include$(if $(PYTHONPATH),:$(PYTHONPATH))
export PATH                            := $(VENV)/bin:$(PATH)
export SPARK_LOCAL_IP                  := 127.0.0.1
export PYSPARK_PYTHON                  := $(VENV)/bin/python
export AIRFLOW__CORE__DAGS_FOLDER      := $(ROOT)/dags
export AIRFLOW__CORE__LOAD_EXAMPLES    := False
export AIRFLOW__CORE__EXECUTOR         ?= LocalExecutor
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION := False
# A scheduler loop that found nothing to do sleeps this long (Airflow's default: 1 s), and each step
# of a DAG run (a task ending, its successors queued) waits for the next loop: 0.2 s takes seconds
# off a small hourly run for about 5 % of a core while idle (BENCHMARKS.md section 11).
export AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME ?= 0.2
# With lineage on (docs/lineage.md), the OpenLineage provider emits a task's events in a thread
# instead of a forked process: under a second a DAG run instead of about 2.5 (BENCHMARKS.md: OpenLineage on a run with nothing new).
export AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD ?= True
# SQLite (the embedded default) fails writers after 5 s of lock wait; see include/lakehouse_tools/airflow_sqlite.py.
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS ?= lakehouse_tools.airflow_sqlite.CONNECT_ARGS
# The warm engine (a Spark Connect server, make engine-up) runs every job by default; its token is
# made once per clone (.local/engine/token). LAKEHOUSE_ENGINE=local gives each job its own driver.
ENGINE_TOKEN := $(shell mkdir -p .local/engine && (test -s .local/engine/token || \
                  od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > .local/engine/token) && cat .local/engine/token)
export LAKEHOUSE_ENGINE                ?= connect
export LAKEHOUSE_ENGINE_PORT           ?= 15002
export LAKEHOUSE_ENGINE_TOKEN          ?= $(ENGINE_TOKEN)
# Airflow's Spark tasks run as clients of the engine (a spark_connect connection; the token is its
# password). A {"conn_type": "spark", "host": "local[2]" or "spark://HOST:7077"} connection makes them
# spark-submit instead (the JSON form: a URI such as spark://local[2] makes the provider fall back to yarn).
export AIRFLOW_CONN_SPARK_LAKEHOUSE    ?= {"conn_type": "spark_connect", "host": "localhost", "port": $(LAKEHOUSE_ENGINE_PORT), "password": "$(LAKEHOUSE_ENGINE_TOKEN)"}

# Each optional component (Kafka, the Spark cluster, Postgres, compose checks, benchmarks) keeps
# its targets in a file of its own; one may add to TEST_PREREQS what the test suite needs (the
# fault-injection tests start their drivers with the driver-cds archive).
TEST_PREREQS := driver-cds
# Named before the includes: a component's file may add prerequisites to it (the metastore's).
DRIVER_CDS := $(JARS_DIR)/spark-driver.jsa
-include include/make/*.mk

.PHONY: help setup venv lint format jars driver-cds airflow-db demo test test-fast env airflow-ui lock clean clean-data \
        engine-up engine-down engine-status test-long

help:  ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# The drivers' class-data archive too: spark-submit tasks (a `spark` connection) start with it.
setup: venv jars driver-cds airflow-db  ## venv + pinned packages + Spark jars + drivers' archive + Airflow DB

venv: $(VENV)/.installed  ## the virtualenv: requirements.txt under constraints.txt, then this project (editable)
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt -c constraints.txt
	@# The project itself (pyproject.toml): importable everywhere, and the `lakehouse` command.
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

lint: venv  ## ruff: the formatter's check and the linter (rules in pyproject.toml)
	ruff format --check .
	ruff check .

format: venv  ## ruff: format the code and apply the linter's safe fixes
	ruff format .
	ruff check --fix .

jars: $(JARS_DIR)/.fetched  ## Delta (and Kafka) jars from Maven Central, cached in .jars/
$(JARS_DIR)/.fetched: include/jars/pom.xml include/jars/settings.xml
	$(MVN) -f include/jars/pom.xml \
	    dependency:copy-dependencies -DoutputDirectory=$(JARS_DIR) -DexcludeTransitive=true
	touch $@

# A class-data-sharing archive of what a driver loads, written by one JVM that runs a job of each
# write kind (include/lakehouse_tools/jvm_warmup.py); lakehouse.spark.fast_start_java_options()
# maps it. Rebuilt when the jars or the packages change; a stale one is ignored by the JVM, never
# an error. Its driver takes every jar in .jars/: it waits for all of them (a component adds its
# own, kafka.mk).
driver-cds: $(DRIVER_CDS)  ## class-data-sharing archive for fast driver start-up
$(DRIVER_CDS): $(VENV)/.installed $(JARS_DIR)/.fetched include/lakehouse_tools/jvm_warmup.py | jars
	rm -f $@
	spark-submit --master 'local[2]' --jars "$$(ls $(JARS_DIR)/*.jar | paste -sd,)" \
	    --conf spark.ui.enabled=false --conf spark.sql.shuffle.partitions=2 \
	    --driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ArchiveClassesAtExit=$@" \
	    include/lakehouse_tools/jvm_warmup.py > $(JARS_DIR)/driver-cds.log 2>&1 || (tail -30 $(JARS_DIR)/driver-cds.log; exit 1)
	@# -Xshare:on fails, rather than skips, an archive this JVM and classpath cannot map.
	spark-submit --driver-java-options "-Xshare:on -XX:SharedArchiveFile=$@" --version > /dev/null 2>&1 \
	    || (rm -f $@; echo "the archive does not map: see $(JARS_DIR)/driver-cds.log"; exit 1)

engine-up: venv jars  ## start the warm engine (Spark Connect on 127.0.0.1:$LAKEHOUSE_ENGINE_PORT), unless it runs
	python -m lakehouse_tools.engine up

engine-down:  ## stop the warm engine (its process group)
	python -m lakehouse_tools.engine down

engine-status:  ## does the warm engine answer? (exit 1 if not)
	python -m lakehouse_tools.engine status

airflow-db: $(AIRFLOW_HOME)/.migrated  ## the embedded SQLite metadata DB
$(AIRFLOW_HOME)/.migrated: $(VENV)/.installed
	mkdir -p $(AIRFLOW_HOME)
	airflow db migrate > $(AIRFLOW_HOME)/db-migrate.log 2>&1 || (tail -30 $(AIRFLOW_HOME)/db-migrate.log; exit 1)
	touch $@

demo: setup engine-up  ## generate sample data, run the hourly DAG through Airflow on the warm engine, print the gold tables
	python -m lakehouse_tools.demo

# The suite CI runs: every folder under tests/ (how long, and where the time goes: docs/tests.md).
TEST_PATHS ?= tests

# A hung test fails after TEST_TIMEOUT seconds instead of eating CI's budget (the slowest, the
# real-scheduler backfill, has taken 18 minutes on a loaded machine).
TEST_TIMEOUT ?= 2700

test-fast: venv jars  ## the unit tier only: transforms, catalog, DAG parsing (no Go, Postgres, Kafka; a few minutes)
	python -m pytest -m unit tests -q --durations=5 --timeout=600 $(PYTEST_ARGS)

# Every test's seconds (setup + call + teardown) of the last `make test`: where the suite's time goes.
TEST_REPORT ?= .local/test-report.xml

# Test workers (pytest-xdist): one alone leaves the cores idle while it waits on a scheduler or a JVM's
# start. Each worker takes whole test files (a file's tests share their servers) and starts its own
# engine, which the worker's tests also read through. TEST_WORKERS=0 runs every test in one process;
# three workers were slower than two (docs/tests.md, "How long").
TEST_WORKERS ?= 2
TEST_PARALLEL := $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# What the suite needs, two steps at a time: the drivers' archive, the longest, beside the rest.
# Each step's output comes whole when it ends.
TEST_SETUP = $(MAKE) --no-print-directory --jobs=2 --output-sync=target setup $(TEST_PREREQS)

test:  ## the test suite (what CI runs), without the tests marked long
	@$(TEST_SETUP)
	python -m pytest $(or $(PYTEST_ARGS),$(TEST_PATHS) -m "not long" $(TEST_PARALLEL) -ra --durations=15 --timeout=$(TEST_TIMEOUT) --junitxml=$(TEST_REPORT))

test-long:  ## the tests marked long: many-minute variants of what `make test` covers
	@$(TEST_SETUP)
	python -m pytest $(TEST_PATHS) -m long -ra --durations=15 --timeout=$(TEST_TIMEOUT)

env:  ## print the environment, e.g. eval "$$(make -s env)"
	@for v in $(ENV_VARS); do printf "export %s='%s'\n" "$$v" "$${!v}"; done

airflow-ui: setup engine-up  ## the Airflow UI on http://127.0.0.1:8080, or PORT=8081 (Ctrl-C stops every component)
	PORT="$(PORT)" include/scripts/airflow_ui.sh

lock:  ## re-resolve constraints.txt from requirements.txt
	rm -rf $(ROOT)/.venv-lock && $(PYTHON) -m venv $(ROOT)/.venv-lock
	$(ROOT)/.venv-lock/bin/pip install --quiet -r requirements.txt
	$(ROOT)/.venv-lock/bin/pip freeze --exclude-editable > constraints.txt
	rm -rf $(ROOT)/.venv-lock

clean-data:  ## delete generated data, tables and checkpoints
	rm -rf $(LAKEHOUSE_ROOT)

clean: clean-data  ## also delete the venv, jars and Airflow home
	rm -rf $(VENV) $(JARS_DIR) $(AIRFLOW_HOME)
