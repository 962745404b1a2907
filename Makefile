# The two set-up commands of the README: `make demo` and `make test`.
GO ?= go
DEMO_HOME ?= $(CURDIR)/.nerve-demo

.PHONY: build demo test bench vet fmt-check

# What `nerve version` says: the tag (or commit) and the commit of this
# clone; outside a git clone the binary's build info decides.
BIN ?= bin/nerve
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# A static binary: nerve needs no C library, and a process that loads none
# starts sooner (every command is a process; `nerve version` 28 -> 24 ms
# on a test VM).
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/nerve

# Runs the code-review example through a daemon on the embedded defaults
# (bbolt in a NERVE_HOME inside the checkout, the built-in example agent),
# then stops that daemon.
demo: build
	@NERVE_HOME=$(DEMO_HOME) $(BIN) workflow run examples/code-review.yaml \
		--input change="Retry failed uploads with exponential backoff"; \
	status=$$?; NERVE_HOME=$(DEMO_HOME) $(BIN) daemon stop >/dev/null; exit $$status

test:
	$(GO) test -race -count=1 -timeout 60m ./...

# Turn, CLI and remote benchmarks run 200 turns each; the Khala load
# benchmarks size themselves (1x), the PostgreSQL ones need PostgreSQL.
bench:
	$(GO) test -run '^$$' -bench 'Turn|Moderator|CLI|RemoteTurn|IdleDaemon' -benchtime 200x ./daemon ./cmd/nerve
	$(GO) test -run '^$$' -bench 'Khala' -benchtime 1x ./khala ./cmd/nerve
	$(GO) test -run '^$$' -bench 'Knowledge' ./knowledge

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
