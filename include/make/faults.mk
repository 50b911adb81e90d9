# Fault injection: SIGKILL the Spark driver of every streaming job (at random moments and at the
# named fault points of include/lakehouse/faults.py), rerun it as an Airflow retry would, and check
# that bronze, silver, the quarantine and gold hold every row exactly once (include/
# lakehouse_tools/fault_injection.py). One trial runs 8 spark-submits: minutes on a 2-core machine.
#   make faults TRIALS=10 FAULTS_ARGS="--seed 7 --report .local/faults/seed7.json"
# A long run can be stopped and continued: the trials already in the report are kept. Reports
# live under .local/faults/ (git-ignored: the 100-trial report is 400 KB of per-trial detail);
# the 100-trial run is continued, or rerun from a clone, with:
#   make faults TRIALS=100 FAULTS_ARGS="--seed 1 --report .local/faults/fault-injection-seed1.json --resume"

TRIALS      ?= 3
FAULTS_ARGS ?=

.PHONY: faults

faults: setup driver-cds  ## fault injection: kill every layer's driver, rerun, check exactly-once (TRIALS=3)
	python -m lakehouse_tools.fault_injection --trials $(TRIALS) $(FAULTS_ARGS)
