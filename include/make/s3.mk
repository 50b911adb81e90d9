# Object storage: a local S3-compatible server (versitygw's posix gateway behind
# include/s3/server.py; objects in .local/s3/data, kept across restarts) and the jars a driver
# needs for an s3a:// lakehouse root. `make demo STORAGE=s3` runs the whole demo on it.
#
#   make s3-up / s3-down / s3-status     the server on 127.0.0.1:$LAKEHOUSE_S3_PORT (default 15090)
#
# Production: point AWS_ENDPOINT_URL_S3 at the store (empty for AWS S3 itself), give the store's
# credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and set LAKEHOUSE_ROOT=s3a://bucket/prefix
# (docs/deployment.md, "Object storage").

S3_JARS     := $(JARS_DIR)/s3
S3_STATE    := $(ROOT)/.local/s3
STORAGE     ?= local
# The gateway (Apache-2.0), built from the Go module proxy into .local-s3bin/ (docs/deployment.md,
# "Object storage", says why this one).
S3_GATEWAY_VERSION := v1.8.0
S3_GATEWAY_DIR     := $(ROOT)/.local-s3bin
S3_GATEWAY_STAMP   := $(S3_GATEWAY_DIR)/.versitygw-$(S3_GATEWAY_VERSION)

# Credentials made once per clone, like the engine token, in a file only the owner reads: the
# server checks every request's signature against them.
S3_KEYS := $(shell mkdir -p $(S3_STATE) && (test -s $(S3_STATE)/keys || (umask 077 && \
             printf 'LH%s %s' "$$(od -An -N9 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)" \
               "$$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')" > $(S3_STATE)/keys)) && \
             chmod 600 $(S3_STATE)/keys && cat $(S3_STATE)/keys)
export LAKEHOUSE_S3_PORT      ?= 15090
export LAKEHOUSE_S3_BUCKET    ?= lakehouse
export AWS_ENDPOINT_URL_S3    ?= http://127.0.0.1:$(LAKEHOUSE_S3_PORT)
export AWS_ACCESS_KEY_ID      ?= $(word 1,$(S3_KEYS))
export AWS_SECRET_ACCESS_KEY  ?= $(word 2,$(S3_KEYS))
export AWS_REGION             ?= us-east-1
# 1: the server keeps every object version (in .local/s3/versions/), so `lakehouse audit` can see a
# commit that a writer without conditional put replaced. Off by default: rewritten objects pile up.
export LAKEHOUSE_S3_VERSIONING ?=
ifeq ($(STORAGE),s3)
export LAKEHOUSE_ROOT := s3a://$(LAKEHOUSE_S3_BUCKET)/lakehouse
else ifneq ($(STORAGE),local)
$(error STORAGE=$(STORAGE): use STORAGE=local (the default) or STORAGE=s3)
endif

# The suite starts a private server per test session and runs its object-storage cases on it.
TEST_PREREQS += s3-gateway s3-jars

.PHONY: s3-gateway s3-jars s3-up s3-down s3-status

s3-gateway: $(S3_GATEWAY_STAMP)  ## the S3 gateway (versitygw $(S3_GATEWAY_VERSION)) into .local-s3bin/
$(S3_GATEWAY_STAMP):
	GOBIN=$(S3_GATEWAY_DIR) GOFLAGS=-buildvcs=false \
	    go install github.com/versity/versitygw/cmd/versitygw@$(S3_GATEWAY_VERSION)
	rm -f $(S3_GATEWAY_DIR)/.versitygw-* && touch $@

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

s3-up: s3-gateway  ## start the local S3 server (bucket $LAKEHOUSE_S3_BUCKET; objects in .local/s3/data)
	$(PYTHON) include/s3/server.py start

s3-down:  ## stop the local S3 server (its process group); its objects stay in .local/s3/data
	$(PYTHON) include/s3/server.py stop

s3-status:  ## is the S3 server running, and how many requests has it served
	@$(PYTHON) include/s3/server.py status || true

# On S3, every driver (the metastore's template, the engine, the demo's) needs the jars and the
# server first: a driver checks for the jars when it starts. tests/unit/test_make_order.py checks
# the order make runs them in.
ifeq ($(STORAGE),s3)
metastore-up engine-up demo: s3-up s3-jars
endif
