#!/usr/bin/env bash
# A read-only check of a real GPU host against what Tessera assumes, for the
# day a machine with a GPU is at hand (docs/hardware/README.md). It never
# changes MIG mode, compute mode, clocks or any GPU state: it only lists.
# Under 5 minutes. Prints one JSON report on stdout (and writes it to $1 when
# given).
#
#   scripts/hw-check.sh [REPORT.json]
#
# The agent binary: $TESSERA_AGENT, else target/{release,debug}/tessera-agent
# under $CARGO_TARGET_DIR or the clone (build it where crates can be fetched
# and carry it: the check itself needs no network).
set -uo pipefail
cd "$(dirname "$0")/.."

agent="${TESSERA_AGENT:-}"
if [ -z "$agent" ]; then
  for c in "${CARGO_TARGET_DIR:-$HOME/.cache/tessera/target}"/{release,debug}/tessera-agent target/{release,debug}/tessera-agent; do
    if [ -x "$c" ]; then agent="$c"; break; fi
  done
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# Each listing goes to its own file; a command that is missing or fails is
# recorded as such, never fatal.
run() {
  local name="$1"; shift
  if timeout 60 "$@" >"$scratch/$name.out" 2>"$scratch/$name.err"; then
    echo 0 >"$scratch/$name.rc"
  else
    echo $? >"$scratch/$name.rc"
  fi
}

run smi_gpus nvidia-smi --query-gpu=index,name,uuid,memory.total,mig.mode.current,compute_mode,driver_version,pci.bus_id --format=csv,noheader,nounits
run smi_apps nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory,process_name --format=csv,noheader,nounits
run smi_lgip nvidia-smi mig -lgip
run smi_lgipp nvidia-smi mig -lgipp
run smi_lgi nvidia-smi mig -lgi
run smi_lci nvidia-smi mig -lci
run smi_topo nvidia-smi topo -m
if [ -n "$agent" ]; then
  run agent_probe "$agent" --backend nvml probe --rounds 3 --interval-ms 1000
else
  echo "no tessera-agent binary (set TESSERA_AGENT)" >"$scratch/agent_probe.err"
  echo 127 >"$scratch/agent_probe.rc"
fi
run mps_control sh -c 'command -v nvidia-cuda-mps-control'

python3 - "$scratch" "${1:-}" <<'PY'
import json, os, re, sys, datetime, platform, subprocess
d, out = sys.argv[1], sys.argv[2]
def part(name):
    rd = lambda ext: open(os.path.join(d, f"{name}.{ext}")).read() if os.path.exists(os.path.join(d, f"{name}.{ext}")) else ""
    return {"rc": int(rd("rc").strip() or 1), "stdout": rd("out"), "stderr": rd("err").strip()}
raw = {n: part(n) for n in ["smi_gpus", "smi_apps", "smi_lgip", "smi_lgipp", "smi_lgi", "smi_lci", "smi_topo", "agent_probe", "mps_control"]}
gpus = []
for line in raw["smi_gpus"]["stdout"].splitlines():
    f = [x.strip() for x in line.split(",")]
    if len(f) >= 8:
        gpus.append({"index": int(f[0]), "name": f[1], "uuid": f[2], "memory_mib": int(float(f[3])),
                     "mig_mode": f[4], "compute_mode": f[5], "driver": f[6], "bus_id": f[7]})
probe = None
if raw["agent_probe"]["rc"] == 0:
    try:
        probe = json.loads(raw["agent_probe"]["stdout"])
    except ValueError:
        probe = None
# MIG profiles the driver offers, per GPU (rows of `nvidia-smi mig -lgip`).
offered = {}
for line in raw["smi_lgip"]["stdout"].splitlines():
    m = re.match(r"\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)", line)
    if m:
        offered.setdefault(int(m.group(1)), set()).add(m.group(2))
findings = []
checks = []
for g in gpus:
    c = {"index": g["index"], "name": g["name"]}
    cat = None
    if probe:
        cat = next((x for x in probe.get("catalogue", []) if x["index"] == g["index"]), None)
    if cat:
        model = cat["model"]
        c["catalogue_model"] = model["name"]
        if model.get("generic"):
            findings.append(f"GPU {g['index']} ({g['name']}) is not in the catalogue: placed as a generic whole GPU")
        if model.get("mig") and g["index"] in offered:
            ours = {p["name"] for p in model["mig"]["profiles"]}
            theirs = offered[g["index"]]
            c["mig_profiles_missing_in_catalogue"] = sorted(theirs - ours)
            c["mig_profiles_not_offered"] = sorted(ours - theirs)
            if theirs != ours:
                findings.append(f"GPU {g['index']}: MIG profiles differ from the catalogue: driver-only {sorted(theirs - ours)}, catalogue-only {sorted(ours - theirs)}")
        c["gpm_expected"] = cat.get("gpm_expected")
    if probe:
        rounds = probe.get("rounds", [])
        last = next((s for s in (rounds[-1]["gpus"] if rounds else []) if s.get("uuid") == g["uuid"]), None)
        if last is None:
            findings.append(f"GPU {g['index']}: no telemetry through the agent's NVML backend")
        else:
            c["util_pct"] = last.get("util_pct")
            c["instances"] = last.get("instances", [])
            measured = [i for i in c["instances"] if i.get("util_pct") is not None]
            c["gpm_measured"] = bool(measured) if c["instances"] else None
            if g["mig_mode"] == "Enabled" and last.get("util_pct") is not None:
                findings.append(f"GPU {g['index']}: NVML reported whole-GPU utilisation in MIG mode (documented as not supported)")
            if c["instances"] and c.get("gpm_expected") is not None and c["gpm_measured"] != c["gpm_expected"]:
                findings.append(f"GPU {g['index']}: per-instance activity {'measured' if c['gpm_measured'] else 'missing'}, the catalogue expects GPM {'on' if c['gpm_expected'] else 'off'}")
    checks.append(c)
if not gpus:
    findings.append("nvidia-smi listed no GPU")
if probe is None:
    findings.append("the agent's NVML probe did not run: " + (raw["agent_probe"]["stderr"][:300] or "no output"))
def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
report = {
    "taken_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "host": platform.node(),
    "commit": commit(),
    "read_only": True,
    "gpus": gpus,
    "checks": checks,
    "findings": findings,
    "processes": raw["smi_apps"]["stdout"].splitlines(),
    "mps_control_installed": raw["mps_control"]["rc"] == 0,
    "agent_probe": probe,
    "raw": {k: v for k, v in raw.items() if k != "agent_probe"},
}
text = json.dumps(report, indent=2)
print(text)
if out:
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    open(out, "w").write(text + "\n")
PY
