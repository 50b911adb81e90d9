# OpenLineage: Spark's listener jar (include/jars/lineage-pom.xml) into .jars/, beside Delta's, so
# the engine and every driver can load it; lineage itself is off unless LAKEHOUSE_LINEAGE=1
# (docs/lineage.md). `jars` depends on it, so everything that needs the jars (setup, engine-up,
# test, test-fast, demo) fetches it once.
# Beside it, the engine's task-parent classes (include/jars/lineage-parent/, docs/lineage.md "The
# parent run"), compiled against pyspark's jars and the listener's into one small jar; its name
# sorts after the listener's, so the listener is always first on the classpath.

.PHONY: lineage-jars

LINEAGE_PARENT_JAR := $(JARS_DIR)/openlineage-task-parent.jar
LINEAGE_PARENT_SRC := $(wildcard include/jars/lineage-parent/src/lakehouse/lineage/*.java)

jars: lineage-jars
lineage-jars: $(JARS_DIR)/.lineage-fetched $(LINEAGE_PARENT_JAR)  ## Spark's OpenLineage listener jar (and the engine's task-parent classes) into .jars/
# One version only: an earlier one is removed first.
$(JARS_DIR)/.lineage-fetched: include/jars/lineage-pom.xml include/jars/settings.xml
	mkdir -p $(JARS_DIR)
	rm -f $(JARS_DIR)/openlineage-spark_*.jar
	$(MVN) -f include/jars/lineage-pom.xml \
	    dependency:copy-dependencies -DoutputDirectory=$(JARS_DIR) -DexcludeTransitive=true
	touch $@
$(LINEAGE_PARENT_JAR): $(LINEAGE_PARENT_SRC) $(JARS_DIR)/.lineage-fetched $(VENV)/.installed
	rm -rf $(JARS_DIR)/.lineage-parent-classes
	javac --release 17 -nowarn -d $(JARS_DIR)/.lineage-parent-classes \
	    -cp "$$($(VENV)/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars/*:$$(ls $(JARS_DIR)/openlineage-spark_*.jar)" \
	    $(LINEAGE_PARENT_SRC)
	jar cf $@.tmp -C $(JARS_DIR)/.lineage-parent-classes .
	mv $@.tmp $@
	rm -rf $(JARS_DIR)/.lineage-parent-classes

# The OpenLineage spec's JSON schemas that tests/e2e/test_lineage.py validates every event against,
# kept in tests/e2e/openlineage_spec/ (its README: where from). Neither OpenLineage jar nor the
# Python client carries them; the crates.io package below ships them verbatim. `cargo install`
# fetches and unpacks it, then refuses (a library, no program): only the download is wanted.
LINEAGE_SPEC_CRATE := datafusion-openlineage
LINEAGE_SPEC_CRATE_VERSION := 0.0.7
.PHONY: lineage-spec
lineage-spec:  ## refresh tests/e2e/openlineage_spec/ (OpenLineage's JSON schemas) from their package
	cargo install --quiet --root $(ROOT)/.local/cargo-unused $(LINEAGE_SPEC_CRATE) \
	    --version $(LINEAGE_SPEC_CRATE_VERSION) >/dev/null 2>&1 || true
	src="$$(ls -d $${CARGO_HOME:-$$HOME/.cargo}/registry/src/*/$(LINEAGE_SPEC_CRATE)-$(LINEAGE_SPEC_CRATE_VERSION)/tests/schemas/openlineage | head -1)"; \
	    test -f "$$src/OpenLineage.json" || { echo "no $(LINEAGE_SPEC_CRATE) $(LINEAGE_SPEC_CRATE_VERSION) in cargo's registry"; exit 1; }; \
	    cp "$$src/OpenLineage.json" tests/e2e/openlineage_spec/ && cp "$$src"/facets/*.json tests/e2e/openlineage_spec/facets/
