# `make test` is the test command: it runs every test, race detector on,
# against a real PostgreSQL (see .ci/with-postgres) and SQLite.

.PHONY: test test-short generate build fmt vet

test:
	.ci/with-postgres go test -race -count=1 ./...

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
