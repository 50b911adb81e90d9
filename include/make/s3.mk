# Object storage: a local S3-compatible server (moto's, include/s3/server.py) and the jars a driver
# needs for an s3a:// lakehouse root. `make demo STORAGE=s3` runs the whole demo on it.
#
#   make s3-up / s3-down / s3-status     the server on 127.0.0.1:$LAKEHOUSE_S3_PORT (default 15090)
#
# Production: point AWS_ENDPOINT_URL_S3 at the store (empty for AWS S3 itself), give the store's
# credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and set LAKEHOUSE_ROOT=s3a://bucket/prefix
# (docs/deployment.md, "Object storage").

S3_VENV     := $(ROOT)/.venv-s3
S3_JARS     := $(JARS_DIR)/s3
S3_STATE    := $(ROOT)/.local/s3
STORAGE     ?= local

# Credentials made once per clone, like the engine token: the server refuses any other key id.
S3_KEYS := $(shell mkdir -p $(S3_STATE) && (test -s $(S3_STATE)/keys || \
             printf 'LH%s %s' "$$(od -An -N9 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)" \
               "$$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')" > $(S3_STATE)/keys) && cat $(S3_STATE)/keys)
export LAKEHOUSE_S3_PORT      ?= 15090
export LAKEHOUSE_S3_BUCKET    ?= lakehouse
export AWS_ENDPOINT_URL_S3    ?= http://127.0.0.1:$(LAKEHOUSE_S3_PORT)
export AWS_ACCESS_KEY_ID      ?= $(word 1,$(S3_KEYS))
export AWS_SECRET_ACCESS_KEY  ?= $(word 2,$(S3_KEYS))
export AWS_REGION             ?= us-east-1
ifeq ($(STORAGE),s3)
export LAKEHOUSE_ROOT := s3a://$(LAKEHOUSE_S3_BUCKET)/lakehouse
else ifneq ($(STORAGE),local)
$(error STORAGE=$(STORAGE): use STORAGE=local (the default) or STORAGE=s3)
endif

# The suite starts a private server per test session and runs its object-storage cases on it.
TEST_PREREQS += s3-venv s3-jars

.PHONY: s3-venv s3-jars s3-up s3-down s3-status

s3-venv: $(S3_VENV)/.installed  ## the S3 server's own venv (include/s3/requirements.txt)
$(S3_VENV)/.installed: include/s3/requirements.txt include/s3/constraints.txt
	test -x $(S3_VENV)/bin/python || $(PYTHON) -m venv $(S3_VENV)
	env -u PYTHONPATH $(S3_VENV)/bin/pip install --quiet -r include/s3/requirements.txt -c include/s3/constraints.txt
	touch $@

s3-jars: $(S3_JARS)/.fetched  ## S3A, the AWS SDK and the commit store (include/jars/s3) into .jars/s3
# Only for an s3a:// root: a driver adds these jars when its lakehouse is on S3.
$(S3_JARS)/.fetched: include/jars/s3/pom.xml include/jars/settings.xml \
                     $(wildcard include/jars/s3/src/io/ysb/lakehouse/*.java) | $(VENV)/.installed jars
	rm -rf $(S3_JARS) && mkdir -p $(S3_JARS)
	$(MVN) -f include/jars/s3/pom.xml \
	    dependency:copy-dependencies -DoutputDirectory=$(S3_JARS) -DexcludeTransitive=true
	rm -rf $(S3_JARS)/classes && mkdir -p $(S3_JARS)/classes
	javac -nowarn -d $(S3_JARS)/classes --release 17 \
	    -cp "$$($(VENV)/bin/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')/jars/*:$(JARS_DIR)/*:$(S3_JARS)/*" \
	    include/jars/s3/src/io/ysb/lakehouse/*.java
	jar cf $(S3_JARS)/lakehouse-s3-commit-store.jar -C $(S3_JARS)/classes . && rm -rf $(S3_JARS)/classes
	touch $@

s3-up: s3-venv  ## start the local S3 server (bucket $LAKEHOUSE_S3_BUCKET; data in its memory)
	env -u PYTHONPATH LAKEHOUSE_S3_PYTHON=$(S3_VENV)/bin/python $(S3_VENV)/bin/python include/s3/server.py start

s3-down:  ## stop the local S3 server (its process group); its data goes with it
	$(PYTHON) include/s3/server.py stop

s3-status:  ## is the S3 server running, and how many requests has it served
	@$(PYTHON) include/s3/server.py status || true

# The demo and the engine on S3 need the server and the jars first.
ifeq ($(STORAGE),s3)
engine-up demo: s3-up s3-jars
endif
