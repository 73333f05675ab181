#!/usr/bin/env bash
# Benchmarks. Every run is recorded (scripts/bench-record.py: figures, date,
# machine, commit) under docs/benchmarks/results, and docs/benchmarks.md is
# rendered from the records (scripts/bench-page.py) at the end.
#   placement: synthetic replays of every policy (and criterion benches)
#   traces: the public Alibaba traces, every policy, 10 seeds (`make bench-traces`)
#   queue: the queue disciplines and the QoS policies (`make bench-queue`)
#   rightsize: GPU-hours right-sizing would free (`make bench-rightsize`)
#   slices: request → active latency, admissions per second at 100 and
#     1,000 simulated hosts (TESSERA_SLICES_HOSTS; TESSERA_BENCH_DATABASE_URL
#     =postgres://... for PostgreSQL)
#   reads: the authenticated list against an axum hello-world
#   ingest: telemetry of 1,000 hosts × 8 GPUs, stored and rolled up
#   load, idle, pages: minutes each; only by their own targets
source "$(dirname "$0")/lib.sh"
what="${1:-all}"
here="$(cd "$(dirname "$0")" && pwd)"
# record BENCH RUN COMMAND...: runs the command, keeps its figures.
record() {
  local bench="$1" run="$2"
  shift 2
  "$@" | python3 "$here/bench-record.py" "$bench" "$run" -- "$@"
}
trap 'python3 "$here/bench-page.py"' EXIT
if [ "$what" = all ] || [ "$what" = placement ]; then
  cargo build --release -q -p placement-bench
  for policy in pack fgd best-fit first-fit spread random; do
    record placement "$policy" cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy "$policy" --json
  done
  # The decision-time target (p50 under 200 µs) is set at 10,000 GPUs.
  record placement pack-10k-gpus cargo run --release -q -p placement-bench -- --synthetic 2000 --seeds 3 --policy pack --json
  for policy in pack fgd best-fit; do
    record placement "$policy-mig" cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy "$policy" --mig --json
  done
  [ -n "${TESSERA_BENCH_SKIP_CRITERION:-}" ] || cargo bench -p placement-bench
fi
if [ "$what" = all ] || [ "$what" = traces ]; then
  openb="${TESSERA_OPENB_DIR:-$ROOT/../shared/openb}"
  [ -f "$openb/openb_node_list_gpu_node.csv" ] || die "no openb traces at $openb (set TESSERA_OPENB_DIR)"
  record placement-traces openb cargo run --release -q -p placement-bench -- \
    --suite "$openb" --policies pack,fgd,best-fit,first-fit --seeds 10 --seed 42 --json
fi
if [ "$what" = all ] || [ "$what" = queue ]; then
  # Queue disciplines over time: FIFO against backfill, with and without
  # reservations, at three offered loads.
  for load in 0.8 0.9 1.0; do
    record queue "$load" cargo run --release -q -p placement-bench --bin queue-sim -- --hosts 32 --jobs 5000 --seeds 5 --load "$load" --json
  done
  # Quota policies: hard quota against QoS classes with preemption, and
  # with idle reclaim.
  for load in 0.7 0.9; do
    record qos "$load" cargo run --release -q -p placement-bench --bin queue-sim -- --qos --hosts 16 --jobs 3000 --seeds 3 --load "$load" --json
  done
fi
if [ "$what" = all ] || [ "$what" = queue ] || [ "$what" = rightsize ]; then
  # Right-sizing: a week of seeded slices on the simulator's workload
  # profiles, advised, then checked against the next week.
  record rightsize 1000-slices cargo run --release -q -p placement-bench --bin rightsize-sim -- --slices 1000 --seed 1 --json
fi
if [ "$what" = all ] || [ "$what" = slices ]; then
  ensure_tools
  build_release
  for hosts in ${TESSERA_SLICES_HOSTS:-100 1000}; do
    (cd end2end && record slices "$hosts-hosts" node bench/slices-bench.mjs --hosts "$hosts" --latency 200 --requests 1000 --clients 16,64)
  done
fi
if [ "$what" = load ]; then
  ensure_tools
  ensure_oha
  build_release
  (cd end2end && record load 100-hosts node bench/load-bench.mjs --hosts 100 --seconds "${TESSERA_LOAD_SECONDS:-120}" --list-rps 50 --create-rps 5)
fi
if [ "$what" = all ] || [ "$what" = reads ]; then
  ensure_tools
  ensure_oha
  build_release
  cargo build --release -q -p tessera-server --example hello
  (cd end2end && record reads list node bench/reads-bench.mjs --seconds "${TESSERA_READS_SECONDS:-10}")
fi
if [ "$what" = all ] || [ "$what" = ingest ]; then
  tmp="$(mktemp -d)"
  record ingest "${TESSERA_INGEST_HOSTS:-1000}-hosts" cargo run --release -q -p tessera-service --example ingest_bench -- \
    "${TESSERA_BENCH_DATABASE_URL:-sqlite://$tmp/ingest.db?mode=rwc}" "${TESSERA_INGEST_HOSTS:-1000}" 6 32
  rm -rf "$tmp"
fi
if [ "$what" = idle ]; then
  ensure_tools
  build_release
  for hosts in ${TESSERA_IDLE_HOSTS:-1000}; do
    (cd end2end && record idle "$hosts-hosts" node bench/idle-bench.mjs --hosts "$hosts" --seconds "${TESSERA_IDLE_SECONDS:-60}")
  done
fi
if [ "$what" = pages ]; then
  sizes="${TESSERA_PAGES_HOSTS:-1000 5000}"
  if [ -n "${TESSERA_BENCH_DATABASE_URL:-}" ] && [ "$(echo $sizes | wc -w)" -gt 1 ]; then
    die "one empty database serves one fleet size: set TESSERA_PAGES_HOSTS to one size (e.g. 1000)"
  fi
  for hosts in $sizes; do
    tmp="$(mktemp -d)"
    record pages "$hosts-hosts" cargo run --release -q -p tessera-service --example pages_bench -- \
      "${TESSERA_BENCH_DATABASE_URL:-sqlite://$tmp/pages.db?mode=rwc}" "$hosts" 30
    rm -rf "$tmp"
  done
fi
