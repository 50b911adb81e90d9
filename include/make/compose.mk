# docker-compose.yaml: its checks (no Docker needed) and a few conveniences (Docker needed).
#
# The checks validate the compose file against the Compose specification's JSON schema, as
# shipped in compose-go (the library `docker compose` itself loads files with). Go's own tooling
# fetches it from the Go module proxy into .local/go (module cache writable, so `rm -rf` works);
# the schema is copied to .local/compose-spec.json. The version file is the stamp: a second run
# downloads nothing, a new COMPOSE_GO_VERSION fetches again.
# compose-loader builds include/docker/compose-config (compose-go's own loader, what
# `docker compose config` runs) into .local/bin; it is rebuilt only when its sources change.
# Keep COMPOSE_GO_VERSION equal to the compose-go version in include/docker/compose-config/go.mod.

COMPOSE_GO_MODULE   := github.com/compose-spec/compose-go/v2
COMPOSE_GO_VERSION  := v2.16.2
COMPOSE_LOCAL_DIR   := $(ROOT)/.local
COMPOSE_GOPATH      := $(COMPOSE_LOCAL_DIR)/go
COMPOSE_SCHEMA      := $(COMPOSE_LOCAL_DIR)/compose-spec.json
COMPOSE_SCHEMA_VERSION_FILE := $(COMPOSE_LOCAL_DIR)/compose-spec.version
COMPOSE_LOADER      := $(COMPOSE_LOCAL_DIR)/bin/compose-config
COMPOSE_LOADER_SRC  := include/docker/compose-config
COMPOSE_GO_ENV      := GOPATH=$(COMPOSE_GOPATH) GOMODCACHE=$(COMPOSE_GOPATH)/pkg/mod \
                       GOFLAGS='-mod=mod -modcacherw' GOTOOLCHAIN=local GO111MODULE=on

TEST_PREREQS += compose-schema compose-loader

.PHONY: compose-schema compose-loader compose-config compose-check compose-env compose-up compose-down \
        clean-compose-schema compose-schema-version-file

compose-schema: $(COMPOSE_SCHEMA)  ## the Compose spec JSON schema (compose-go) in .local/, for tests/deploy

# Rewritten only when COMPOSE_GO_VERSION changes, so the schema is rebuilt only then.
$(COMPOSE_SCHEMA_VERSION_FILE): compose-schema-version-file
	@:
compose-schema-version-file:
	@mkdir -p $(COMPOSE_LOCAL_DIR)
	@echo "$(COMPOSE_GO_MODULE)@$(COMPOSE_GO_VERSION)" | cmp -s - $(COMPOSE_SCHEMA_VERSION_FILE) \
	    || echo "$(COMPOSE_GO_MODULE)@$(COMPOSE_GO_VERSION)" > $(COMPOSE_SCHEMA_VERSION_FILE)

$(COMPOSE_SCHEMA): $(COMPOSE_SCHEMA_VERSION_FILE)
	@command -v go >/dev/null || { echo "compose-schema: needs Go (the go command) on PATH" >&2; exit 1; }
	mkdir -p $(COMPOSE_GOPATH)
	cd $(COMPOSE_LOCAL_DIR) && $(COMPOSE_GO_ENV) \
	    go mod download -json $(COMPOSE_GO_MODULE)@$(COMPOSE_GO_VERSION) > $(COMPOSE_LOCAL_DIR)/compose-go.json \
	    || { cat $(COMPOSE_LOCAL_DIR)/compose-go.json >&2; exit 1; }
	dir="$$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p' $(COMPOSE_LOCAL_DIR)/compose-go.json)"; \
	    test -f "$$dir/schema/compose-spec.json" \
	        || { echo "compose-schema: no schema/compose-spec.json in '$$dir'" >&2; exit 1; }; \
	    install -m 0644 "$$dir/schema/compose-spec.json" $@.tmp
	mv $@.tmp $@

compose-loader: $(COMPOSE_LOADER)  ## compose-go's loader as a command (.local/bin/compose-config), for tests/deploy
$(COMPOSE_LOADER): $(COMPOSE_LOADER_SRC)/main.go $(COMPOSE_LOADER_SRC)/go.mod $(COMPOSE_LOADER_SRC)/go.sum
	@command -v go >/dev/null || { echo "compose-loader: needs Go (the go command) on PATH" >&2; exit 1; }
	mkdir -p $(@D)
	cd $(COMPOSE_LOADER_SRC) && $(COMPOSE_GO_ENV) GOCACHE=$(COMPOSE_GOPATH)/cache go build -mod=readonly -trimpath -o $@ .

compose-config: $(COMPOSE_LOADER) .env  ## print docker-compose.yaml resolved with .env, as `docker compose config` would
	$(COMPOSE_LOADER) docker-compose.yaml .env $(ROOT) tools

compose-check: $(VENV)/.installed $(DRIVER_CDS) $(COMPOSE_SCHEMA) $(COMPOSE_LOADER)  ## validate docker-compose.yaml, .env.example and the Dockerfile (no Docker needed)
	python -m pytest tests/deploy -q

compose-env: .env  ## .env from .env.example with random secrets (never overwrites an existing .env)
.env: | .env.example
	python3 include/docker/make_env.py .env.example .env

compose-up: .env  ## build the image and start the stack (needs Docker with the compose plugin)
	docker compose up -d --build

compose-down:  ## stop the stack, keep its volumes (`docker compose down -v` deletes them)
	docker compose down

clean-compose-schema:  ## delete the downloaded schema, the loader and their Go module cache
	rm -rf $(COMPOSE_GOPATH) $(COMPOSE_SCHEMA) $(COMPOSE_SCHEMA_VERSION_FILE) $(COMPOSE_LOCAL_DIR)/compose-go.json \
	    $(COMPOSE_LOADER)
