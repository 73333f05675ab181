#!/usr/bin/env bash
# Placement benchmarks: trace replay (all policies) and per-decision criterion benches.
source "$(dirname "$0")/lib.sh"
for policy in pack best-fit first-fit spread random; do
  cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy "$policy" --json
done
cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy pack --mig --json
cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy best-fit --mig --json
cargo bench -p placement-bench
