# Fault injection: SIGKILL the Spark driver of every streaming job (at random moments and at the
# named fault points of include/lakehouse/faults.py), rerun it as an Airflow retry would, and check
# that bronze, silver, the quarantine and gold hold every row exactly once (the package
# include/lakehouse_tools/fault_harness/). One trial runs 8 spark-submits: minutes on a 2-core machine.
#   make faults TRIALS=10 FAULTS_ARGS="--seed 7"
# The report (every trial's detail and the totals, JSON) goes to FAULTS_REPORT, by default
# .local/faults/<engine>.json: git-ignored, as a 100-trial report is 0.3-0.8 MB; its command is
# what to keep. A long run can be stopped and continued: --resume keeps the trials already in the
# report (same seed and data options), e.g. a 100-trial run:
#   make faults TRIALS=100 FAULTS_REPORT=.local/faults/seed1.json FAULTS_ARGS="--seed 1 --resume"
# FAULTS_ENGINE=connect runs every job as a client of a warm engine instead (the harness starts its
# own on a free port, under the work folder, and stops it at the end): the client or the engine's
# server is killed. Its 100-trial runs (seeds 1 and 2) spanned sessions, so a stable --workdir
# keeps the engine's folder and log in one place:
#   make faults TRIALS=100 FAULTS_ENGINE=connect FAULTS_REPORT=.local/faults/connect-seed2.json \
#       FAULTS_ARGS="--seed 2 --workdir .local/faults/connect-seed2.work --resume"

TRIALS        ?= 3
FAULTS_ENGINE ?= spark-submit
FAULTS_REPORT ?= .local/faults/$(FAULTS_ENGINE).json
FAULTS_ARGS   ?=

.PHONY: faults

# The harness needs the packages and the jars (no Airflow DB); the drivers' class-data-sharing archive
# serves spark-submit mode only (engine clients start no JVM). A --report in FAULTS_ARGS comes last,
# so it wins over FAULTS_REPORT.
faults: venv jars $(if $(filter connect,$(FAULTS_ENGINE)),,driver-cds)  ## fault injection: kill every layer's driver, rerun, check exactly-once (TRIALS=3, FAULTS_ENGINE=connect)
	python -m lakehouse_tools.fault_harness --engine $(FAULTS_ENGINE) --trials $(TRIALS) --report $(FAULTS_REPORT) $(FAULTS_ARGS)
