#!/usr/bin/env python3
"""Renders docs/benchmarks.md from the recorded runs in docs/benchmarks/results.

Each record (written by scripts/bench-record.py, which `make bench` and its
siblings pipe every benchmark through) carries its date, machine, commit and
command; the page shows them beside the figures, and nothing else changes
the page. `--check` fails when docs/benchmarks.md is not what the records
render (run by `make test`, so the page cannot drift from its records).

    scripts/bench-page.py [--check]
"""
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "benchmarks", "results")
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")


def get(doc, path):
    """The value at a dotted path (`a.b`, `a[0].b`), or None."""
    cur = doc
    for part in path.replace("[", ".[").split("."):
        if cur is None:
            return None
        if part.startswith("["):
            i = int(part[1:-1])
            cur = cur[i] if isinstance(cur, list) and i < len(cur) else None
        else:
            cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def fmt(value, kind):
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if kind == "pct":
        return f"{value * 100:.2f} %"
    if kind == "pct1":
        return f"{value * 100:.1f} %"
    if kind == "int":
        return f"{round(value):,}"
    if kind == "f1":
        return f"{value:,.1f}"
    if kind == "f2":
        return f"{value:,.2f}"
    if kind == "f3":
        return f"{value:.3f}"
    if kind == "ratio":
        return f"{value:.4f}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, list) and value and all(
        isinstance(x, list) and x and isinstance(x[0], str) for x in value
    ):
        # [name, figure, figure, ...] per row: "name a / b; ..."
        return "; ".join(
            x[0] + " " + " / ".join(fmt(v, "f2") for v in x[1:]) for x in value
        )
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(", ", ": "))
    return str(value)


