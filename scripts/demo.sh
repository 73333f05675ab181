#!/usr/bin/env bash
# Builds and runs the whole system locally: the IdP with demo users, the server
# on a SQLite file, and four simulated GPU hosts as real agent processes.
# Ctrl-C stops everything.
source "$(dirname "$0")/lib.sh"

PORT="${TESSERA_DEMO_PORT:-3000}"
IDP_PORT="${TESSERA_DEMO_IDP_PORT:-4011}"
URL="http://127.0.0.1:$PORT"
STATE="$ROOT/.demo"

ensure_tools
build_release
mkdir -p "$STATE/agents"
# Credentials belong to a database: without it, the agents enrol afresh.
[ -f "$STATE/tessera.db" ] || rm -f "$STATE"/agents/*.credential

pids=()
stopping=0
cleanup() {
  trap - INT TERM EXIT
  log "stopping"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'stopping=1; cleanup' INT TERM
trap cleanup EXIT

export TESSERA_SERVER__LISTEN="127.0.0.1:$PORT"
export TESSERA_SERVER__PUBLIC_URL="$URL"
export TESSERA_SERVER__SITE_ROOT="$SITE_ROOT"
export TESSERA_DATABASE__URL="sqlite://$STATE/tessera.db?mode=rwc"
export TESSERA_OIDC__ISSUER_URL="http://127.0.0.1:$IDP_PORT"
SERVER_BIN="$CARGO_TARGET_DIR/release/tessera-server"
AGENT_BIN="$CARGO_TARGET_DIR/release/tessera-agent"

log "starting the identity provider on :$IDP_PORT"
node end2end/idp/cli.mjs --port "$IDP_PORT" --app "$URL" >"$STATE/idp.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$IDP_PORT/.well-known/openid-configuration" 30 || die "the IdP did not start; see $STATE/idp.log"

log "starting the server on $URL"
"$SERVER_BIN" --config demo/tessera.toml >"$STATE/server.log" 2>&1 &
pids+=($!)
wait_for "$URL/readyz" 60 || die "the server did not start; see $STATE/server.log"

for host in demo/hosts/*.toml; do
  name="$(basename "$host" .toml)"
  token=""
  if [ ! -s "$STATE/agents/$name.credential" ]; then
    token="$("$SERVER_BIN" --config demo/tessera.toml create-join-token --description "demo host $name" --ttl-minutes 10 2>>"$STATE/server.log")"
  fi
  # The token goes in the environment, not on the command line (visible in ps).
  TESSERA_JOIN_TOKEN="$token" "$AGENT_BIN" --server "$URL" --backend sim --sim-host "$host" \
    --state-dir "$STATE/agents" >"$STATE/agent-$name.log" 2>&1 &
  pids+=($!)
done

cat <<MSG

  Tessera is running at  $URL

  Sign in with any of these (password: tessera-demo):
    alice   platform admin (Fleet, Join tokens)
    bob     member of Vision Research
    carol   tenant admin of Vision Research
    dave    member of Language Models
    erin    tenant admin of Language Models

  Simulated hosts: gpu-h100-01 (8× H100 MIG), gpu-a100-01 (8× A100-40GB; GPU 7 runs hot), gpu-a30-01 (2× A30, MPS), gpu-l4-01 (4× L4)
  Logs: $STATE/*.log        Stop: Ctrl-C

MSG
rc=0
wait -n "${pids[@]}" || rc=$?
# Ctrl-C reaches every process of the group; they exit 0 (or by the signal).
if [ "$stopping" = 0 ] && [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; then
  log "a process failed (exit $rc); see the logs in $STATE"
fi
