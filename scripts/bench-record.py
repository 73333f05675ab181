#!/usr/bin/env python3
"""Records one benchmark run for the generated benchmark page.

Reads what a benchmark printed on stdin (one or more JSON documents, each on
one line or pretty-printed; other lines are passed through and ignored),
echoes it to stdout, and writes docs/benchmarks/results/<run>.json with the
date, the machine, the commit and the command, replacing the previous record
of the same run. `scripts/bench-page.py` renders docs/benchmarks.md from
those records.

    <benchmark> | scripts/bench-record.py BENCH RUN -- COMMAND...

BENCH names the page section (placement, queue, qos, slices, reads, load,
ingest, idle, pages); RUN names this run within it (e.g. `pack`,
`load-0.9`, `100-hosts`). A run that printed no JSON records nothing and
fails, so a broken benchmark is not mistaken for a measured one.
"""
import datetime
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "benchmarks", "results")


def documents(text):
    """Every top-level JSON object or array in `text`, in order."""
    decoder = json.JSONDecoder()
    out, i = [], 0
    while True:
        m = re.compile(r"^[ \t]*[\[{]", re.M).search(text, i)
        if not m:
            return out
        start = m.end() - 1
        try:
            doc, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            i = m.end()
            continue
        out.extend(doc if isinstance(doc, list) else [doc])
        i = end


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [l.split(":", 1)[1].strip() for l in f if l.startswith("model name")]
        if names:
            cpu = names[0]
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(l for l in f if l.startswith("MemTotal")).split()[1])
        mem_gib = round(kib / 1024 / 1024)
    except (OSError, StopIteration, ValueError):
        pass
    cores = os.cpu_count()
    return f"{cores} cores ({cpu}), {mem_gib} GiB" if mem_gib else f"{cores} cores ({cpu})"


def commit():
    def git(*args):
        return subprocess.run(
            ["git", "-C", ROOT, *args], capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + ("+changes" if dirty else "")


def main():
    argv = sys.argv[1:]
    if len(argv) < 2:
        sys.exit(__doc__)
    bench, run = argv[0], argv[1]
    command = " ".join(argv[3:]) if len(argv) > 2 and argv[2] == "--" else ""
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", bench) or not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", run):
        sys.exit("bench-record: BENCH and RUN are lower-case names (letters, digits, dots, dashes)")
    text = sys.stdin.read()
    sys.stdout.write(text)
    docs = documents(text)
    if not docs:
        sys.exit(f"bench-record: {bench}/{run} printed no JSON; nothing recorded")
    os.makedirs(RESULTS, exist_ok=True)
    record = {
        "bench": bench,
        "run": run,
        "date": datetime.date.today().isoformat(),
        "machine": os.environ.get("TESSERA_BENCH_MACHINE") or machine(),
        "commit": commit(),
        "command": command,
        "results": docs,
    }
    path = os.path.join(RESULTS, f"{bench}--{run}.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"bench-record: wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
