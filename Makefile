# `make test` is the test command: it runs every test, race detector on,
# against a real PostgreSQL (see .ci/with-postgres) and SQLite, then the
# SDKs' suites against a real `arbiter serve` on both databases.

.PHONY: test test-go test-sdk test-sdk-python test-sdk-typescript test-contract test-short test-scale test-reliability generate build fmt vet lint fuzz

test: test-go test-sdk

test-go:
	.ci/with-postgres go test -race -count=1 ./...

test-sdk: test-sdk-python test-sdk-typescript

# test-sdk-python builds the Python SDK's sdist and wheel (pinned dev tools
# from the package index), installs the wheel in a fresh virtual environment
# and runs pytest against a real arbiter serve on SQLite and PostgreSQL.
test-sdk-python:
	.ci/with-postgres sdk/python/run-tests all

# test-sdk-typescript tests the TypeScript SDK as users get it: npm ci, build,
# npm pack, the tarball installed into an empty project, node --test against a
# real arbiter serve on SQLite and PostgreSQL (needs Node 20+ and npm).
test-sdk-typescript:
	sdk/typescript/run-tests all

# test-contract fuzzes the HTTP contract from outside: schemathesis (pinned in
# sdk/contract/requirements.txt) against a live arbiter serve on SQLite and
# PostgreSQL, once per key role, from web/openapi.json (about two minutes).
test-contract:
	.ci/with-postgres sdk/contract/run all

# test-scale seeds a million actions on PostgreSQL and checks the dashboard's
# query plans use indexes (a minute or two).
test-scale:
	ARBITER_TEST_SCALE=1 .ci/with-postgres go test -count=1 -run 'AtScale' -timeout 20m ./...

# fuzz runs each fuzz target for a bounded number of executions, about 10 s
# each on a quiet 2-core machine; the corpus under testdata/fuzz also runs in
# every `go test`. The budget is a count, not a duration: with a duration, Go
# 1.26's fuzzing coordinator can fail a clean run with "context deadline
# exceeded" (go.dev/issue/75804). A failing input is written to testdata/fuzz.
FUZZ_EXECS ?= 60000
FUZZ = go test -run='^$$' -fuzztime=$(FUZZ_EXECS)x -fuzzminimizetime=5s
fuzz:
	$(FUZZ) -fuzz='^FuzzDecodeEntry$$' ./services
	$(FUZZ) -fuzz='^FuzzFingerprint$$' ./services
	$(FUZZ) -fuzz='^FuzzCheckFields$$' ./services
	$(FUZZ) -fuzz='^FuzzEntriesHandler$$' ./web
	$(FUZZ) -fuzz='^FuzzSplitEntries$$' ./web
	$(FUZZ) -fuzz='^FuzzAppendJSONString$$' ./services/record

# test-reliability breaks things under load: kill -9 of the server, a
# PostgreSQL restart (a throwaway cluster of its own), two replicas, a
# duplicate storm. About half a minute.
test-reliability:
	ARBITER_TEST_RELIABILITY=1 .ci/with-postgres go test -race -count=1 -run 'Reliability' -timeout 10m ./cmd/arbiter

test-short:
	.ci/with-postgres go test -count=1 ./...

generate:
	go tool templ generate

build:
	go build -o bin/arbiter ./cmd/arbiter

fmt:
	go fmt ./...

vet:
	go vet ./...

# lint is vet and staticcheck (pinned in go.mod; staticcheck.conf).
lint: vet
	go tool staticcheck ./...
