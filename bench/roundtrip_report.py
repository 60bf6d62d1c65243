#!/usr/bin/env python3
"""Report of the round-trip benchmark (issue 17, items 2 and 3's decoder axis), from the JSON that
`cargo bench -p mooncake-reference --bench roundtrip` writes (MOONCAKE_BENCH_JSON): the targets table, the
one-decoder latencies, throughput against the number of concurrent decoders with its fit and knee, and one
SVG per load generator (round trips per second against decoders, log-log, the floor, the Rust prefiller and
the Python peer, each with the closed-loop fit `min(b·K, plateau)`).

The fit: with K decoders each keeping one pull in flight, throughput is K / (round-trip time). While nothing
is saturated the round trip stays what one decoder sees and throughput grows linearly, X = b·K (b = 1 / the
one-decoder round trip); once the server's or the load generator's CPU is saturated it stays at a plateau.
`b` is fitted (least squares in relative error, through the origin) over the levels still within 25% of
linear; the plateau is the highest throughput; the knee is where the two lines meet, K* = plateau / b.

usage: roundtrip_report.py RESULTS_JSON SVG_DIR SVG_LINK_PREFIX  (Markdown on standard output; the run's
machine, commit and date come from the environment: BENCH_CPU, BENCH_COMMIT, BENCH_DATE, BENCH_LOAD_BEFORE)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_plot import svg  # noqa: E402

SERVERS = [("floor", "libzmq ROUTER floor", "#888888"), ("rust", "Rust prefiller", "#1f77b4"),
           ("python", "Python test peer", "#d62728")]
# Issue 17, item 2.
FLOOR_FACTOR = 2.0
PYTHON_FACTOR = 5.0
CAPACITY_LEVEL = 64
CAPACITY = 50_000
# A level is on the linear part while its throughput per decoder is at least this share of one decoder's.
LINEAR_SHARE = 0.75


def series(rows, server, generator):
    pts = sorted((r["decoders"], r) for r in rows if r["server"] == server and r["generator"] == generator)
    return [r for _, r in pts]


def fit_closed_loop(pts):
    """pts: rows of one series. Returns (b, linear levels, plateau row, knee K*, mean relative residual)."""
    x1 = pts[0]["rate"] / pts[0]["decoders"]
    linear = [r for r in pts if r["rate"] / r["decoders"] >= LINEAR_SHARE * x1]
    # Only a prefix counts: once a level falls off the line the later ones are past the knee.
    prefix = []
    for r in pts:
        if r not in linear:
            break
        prefix.append(r)
    ks = [r["decoders"] for r in prefix]
    xs = [r["rate"] for r in prefix]
    # Minimise sum(((x - b k) / x)^2): b = sum(k / x) / sum(k^2 / x^2).
    b = sum(k / x for k, x in zip(ks, xs)) / sum((k / x) ** 2 for k, x in zip(ks, xs))
    resid = sum(abs(x - b * k) / x for k, x in zip(ks, xs)) / len(ks)
    top = max(pts, key=lambda r: r["rate"])
    return b, prefix, top, top["rate"] / b, resid


def fmt_rate(x):
    return f"{x:,.0f}"


def main():
    path, svg_dir, link = sys.argv[1], sys.argv[2], sys.argv[3]
    doc = json.load(open(path))
    rows = doc["rows"]
    generators = []
    for r in rows:
        if (r["generator"], r["generator_name"]) not in generators:
            generators.append((r["generator"], r["generator_name"]))
    have = {(r["server"], r["generator"], r["decoders"]): r for r in rows}
    md = []
    env = os.environ.get
    md.append(f"Run of {env('BENCH_DATE', '?')}, commit `{env('BENCH_COMMIT', '?')}`: {doc['cores']} cores "
              f"({env('BENCH_CPU', '?')}), {doc['placement']}; load average (1, 5, 15 min) "
              f"{env('BENCH_LOAD_BEFORE', doc['load_start'])} before the run, {doc['load_end']} at its end; "
              f"about {doc['pulls_per_level']:,} round trips per level, server and generator; "
              f"{doc['seconds']:.0f} s.")
    md.append("")

    # ---- targets ----
    md.append("### Targets (issue 17, item 2)")
    md.append("")
    bounds = []
    md.append("| target | load generator | measured | threshold | met |")
    md.append("| --- | --- | ---: | ---: | --- |")
    for g, gname in generators:
        f1, r1, p1 = (have.get((s, g, 1)) for s in ("floor", "rust", "python"))
        if f1 and r1:
            ratio = r1["p50_us"] / f1["p50_us"]
            md.append(f"| one decoder: round trip p50 within {FLOOR_FACTOR:g}× the floor's | {gname} | "
                      f"{r1['p50_us']:.1f} µs = {ratio:.2f}× ({f1['p50_us']:.1f} µs) | ≤ {FLOOR_FACTOR:g}× | "
                      f"{'yes' if ratio <= FLOOR_FACTOR else 'no'} |")
        if r1 and p1:
            ratio = r1["rate"] / p1["rate"]
            md.append(f"| one decoder: round trips/s against the Python peer | {gname} | "
                      f"{fmt_rate(r1['rate'])} / {fmt_rate(p1['rate'])} = {ratio:.2f}× | ≥ {PYTHON_FACTOR:g}× | "
                      f"{'yes' if ratio >= PYTHON_FACTOR else 'no'} |")
            # One decoder is ping-pong: the generator's own CPU per round trip is in every round trip, so even
            # a server that cost nothing could not go faster than this.
            bound = 1e6 / r1["generator_cpu_us"]
            bounds.append(f"- {gname}: the generator spends {r1['generator_cpu_us']:.0f} µs of CPU on each round "
                          f"trip, so a server that cost nothing would reach at most {fmt_rate(bound)} round trips/s "
                          f"= {bound / p1['rate']:.1f}× the Python peer; the Rust prefiller spends "
                          f"{r1['cpu_us']:.0f} µs (the Python peer {p1['cpu_us']:.0f} µs, the floor "
                          f"{f1['cpu_us']:.0f} µs)." if f1 else "")
        rc = have.get(("rust", g, CAPACITY_LEVEL))
        if rc:
            md.append(f"| {CAPACITY_LEVEL} decoders: round trips/s | {gname} | {fmt_rate(rc['rate'])} | "
                      f"≥ {fmt_rate(CAPACITY)} | {'yes' if rc['rate'] >= CAPACITY else 'no'} |")
            implied = 1e6 / rc["cpu_us"]
            md.append(f"| {CAPACITY_LEVEL} decoders: capacity its CPU per round trip allows, 10⁶ / "
                      f"{rc['cpu_us']:.1f} µs (information) | {gname} | {fmt_rate(implied)} | "
                      f"(≥ {fmt_rate(CAPACITY)}) | ({'yes' if implied >= CAPACITY else 'no'}) |")
    md.append("")
    if bounds:
        md.append("What one decoder can show at best on this machine:")
        md.append("")
        md.extend(b for b in bounds if b)
        md.append("")

    # ---- one decoder ----
    md.append("### One decoder: what a user waits for")
    md.append("")
    md.append("| load generator | server | round trips/s | p50 | p99 | mean | server CPU per round trip | "
              "generator CPU per round trip | server waiting for a CPU per round trip | generator waiting |")
    md.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for g, gname in generators:
        for s, sname, _ in SERVERS:
            r = have.get((s, g, 1))
            if r:
                # Older result files have no scheduler wait.
                wait = [f"{r[k]:.1f} µs" if k in r else "–" for k in ("wait_us", "generator_wait_us")]
                md.append(f"| {gname} | {sname} | {fmt_rate(r['rate'])} | {r['p50_us']:.1f} µs | {r['p99_us']:.1f} µs | "
                          f"{r['mean_us']:.1f} µs | {r['cpu_us']:.1f} µs | {r['generator_cpu_us']:.1f} µs | "
                          f"{wait[0]} | {wait[1]} |")
    md.append("")
    md.append("Waiting for a CPU is the time the process's threads were runnable but not running "
              "(`/proc/PID/task/*/schedstat`, second field), per round trip: with one decoder every round trip "
              "waits for the server, so the mean's excess over the p50 that this explains is the scheduler's, "
              "not the server's code (a woken thread can wait for the next scheduler tick, 4 ms at 250 Hz, "
              "before a task already running on its CPU is preempted).")
    md.append("")

    # ---- decoders axis ----
    md.append("### Throughput against concurrent decoders")
    md.append("")
    for g, gname in generators:
        fits, plotted = {}, []
        notes = []
        for s, sname, colour in SERVERS:
            pts = series(rows, s, g)
            if not pts:
                continue
            plotted.append((sname, colour, [(r["decoders"], r["rate"]) for r in pts]))
            if pts[0]["decoders"] != 1:
                continue
            b, prefix, top, knee, resid = fit_closed_loop(pts)
            fits[sname] = (lambda x, b=b, top=top["rate"]: min(b * x, top))
            server_share = top["cpu_us"] * top["rate"] / 1e6
            gen_share = top["generator_cpu_us"] * top["rate"] / 1e6
            if server_share >= 0.8:
                why = f"the server's CPU is the limit ({server_share:.0%} busy at the plateau)"
            elif gen_share >= 0.8:
                why = (f"the load generator's CPU is the limit ({gen_share:.0%} busy at the plateau; "
                       f"the server {server_share:.0%})")
            else:
                why = (f"neither pinned CPU is saturated at the plateau (server {server_share:.0%}, "
                       f"generator {gen_share:.0%} busy): the rest is waiting — wake-ups, and the other "
                       "work on the machine")
            lin = ", ".join(str(r["decoders"]) for r in prefix)
            notes.append(f"- {sname}: linear over K = {lin} with b = {fmt_rate(b)} round trips/s per decoder "
                         f"(a {1e6 / b:.0f} µs round trip; mean relative residual {resid:.0%}); plateau "
                         f"{fmt_rate(top['rate'])}/s (at K = {top['decoders']}); knee K* = {knee:.1f}; {why}.")
        name = f"roundtrip-decoders-{g}.svg"
        svg(f"Round trips through a prefiller: {gname}", "concurrent decoders", "round trips per second",
            plotted, os.path.join(svg_dir, name), fits, "dashed: min(b·K, plateau)")
        md.append(f"#### {gname}")
        md.append("")
        md.append(f"![round trips per second against decoders]({link}{name})")
        md.append("")
        md.append("| decoders | floor: round trips/s | p50 | p99 | Rust: round trips/s | p50 | p99 | CPU | "
                  "Python: round trips/s | p50 | p99 | CPU | Rust ÷ Python | Rust p50 ÷ floor p50 |")
        md.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        levels = sorted({r["decoders"] for r in rows if r["generator"] == g})
        for k in levels:
            f, r, p = (have.get((s, g, k)) for s in ("floor", "rust", "python"))

            def cells(x, cpu=True):
                if not x:
                    return ["–"] * (4 if cpu else 3)
                c = [fmt_rate(x["rate"]), f"{x['p50_us']:.0f} µs", f"{x['p99_us']:.0f} µs"]
                return c + ([f"{x['cpu_us']:.1f} µs"] if cpu else [])

            vs_py = f"{r['rate'] / p['rate']:.2f}×" if r and p else "–"
            vs_floor = f"{r['p50_us'] / f['p50_us']:.2f}×" if r and f else "–"
            md.append("| " + " | ".join([str(k)] + cells(f, False) + cells(r) + cells(p) + [vs_py, vs_floor]) + " |")
        md.append("")
        md.append("Fits (`X = min(b·K, plateau)`):")
        md.append("")
        md.extend(notes)
        md.append("")
    print("\n".join(md))


if __name__ == "__main__":
    main()
