# The docs' generated blocks: the table lists and diagrams of README.md and docs/pipeline.md,
# rendered from the catalog's declarations alone, as BENCHMARKS.md is from bench/results/:
#
#   make docs        # rewrite every generated block (seconds: imports the catalog, starts no Spark)
#
# tests/unit/test_catalog_docs.py fails while a block differs from the catalog (a table added
# without `make docs`); `python -m lakehouse_tools.catalog_docs --check` says the same, writing nothing.

.PHONY: docs

docs: venv  ## the table lists and diagrams of README.md and docs/pipeline.md, from the catalog
	python -m lakehouse_tools.catalog_docs
