# Shared by demo.sh, test.sh and bench.sh. Source it from the repository root.
# Installs what is missing (idempotent, quiet when everything is there).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# A target directory outside the clone, so fresh clones (and CI) reuse builds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tessera/target}"
export PATH="$HOME/.cargo/bin:$ROOT/end2end/node_modules/.bin:$PATH"
# Where cargo-leptos puts the site (relative to the workspace root).
export SITE_ROOT="$ROOT/target/site"

WASM_BINDGEN_VERSION="0.2.130"
CARGO_LEPTOS_VERSION="0.3.10"

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31merror:\033[0m %s\n' "$*" >&2; exit 1; }

ensure_tools() {
  command -v cargo >/dev/null || die "cargo is required (https://rustup.rs)"
  command -v node >/dev/null || die "node (20+) and npm are required"
  if ! rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown; then
    log "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
  if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
    log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (once, a few minutes)"
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
  fi
  if [ "$(cargo leptos --version 2>/dev/null | awk '{print $2}')" != "$CARGO_LEPTOS_VERSION" ]; then
    log "installing cargo-leptos $CARGO_LEPTOS_VERSION (once, ~12 minutes)"
    cargo install cargo-leptos --version "$CARGO_LEPTOS_VERSION" --locked
  fi
  if [ ! -x end2end/node_modules/.bin/wasm-opt ] || [ ! -d end2end/node_modules/oidc-provider ] \
     || [ end2end/package-lock.json -nt end2end/node_modules/.package-lock.json ]; then
    log "installing npm packages (oidc-provider, playwright-core, binaryen)"
    (cd end2end && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

ensure_chromium() {
  if [ ! -x /usr/bin/chromium ]; then
    log "installing Debian's chromium"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
  fi
}

build_release() {
  log "building the server and the WASM bundle (cargo leptos build --release)"
  cargo leptos build --release
  log "building the agent"
  cargo build --release -p tessera-agent
}

# Waits until URL answers 2xx, up to $2 seconds.
wait_for() {
  local url="$1" secs="${2:-60}" i=0
  until curl -fsS -o /dev/null "$url" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt $((secs * 5)) ] && return 1
    sleep 0.2
  done
}
