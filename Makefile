# The two commands: `make demo` runs everything locally; `make test` runs every test.
.PHONY: demo test bench fmt lint

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

fmt:
	cargo fmt --all

lint:
	cargo clippy --workspace --exclude tessera-frontend --all-targets -- -D warnings
