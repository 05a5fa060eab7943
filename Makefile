# The README's two commands. Both work on a fresh machine of the project's kind: modules are
# downloaded on first use, `make tools` installs the pinned emulators the tests start (moto,
# Azurite), and everything else runs in-process or comes with the machine (PostgreSQL, the
# Firestore emulator in the Google Cloud CLI).
GO ?= go
export GOTOOLCHAIN ?= local

.PHONY: demo test test-long corpus tools vet bench fuzz build

## demo: run the bank transfers demo, then the travel reservation demo, on the embedded SQLite
## store, with crashes injected, then the reservations as Temporal workflows while the worker
## process is killed
demo:
	@echo "make demo: compiling ssfkit into .ssfkit/bin (the first time takes 3 to 6 minutes on 2 cores:"
	@echo "  the cloud SDKs and the embedded Temporal server; later runs start at once)"
	$(GO) build -o .ssfkit/bin/ssfkit ./cmd/ssfkit
	.ssfkit/bin/ssfkit demo && .ssfkit/bin/ssfkit demo travel && .ssfkit/bin/ssfkit demo temporal

## test: the whole default test run (unit, conformance, crash injection, linearizability, fuzz
## seeds), under the race detector: the runtime is concurrent, and a race is a correctness bug
## The long-running packages go first: go test starts packages in the order it is given them
## (two at a time on two cores), so they overlap the many short ones instead of running last.
## The timeout is per test binary: tests/terraform takes ~12 minutes on a warm machine and more
## on a fresh one, where its first Go builds of the function artifacts are cold.
SLOW_PACKAGES = ./tests/txtest ./tests/crashtest ./tests/sqlsteps ./tests/terraform ./tests/lincheck ./tests/logtest ./cmd/ssfkit
##
## The schedule explorer (tests/schedules) runs without the race detector, beside the rest: it
## runs the executions one store request at a time, handing control over through channels, so
## the detector could find nothing there and made it five times slower (its output follows the
## rest's).
test: tools vet
	@mkdir -p .ssfkit; \
	$(GO) test -count=1 -timeout 25m ./tests/schedules > .ssfkit/schedules-test.log 2>&1 & explorer=$$!; \
	$(GO) test -race -count=1 -timeout 25m $(SLOW_PACKAGES) ./tests/layout ./tests/zkcompat $$($(GO) list ./... | grep -v -e /tests/ -e /cmd/ssfkit$$); \
	status=$$?; wait $$explorer; explored=$$?; cat .ssfkit/schedules-test.log; \
	[ $$status -eq 0 ] && [ $$explored -eq 0 ]

## test-long: the default run, then the schedule explorer's long run: every schedule with up
## to two preemptions (the default run: one, plus 500 seeded random ones per scenario), and
## 5000 random ones with up to four (docs/protocol.md, "What the tests establish")
## and every case of the policies' corpus of real plans planned again (policies/README.md)
## and the coordination service crashed at every store operation on SQLite too (docs/coordination.md)
## and the README's deploy commands (build, up, down on moto), which TestAWS covers by default
## and SQL steps crashed and paused at every injection point, with 20 rounds of duplicates (docs/sql-steps.md)
test-long: test
	$(GO) test -race -count=1 -timeout 30m ./tests/sqlsteps -sqlsteps.every
	$(GO) test -count=1 -timeout 60m ./tests/schedules -schedules.preemptions=2 -schedules.random=5000
	$(GO) test -count=1 -timeout 30m ./tests/terraform -run TestPolicyCorpus -corpus.replan=-1
	$(GO) test -race -count=1 -timeout 10m ./orchestrator/coord -run TestServerCrashAtEveryStoreOperation -coord.crash.stores=mem,sqlite
	$(GO) test -race -count=1 -timeout 20m ./cmd/ssfkit -run TestDocsCommandsRun -docs.deploy

## corpus: plan every case of the policies' corpus with the real providers and record the plans
corpus: tools
	$(GO) test -count=1 -timeout 30m ./tests/terraform -run TestPolicyCorpus -corpus.replan=-1 -corpus.write

## tools: install the pinned emulators the tests start on 127.0.0.1, and Terraform and the Google
## and AzureRM providers (built from the Go module proxy), when they are missing
tools:
	./scripts/install-test-tools.sh

## vet: gofmt, terraform fmt and go vet; vet builds with -race like the tests, so a cold cache compiles every
## package once (the embedded Temporal server takes minutes to compile)
vet:
	$(GO) mod download
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	@tf=$$(command -v terraform || echo .ssfkit/tools/bin/terraform); \
	  $$tf fmt -check -recursive modules policies/testdata 2>/dev/null || \
	  { echo "terraform fmt needed on the files above (terraform fmt -recursive modules policies/testdata)"; exit 1; }
	$(GO) vet -race ./...

build:
	$(GO) build -o bin/ssfkit ./cmd/ssfkit

## bench: raw vs exactly-once operations on the embedded store (see BENCHMARKS.md)
bench:
	$(GO) run ./cmd/ssfkit bench ops

## fuzz: a longer fuzzing session for the parsers (not part of make test)
fuzz:
	$(GO) test -run XXX -fuzz FuzzParseCond -fuzztime 60s ./adapters/store/
	$(GO) test -run XXX -fuzz FuzzParseURL -fuzztime 60s ./adapters/store/
	$(GO) test -run XXX -fuzz FuzzDecodeAttrs -fuzztime 60s ./adapters/store/
