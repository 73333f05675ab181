# The two commands: `make demo` runs everything locally; `make test` runs every test.
# `make cycles`: import circles among each crate's files; `make test` fails on any.
.PHONY: cycles demo test bench bench-traces bench-page bench-queue bench-rightsize bench-slices bench-load bench-reads bench-ingest bench-idle bench-pages fmt lint

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

bench-traces:
	bash scripts/bench.sh traces

bench-queue:
	bash scripts/bench.sh queue

bench-rightsize:
	bash scripts/bench.sh rightsize

bench-slices:
	bash scripts/bench.sh slices

bench-load:
	bash scripts/bench.sh load

bench-reads:
	bash scripts/bench.sh reads

bench-ingest:
	bash scripts/bench.sh ingest

bench-idle:
	bash scripts/bench.sh idle

bench-pages:
	bash scripts/bench.sh pages

fmt:
	cargo fmt --all

lint:
	cargo clippy --workspace --exclude tessera-frontend --all-targets -- -D warnings

cycles:
	python3 scripts/import-cycles.py

# docs/benchmarks.md from the recorded runs (every bench target does it too).
bench-page:
	python3 scripts/bench-page.py
