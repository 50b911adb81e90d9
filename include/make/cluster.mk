# The DAG as deployed: a Spark standalone cluster (one master, one worker) and a PostgreSQL
# metadata DB for Airflow, both on 127.0.0.1, run from the venv's pyspark and Debian's postgresql.
#
#   make cluster-start postgres-start pyfiles
#   eval "$(make -s env cluster-env postgres-env)"     # then `airflow db migrate`, `airflow dags test ...`
#   make cluster-stop postgres-stop
#
# include/cluster/spark_standalone.py and include/cluster/local_postgres.py do the work (their
# docstrings describe the folders under .local/spark and .local/postgres); tests/cluster runs the
# same code on free ports. Override a setting on the command line: make cluster-start SPARK_MASTER_PORT=7078

SPARK_CLUSTER_DIR       ?= $(ROOT)/.local/spark
SPARK_MASTER_PORT       ?= 7077
SPARK_MASTER_WEBUI_PORT ?= 8090
SPARK_WORKER_WEBUI_PORT ?= 8091
SPARK_WORKER_CORES      ?= 2
SPARK_WORKER_MEMORY     ?= 3g
POSTGRES_DIR            ?= $(ROOT)/.local/postgres
POSTGRES_PORT           ?= 15432
PYFILES_ZIP             := $(ROOT)/build/lakehouse.zip
PYFILES_SOURCES         := $(shell find include/lakehouse -name __pycache__ -prune -o \( -name '*.py' -o -type d \) -print)

CLUSTER_SCRIPT := SPARK_CLUSTER_DIR='$(SPARK_CLUSTER_DIR)' SPARK_MASTER_PORT='$(SPARK_MASTER_PORT)' \
                  SPARK_MASTER_WEBUI_PORT='$(SPARK_MASTER_WEBUI_PORT)' SPARK_WORKER_WEBUI_PORT='$(SPARK_WORKER_WEBUI_PORT)' \
                  SPARK_WORKER_CORES='$(SPARK_WORKER_CORES)' SPARK_WORKER_MEMORY='$(SPARK_WORKER_MEMORY)' \
                  python $(ROOT)/include/cluster/spark_standalone.py
POSTGRES_SCRIPT := POSTGRES_DIR='$(POSTGRES_DIR)' POSTGRES_PORT='$(POSTGRES_PORT)' \
                   python $(ROOT)/include/cluster/local_postgres.py
CLUSTER_CONN    := {"conn_type": "spark", "host": "spark://127.0.0.1:$(SPARK_MASTER_PORT)"}

# tests/cluster starts its own cluster and server; it needs the server's programs (Airflow's
# PostgreSQL drivers, psycopg2 and asyncpg, are in requirements.txt).
TEST_PREREQS += postgres-install

.PHONY: pyfiles cluster-start cluster-stop cluster-status cluster-env postgres-install \
        postgres-start postgres-stop postgres-status postgres-env demo-cluster

pyfiles: $(PYFILES_ZIP)  ## build/lakehouse.zip: the lakehouse package for spark-submit --py-files
$(PYFILES_ZIP): $(PYFILES_SOURCES) include/cluster/pyfiles.py
	python include/cluster/pyfiles.py $@

cluster-start: venv  ## start a Spark standalone master and worker on 127.0.0.1 (spark://127.0.0.1:7077, UI :8090)
	@$(CLUSTER_SCRIPT) start

cluster-stop:  ## stop the Spark cluster and its executors (SIGTERM, SIGKILL of leftovers after 30 s)
	@$(CLUSTER_SCRIPT) stop

cluster-status:  ## is the Spark cluster running?
	@$(CLUSTER_SCRIPT) status || true

cluster-env: pyfiles  ## print the connection and LAKEHOUSE_PY_FILES for the cluster: eval "$(make -s cluster-env)"
	@printf "export AIRFLOW_CONN_SPARK_LAKEHOUSE='%s'\nexport LAKEHOUSE_PY_FILES='%s'\n" '$(CLUSTER_CONN)' '$(PYFILES_ZIP)'

postgres-install:  ## Debian's postgresql server, apt-get installed if missing (as root; quiet, idempotent)
	@$(APT_LOCK) env $(POSTGRES_SCRIPT) install

postgres-start: postgres-install  ## start PostgreSQL on 127.0.0.1:15432 (data in .local/postgres), database and user airflow
	@$(POSTGRES_SCRIPT) start

postgres-stop:  ## stop PostgreSQL (fast shutdown; immediate, then SIGKILL, if it hangs)
	@$(POSTGRES_SCRIPT) stop

postgres-status:  ## is PostgreSQL running?
	@$(POSTGRES_SCRIPT) status || true

postgres-env:  ## print AIRFLOW__DATABASE__SQL_ALCHEMY_CONN for it: eval "$(make -s postgres-env)"
	@url=$$($(POSTGRES_SCRIPT) url) && printf "export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN='%s'\n" "$$url"
	@echo "unset AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS  # SQLite's lock timeout: psycopg2 rejects it"

# The demo with its own Airflow home and lakehouse, so that it neither reuses nor disturbs those of
# `make demo`. `airflow db migrate` runs every time: a no-op on a migrated database, and the
# database is new whenever .local/postgres was deleted. Both servers are left running.
demo-cluster: setup pyfiles cluster-start postgres-start  ## the demo on the Spark cluster, Airflow on PostgreSQL
	@url=$$($(POSTGRES_SCRIPT) url) && \
	export AIRFLOW_HOME='$(ROOT)/.local/airflow-postgres' LAKEHOUSE_ROOT='$(ROOT)/.local/lakehouse-cluster' \
	    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="$$url" AIRFLOW_CONN_SPARK_LAKEHOUSE='$(CLUSTER_CONN)' \
	    LAKEHOUSE_PY_FILES='$(PYFILES_ZIP)' && \
	unset AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS && \
	mkdir -p "$$AIRFLOW_HOME" && \
	{ airflow db migrate > "$$AIRFLOW_HOME/db-migrate.log" 2>&1 || { tail -30 "$$AIRFLOW_HOME/db-migrate.log"; exit 1; }; } && \
	python -m lakehouse_tools.demo
	@echo "Spark master UI: http://127.0.0.1:$(SPARK_MASTER_WEBUI_PORT)  (stop both: make cluster-stop postgres-stop)"
