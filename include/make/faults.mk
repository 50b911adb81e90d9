# Fault injection: SIGKILL the Spark driver of every streaming job (at random moments and at the
# named fault points of include/lakehouse/faults.py), rerun it as an Airflow retry would, and check
# that bronze, silver, the quarantine and gold hold every row exactly once (the package
# include/lakehouse_tools/fault_harness/). One trial runs 8 spark-submits: minutes on a 2-core machine.
#   make faults TRIALS=10 FAULTS_ARGS="--seed 7 --report .local/faults/seed7.json"
# A long run can be stopped and continued: the trials already in the report are kept. Reports
# live under .local/faults/ (git-ignored: the 100-trial report is 400 KB of per-trial detail);
# the 100-trial run is continued, or rerun from a clone, with:
#   make faults TRIALS=100 FAULTS_ARGS="--seed 1 --report .local/faults/fault-injection-seed1.json --resume"
# FAULTS_ENGINE=connect runs every job as a client of a warm engine instead (the harness starts its
# own on a free port, under the work folder, and stops it at the end): the client or the engine's
# server is killed. Its 100-trial run spanned sessions (a stable --workdir keeps the engine's folder
# and log in one place; its report, in git, is the README's figure); a run on another seed the same way:
#   make faults TRIALS=100 FAULTS_ENGINE=connect FAULTS_ARGS="--seed 2 \
#       --report bench/results/fault-injection-connect-seed2.json --workdir .local/faults/connect-seed2.work --resume"

TRIALS        ?= 3
FAULTS_ENGINE ?= spark-submit
FAULTS_ARGS   ?=

.PHONY: faults

# The harness needs the packages and the jars (no Airflow DB); the drivers' class-data-sharing archive
# serves spark-submit mode only (engine clients start no JVM).
faults: venv jars $(if $(filter connect,$(FAULTS_ENGINE)),,driver-cds)  ## fault injection: kill every layer's driver, rerun, check exactly-once (TRIALS=3, FAULTS_ENGINE=connect)
	python -m lakehouse_tools.fault_harness --engine $(FAULTS_ENGINE) --trials $(TRIALS) $(FAULTS_ARGS)
