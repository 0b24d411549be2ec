# `make test` is the test command: it runs every test, race detector on,
# against a real PostgreSQL (see .ci/with-postgres) and SQLite.

.PHONY: test test-short test-scale generate build fmt vet

test:
	.ci/with-postgres go test -race -count=1 ./...

# test-scale seeds a million actions on PostgreSQL and checks the dashboard's
# query plans use indexes (a minute or two).
test-scale:
	ARBITER_TEST_SCALE=1 .ci/with-postgres go test -count=1 -run 'AtScale' -timeout 20m ./...

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