def leaves(doc, prefix=""):
    """Scalar leaves of `doc` as (path, value), in order."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(doc, list) and doc and all(isinstance(x, dict) for x in doc):
        for i, v in enumerate(doc):
            yield from leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix, doc


# Each section: the records of `bench`, how they were made, and a table.
# `columns`: (header, path, format) over every result document, one row
# each ("run" is the record's run name); `pivot`: rows by one path, columns
# by another, cells from a third; `figures`: every scalar of each run's one
# document, a column per run.
SECTIONS = [
    {
        "bench": "placement-traces",
        "title": "Placement: the public Alibaba traces",
        "make": "make bench-traces",
        "text": "GPU allocation ratio after replaying each openb trace (`../shared/openb`) at "
        "130 % inflation, mean over seeds 42–51 (FGD's seeds); higher is better. \"FGD (paper)\" "
        "is the figure FGD's authors publish for the same trace (`docs/benchmarks/fgd-paper.json`). "
        "The policies are described in [placement.md](placement.md).",
        "pivot": {
            "row": ("trace", "trace"),
            "col": "report.policy",
            "cell": ("report.gpu_allocation_ratio", "pct"),
            "reference": ("FGD (paper)", "fgd-paper.json"),
        },
    },
    {
        "bench": "placement",
        "title": "Placement: synthetic fleets",
        "make": "make bench",
        "text": "Each policy on a synthetic fleet of 1,000 hosts, 5 seeds (`placement-bench --synthetic 1000`), "
        "with and without MIG, and pack on 2,000 hosts (about 10,000 GPUs, 3 seeds); decisions timed on one core.",
        "columns": [
            ("policy", "policy", None),
            ("MIG", "mig", None),
            ("GPUs", "gpus", "int"),
            ("allocation ratio", "gpu_allocation_ratio", "pct"),
            ("± (seeds)", "std.gpu_allocation_ratio", "pct"),
            ("failed", "failed", "f1"),
            ("fragmented", "fragmentation", "pct"),
            ("decisions/s", "placements_per_s", "int"),
            ("decision p50 µs", "decision_us_p50", "f1"),
            ("decision p99 µs", "decision_us_p99", "f1"),
        ],
    },
    {
        "bench": "queue",
        "title": "Queue replay",
        "make": "make bench-queue",
        "text": "A discrete-event replay of the queue disciplines (FIFO, backfill, with and without "
        "reservations) on 32 hosts of 8 GPUs, 5,000 jobs, 5 seeds, at three offered loads "
        "(`queue-sim`). Waits in hours.",
        "columns": [
            ("load", "@run", None),
            ("discipline", "variant", None),
            ("allocation ratio", "allocation_ratio", "pct1"),
            ("wait p50", "wait_p50_h", "f2"),
            ("wait p95", "wait_p95_h", "f2"),
            ("1-GPU p95", "small_wait_p95_h", "f2"),
            ("8-GPU p95", "large_wait_p95_h", "f2"),
            ("max wait", "max_wait_h", "f2"),
            ("Jain fairness", "jain_fairness", "f3"),
            ("never started", "never_started", "int"),
        ],
    },
    {
        "bench": "qos",
        "title": "QoS replay",
        "make": "make bench-queue",
        "text": "Hard quotas against QoS classes with preemption, and with idle reclaim "
        "(`queue-sim --qos`, 16 hosts, 3,000 jobs, 3 seeds). Waits per class in hours (p50, p95).",
        "columns": [
            ("load", "@run", None),
            ("policy", "variant", None),
            ("allocation ratio", "allocation_ratio", "pct1"),
            ("busy ratio", "busy_ratio", "pct1"),
            ("waits per class", "wait_h", None),
            ("preemptions", "preemptions", "int"),
            ("lost GPU-h", "lost_gpu_hours", "f1"),
            ("reclaimed GPU-h", "reclaimed_gpu_hours", "f1"),
            ("never started", "never_started", "int"),
        ],
    },
    {
        "bench": "rightsize",
        "title": "Right-sizing replay",
        "make": "make bench-rightsize",
        "text": "1,000 seeded slices on H100s, held as teams ask (mostly whole GPUs and large MIG "
        "instances), each running one of the simulator's workload profiles, measured per minute "
        "for a week and advised against four pools (MIG, whole GPUs, MPS, 4 time-sliced replicas) "
        "(`rightsize-sim`). GPU-hours a month by the share model; *undersized*: advised shapes "
        "that the same slice's next week would have outgrown.",
        "columns": [
            ("profile", "variant", None),
            ("slices", "slices", "int"),
            ("held GPU-h / month", "held_gpu_hours_month", "f1"),
            ("freed GPU-h / month", "freed_gpu_hours_month", "f1"),
            ("freed", "freed_ratio", "pct1"),
            ("advised smaller", "smaller", "int"),
            ("undersized next week", "undersized_next_week", "int"),
        ],
    },
    {
        "bench": "slices",
        "title": "Slices: request → active, and admissions per second",
        "make": "make bench-slices",
        "text": "The release server with simulated hosts (8 H100s each, 200 ms of agent latency): "
        "request → active latency of single requests, then 1,000 admissions through the REST API "
        "with 16 and 64 concurrent clients.",
        "figures": True,
    },
    {
        "bench": "reads",
        "title": "Reads: the authenticated list",
        "make": "make bench-reads",
        "text": "The authenticated allocation list at full speed (`oha`), beside an axum hello-world "
        "and `/healthz` in the same run on the same machine.",
        "figures": True,
    },
    {
        "bench": "load",
        "title": "Load: listing and creating at a fixed rate",
        "make": "make bench-load",
        "text": "50 lists and 5 creations a second for two minutes while 100 simulated hosts report; "
        "zero errors expected.",
        "figures": True,
    },
    {
        "bench": "ingest",
        "title": "Telemetry ingest",
        "make": "make bench-ingest",
        "text": "Telemetry of 1,000 hosts × 8 GPUs, one round every 10 s, stored and rolled up.",
        "figures": True,
    },
    {
        "bench": "idle",
        "title": "An idle fleet",
        "make": "make bench-idle",
        "text": "What an idle fleet of simulated hosts (observing every 5 s, polling every 15 s, "
        "telemetry every minute) costs the release server and the database over 60 s.",
        "figures": True,
    },
    {
        "bench": "pages",
        "title": "Admin pages at fleet size",
        "make": "make bench-pages",
        "text": "Service time (ms: median and p99 over 30 runs) of the fleet page, fleet insights "
        "and the audit log at 1,000 and 5,000 hosts.",
        "figures": True,
    },
]


def records(bench):
    out = []
    for path in sorted(glob.glob(os.path.join(RESULTS, f"{bench}--*.json"))):
        with open(path) as f:
            out.append(json.load(f))
    return out


def provenance(recs):
    seen = []
    for r in recs:
        key = (r["date"], r["machine"], r["commit"])
        if key not in seen:
            seen.append(key)
    return "; ".join(f"measured {d} on {m} at `{c}`" for d, m, c in seen)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def render_columns(section, recs):
    cols = section["columns"]
    rows = []
    for r in recs:
        for doc in r["results"]:
            rows.append([r["run"] if p == "@run" else fmt(get(doc, p), k) for _, p, k in cols])
    return table([h for h, _, _ in cols], rows)


def render_pivot(section, recs):
    pv = section["pivot"]
    (row_header, row_path), col_path, (cell_path, kind) = pv["row"], pv["col"], pv["cell"]
    grid, row_keys, col_keys = {}, [], []
    for r in recs:
        for doc in r["results"]:
            rk, ck = get(doc, row_path), get(doc, col_path)
            if rk not in row_keys:
                row_keys.append(rk)
            if ck not in col_keys:
                col_keys.append(ck)
            grid[(rk, ck)] = get(doc, cell_path)
    ref_header, ref = None, {}
    if "reference" in pv:
        ref_header, ref_file = pv["reference"]
        with open(os.path.join(ROOT, "docs", "benchmarks", ref_file)) as f:
            ref = json.load(f)["figures"]
    header = [row_header] + [str(c) for c in col_keys] + ([ref_header] if ref_header else [])
    rows = []
    for rk in row_keys:
        cells = [str(rk)] + [fmt(grid.get((rk, ck)), kind) for ck in col_keys]
        if ref_header:
            v = ref.get(rk)
            cells.append(f"{v:.2f} %" if v is not None else "—")
        rows.append(cells)
    return table(header, rows)


def render_figures(section, recs):
    runs = [(r["run"], r["results"][0]) for r in recs if r["results"]]
    paths = []
    for _, doc in runs:
        for p, _ in leaves(doc):
            if p not in paths:
                paths.append(p)
    rows = []
    for p in paths:
        vals = {run: v for run, doc in runs for q, v in leaves(doc) if q == p}
        rows.append([p] + [fmt(vals.get(run), None) for run, _ in runs])
    return table(["figure"] + [run for run, _ in runs], rows)


def render():
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by scripts/bench-page.py from docs/benchmarks/results; do not edit. -->",
        "",
        "What Tessera costs and how well it places, as measured. Every table is rendered from "
        "the records in [`benchmarks/results`](benchmarks/results), which the benchmark targets "
        "write (`scripts/bench-record.py`); each says when, on what machine and at which commit "
        "it was measured. Speed varies on shared machines: compare rows of one run. Figures "
        "measured before this page was generated are kept, unchanged, in "
        "[the archive](benchmarks/archive-2026-12.md).",
        "",
        "```sh",
        "make bench          # placement (synthetic and the Alibaba traces), queue, QoS, slices, reads, ingest",
        "make bench-traces   # placement on the public Alibaba traces only (about 10 minutes)",
        "make bench-queue    # the queue, QoS and right-sizing replays",
        "make bench-rightsize # the right-sizing replay alone",
        "make bench-slices   # request → active and admissions (TESSERA_BENCH_DATABASE_URL=postgres://... for PostgreSQL)",
        "make bench-reads    # the read path against an axum hello-world",
        "make bench-load     # fixed-rate load for TESSERA_LOAD_SECONDS (120)",
        "make bench-ingest   # telemetry ingest and rollups at 1,000 hosts",
        "make bench-idle     # an idle fleet of TESSERA_IDLE_HOSTS (1,000)",
        "make bench-pages    # admin pages at 1,000 and 5,000 hosts",
        "```",
        "",
        "Each target regenerates this page.",
        "",
    ]
    for s in SECTIONS:
        recs = records(s["bench"])
        out += [f"## {s['title']}", "", s["text"], ""]
        if not recs:
            out += [f"Not recorded yet: run `{s['make']}`.", ""]
            continue
        out += [provenance(recs) + f" (`{s['make']}`).", ""]
        if "columns" in s:
            out += render_columns(s, recs)
        elif "pivot" in s:
            out += render_pivot(s, recs)
        else:
            out += render_figures(s, recs)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main():
    page = render()
    if "--check" in sys.argv[1:]:
        with open(PAGE) as f:
            if f.read() != page:
                sys.exit(
                    "docs/benchmarks.md is not what docs/benchmarks/results renders: "
                    "run python3 scripts/bench-page.py (and do not edit the page by hand)"
                )
        return
    with open(PAGE, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
