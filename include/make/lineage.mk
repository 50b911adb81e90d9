# OpenLineage: Spark's listener jar (include/jars/lineage-pom.xml) into .jars/, beside Delta's, so
# the engine and every driver can load it; lineage itself is off unless LAKEHOUSE_LINEAGE=1
# (docs/lineage.md). `jars` depends on it, so everything that needs the jars (setup, engine-up,
# test, test-fast, demo) fetches it once.

.PHONY: lineage-jars

jars: lineage-jars
lineage-jars: $(JARS_DIR)/.lineage-fetched  ## Spark's OpenLineage listener jar into .jars/
# One version only: an earlier one is removed first.
$(JARS_DIR)/.lineage-fetched: include/jars/lineage-pom.xml include/jars/settings.xml
	mkdir -p $(JARS_DIR)
	rm -f $(JARS_DIR)/openlineage-spark_*.jar
	mvn --batch-mode --quiet -s include/jars/settings.xml -f include/jars/lineage-pom.xml \
	    dependency:copy-dependencies -DoutputDirectory=$(JARS_DIR) -DexcludeTransitive=true
	touch $@
