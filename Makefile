# The two commands: `make demo` runs everything locally; `make test` runs every test.
.PHONY: demo test bench bench-slices fmt lint

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

bench-slices:
	bash scripts/bench.sh slices

fmt:
	cargo fmt --all

lint:
	cargo clippy --workspace --exclude tessera-frontend --all-targets -- -D warnings
