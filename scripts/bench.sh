#!/usr/bin/env bash
# Benchmarks. `make bench` runs them all; figures go to stdout (JSON).
#   1. placement: trace replay (all policies) and per-decision criterion benches
#   1b. queue: discrete-event replay of the queue disciplines, and of the
#       quota policies (QoS, preemption, idle reclaim) (`make bench-queue`)
#   2. slices: request → active latency, and admissions per second through
#      the REST API with 16 and 64 clients, at 100 and at 1,000 simulated
#      hosts (TESSERA_SLICES_HOSTS="100 1000"; set
#      TESSERA_BENCH_DATABASE_URL=postgres://... for PostgreSQL)
#   3. load: `oha` lists and creates allocations at fixed rates for two
#      minutes while 100 simulated hosts report; zero errors expected
#      (`make bench-load`; not part of `all`, it takes minutes)
#   5. ingest: telemetry of 1,000 hosts × 8 GPUs, one round every 10 s,
#      stored and rolled up (`make bench-ingest`; TESSERA_BENCH_DATABASE_URL
#      names an EMPTY database, else a throwaway SQLite file)
#   6. idle: what an idle fleet of TESSERA_IDLE_HOSTS (1,000) simulated
#      hosts costs server and database, over 60 s (`make bench-idle`; not
#      part of `all`)
#   7. pages: the service time of the fleet page (first, middle, search,
#      needs attention), fleet insights and the audit log with
#      TESSERA_PAGES_HOSTS (1000 5000) hosts (`make bench-pages`; not part
#      of `all`; TESSERA_BENCH_DATABASE_URL names an EMPTY database, else a
#      throwaway SQLite file per size)
#   4. reads: the authenticated allocation list at full speed against an
#      axum hello-world in the same run (`make bench-reads`; set
#      TESSERA_BENCH_DATABASE_URL=postgres://... for PostgreSQL)
source "$(dirname "$0")/lib.sh"
what="${1:-all}"
if [ "$what" = all ] || [ "$what" = placement ]; then
  for policy in pack best-fit first-fit spread random; do
    cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy "$policy" --json
  done
  cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy pack --mig --json
  cargo run --release -q -p placement-bench -- --synthetic 1000 --seeds 5 --policy best-fit --mig --json
  cargo bench -p placement-bench
fi
if [ "$what" = all ] || [ "$what" = queue ]; then
  # Queue disciplines over time: FIFO against backfill, with and without
  # reservations, at three offered loads (docs/benchmarks.md: Queue replay).
  for load in 0.8 0.9 1.0; do
    echo "offered load $load"
    cargo run --release -q -p placement-bench --bin queue-sim -- --hosts 32 --jobs 5000 --seeds 5 --load "$load"
  done
  # Quota policies: hard quota against QoS classes with preemption, and
  # with idle reclaim (docs/benchmarks.md: QoS replay).
  for load in 0.7 0.9; do
    echo "QoS, offered load $load"
    cargo run --release -q -p placement-bench --bin queue-sim -- --qos --hosts 16 --jobs 3000 --seeds 3 --load "$load"
  done
fi
if [ "$what" = all ] || [ "$what" = slices ]; then
  ensure_tools
  build_release
  for hosts in ${TESSERA_SLICES_HOSTS:-100 1000}; do
    (cd end2end && node bench/slices-bench.mjs --hosts "$hosts" --latency 200 --requests 1000 --clients 16,64)
  done
fi
if [ "$what" = load ]; then
  ensure_tools
  ensure_oha
  build_release
  (cd end2end && node bench/load-bench.mjs --hosts 100 --seconds "${TESSERA_LOAD_SECONDS:-120}" --list-rps 50 --create-rps 5)
fi
if [ "$what" = all ] || [ "$what" = reads ]; then
  ensure_tools
  ensure_oha
  build_release
  cargo build --release -q -p tessera-server --example hello
  (cd end2end && node bench/reads-bench.mjs --seconds "${TESSERA_READS_SECONDS:-10}")
fi
if [ "$what" = all ] || [ "$what" = ingest ]; then
  tmp="$(mktemp -d)"
  cargo run --release -q -p tessera-service --example ingest_bench -- \
    "${TESSERA_BENCH_DATABASE_URL:-sqlite://$tmp/ingest.db?mode=rwc}" "${TESSERA_INGEST_HOSTS:-1000}" 6 32
  rm -rf "$tmp"
fi
if [ "$what" = idle ]; then
  ensure_tools
  build_release
  for hosts in ${TESSERA_IDLE_HOSTS:-1000}; do
    (cd end2end && node bench/idle-bench.mjs --hosts "$hosts" --seconds "${TESSERA_IDLE_SECONDS:-60}")
  done
fi
if [ "$what" = pages ]; then
  sizes="${TESSERA_PAGES_HOSTS:-1000 5000}"
  if [ -n "${TESSERA_BENCH_DATABASE_URL:-}" ] && [ "$(echo $sizes | wc -w)" -gt 1 ]; then
    die "one empty database serves one fleet size: set TESSERA_PAGES_HOSTS to one size (e.g. 1000)"
  fi
  for hosts in $sizes; do
    tmp="$(mktemp -d)"
    cargo run --release -q -p tessera-service --example pages_bench -- \
      "${TESSERA_BENCH_DATABASE_URL:-sqlite://$tmp/pages.db?mode=rwc}" "$hosts" 30
    rm -rf "$tmp"
  done
fi
