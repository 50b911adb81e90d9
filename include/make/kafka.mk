# A real Apache Kafka broker (single node, KRaft, 127.0.0.1 only) run from Kafka's own jars on
# Maven Central, and Spark's Kafka source jars. See include/kafka/kafka.sh for the broker's layout.
# Override the ports or the folder on the command line: make kafka-start KAFKA_PORT=19092

KAFKA_DIR             ?= $(ROOT)/.kafka
KAFKA_LIBS            := $(ROOT)/.kafka/libs
KAFKA_PORT            ?= 9092
KAFKA_CONTROLLER_PORT ?= 9093
KAFKA_SH              := $(ROOT)/include/kafka/kafka.sh
KAFKA_ENV             := KAFKA_DIR='$(KAFKA_DIR)' KAFKA_LIBS='$(KAFKA_LIBS)' \
                         KAFKA_PORT='$(KAFKA_PORT)' KAFKA_CONTROLLER_PORT='$(KAFKA_CONTROLLER_PORT)'

# Where the pipeline finds the broker `make kafka-start` runs.
export KAFKA_BOOTSTRAP_SERVERS ?= 127.0.0.1:$(KAFKA_PORT)

# The test suite starts a private broker from .kafka/libs and reads it with Spark's Kafka source.
TEST_PREREQS += kafka-jars kafka-source-jars

.PHONY: kafka-jars kafka-source-jars kafka-start kafka-stop kafka-status kafka-clean

kafka-jars: $(KAFKA_LIBS)/.fetched  ## Kafka broker jars (include/kafka/pom.xml) into .kafka/libs
# Transitively (the broker runs in its own JVM); the folder is emptied first so that a version
# bump leaves no second copy of a jar behind.
$(KAFKA_LIBS)/.fetched: include/kafka/pom.xml include/jars/settings.xml
	@! $(KAFKA_ENV) $(KAFKA_SH) status >/dev/null || { echo "stop the broker first: make kafka-stop" >&2; exit 1; }
	rm -rf $(KAFKA_LIBS) && mkdir -p $(KAFKA_LIBS)
	test -e $(ROOT)/.kafka/.gitignore || printf '*\n' > $(ROOT)/.kafka/.gitignore
	$(MVN) -f include/kafka/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(KAFKA_LIBS) -DincludeScope=runtime
	touch $@

# In .jars/, so on the drivers' classpath, the archive's too.
$(DRIVER_CDS): | kafka-source-jars

kafka-source-jars: $(JARS_DIR)/.kafka-source-fetched  ## Spark's Kafka source jars (include/jars/kafka-source-pom.xml) into .jars/
# Only the listed jars, no transitive ones (Spark ships the rest); earlier versions are removed.
$(JARS_DIR)/.kafka-source-fetched: include/jars/kafka-source-pom.xml include/jars/settings.xml
	mkdir -p $(JARS_DIR)
	rm -f $(JARS_DIR)/spark-sql-kafka-0-10_*.jar $(JARS_DIR)/spark-token-provider-kafka-0-10_*.jar \
	    $(JARS_DIR)/kafka-clients-*.jar $(JARS_DIR)/commons-pool2-*.jar
	$(MVN) -f include/jars/kafka-source-pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(JARS_DIR) -DexcludeTransitive=true
	touch $@

kafka-start: kafka-jars  ## start the broker on 127.0.0.1:9092 in the background (data in .kafka/)
	@$(KAFKA_ENV) $(KAFKA_SH) start

kafka-stop:  ## stop the broker: SIGTERM, then SIGKILL of its process group after 30 s
	@$(KAFKA_ENV) $(KAFKA_SH) stop

kafka-status:  ## is the broker running? (include/kafka/kafka.sh status exits 3 if not)
	@$(KAFKA_ENV) $(KAFKA_SH) status || true

kafka-clean: kafka-stop  ## stop the broker and delete its data and logs (keeps .kafka/libs)
	rm -rf $(KAFKA_DIR)/data $(KAFKA_DIR)/logs $(KAFKA_DIR)/server.properties
