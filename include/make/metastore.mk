# Tables by name: the Hive metastore every driver and the warm engine use, kept by a Derby network
# server of this clone (127.0.0.1:$LAKEHOUSE_METASTORE_PORT, default 15270; its databases and log
# in .local/metastore). include/lakehouse/metastore.py has the drivers' settings and the
# registration, include/lakehouse_tools/metastore_server.py the server; docs/engine.md, "Tables by name".
#
#   make metastore-up            # start it (first time: Hive's schema into a template, ~20 s)
#   make metastore-register      # register $LAKEHOUSE_ROOT's written tables now (jobs do it after each write)
#   make metastore-down

METASTORE_JARS := $(JARS_DIR)/metastore

# Every driver needs the server (a driver without it fails at start, saying to run metastore-up):
# whatever starts one depends on it.
TEST_PREREQS += metastore-up
engine-up test-fast faults demo-cluster $(BENCH_TARGETS): metastore-up
$(DRIVER_CDS): | metastore-up

.PHONY: metastore-jars metastore-up metastore-down metastore-status metastore-register

metastore-jars: $(METASTORE_JARS)/.fetched  ## Derby's network server jar (include/jars/metastore/pom.xml) into .jars/metastore
$(METASTORE_JARS)/.fetched: include/jars/metastore/pom.xml include/jars/settings.xml
	mkdir -p $(METASTORE_JARS)
	$(MVN) -f include/jars/metastore/pom.xml \
	    dependency:copy-dependencies -DoutputDirectory=$(METASTORE_JARS) -DexcludeTransitive=true
	touch $@

metastore-up: venv jars metastore-jars  ## start the table-name metastore (Derby on 127.0.0.1:15270), unless it runs
	python -m lakehouse_tools.metastore_server up

metastore-down:  ## stop the metastore server (Derby's shutdown, then its process group)
	python -m lakehouse_tools.metastore_server down

metastore-status:  ## does the metastore answer? (exit 1 if not)
	python -m lakehouse_tools.metastore_server status

metastore-register: metastore-up  ## register the written tables of $LAKEHOUSE_ROOT in the metastore now
	python -m lakehouse_tools.metastore_server register
