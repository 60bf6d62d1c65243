#!/usr/bin/env python3
"""Plots and tables of the scale benchmark (issue 17, item 3), from the files scripts/scale-bench.sh leaves:
`rust.json` (bench/src/bin/scale.rs) and `msgspec.json` (bench/msgspec_bench.py over the same payloads).

For each axis (requests, KV-cache groups, registered regions; the FINISH reply's request ids) it writes one
SVG with decode time against the axis, log-log, for msgspec, the typed and the spec-driven Rust decoders,
each with its least-squares line `t = a + b·x` (fitted in relative error, drawn on the log scale), and one SVG
of the heap a decode holds at its peak. It prints a Markdown section: per point the times, bytes, heap and
the cost per wire byte, per series the fit and its R², and where the cost per byte moves by more than a
factor of 1.5 between neighbouring points (a knee), where it does.

No plotting library: the SVG is written by hand, so the script runs with the pinned test venv.

usage: scale_plot.py DIR OUT_SVG_DIR SVG_LINK_PREFIX
"""
import json
import math
import os
import sys

AXES = [
    ("requests", "MooncakeXferMetadata: requests (4 groups × 256 blocks each, 122 regions)", "requests"),
    ("groups", "MooncakeXferMetadata: KV-cache groups (64 requests × 256 blocks per group, 122 regions)", "groups"),
    ("regions", "MooncakeXferMetadata: registered regions (64 requests, 4 groups × 256 blocks)", "regions"),
    ("reply_requests", "MooncakeXferResponse (FINISH): request ids", "request ids"),
]
SERIES = [("msgspec", "#888888"), ("typed", "#1f77b4"), ("spec-driven", "#d62728")]


def fit(xs, ys):
    """Least squares y = a + b x in relative error (weights 1/y², so the small messages count as much as the
    large ones); returns (a, b, r2), r2 of the relative residuals."""
    w = [1 / (y * y) if y else 0.0 for y in ys]
    sw = sum(w)
    mx = sum(wi * x for wi, x in zip(w, xs)) / sw
    my = sum(wi * y for wi, y in zip(w, ys)) / sw
    sxx = sum(wi * (x - mx) ** 2 for wi, x in zip(w, xs))
    sxy = sum(wi * (x - mx) * (y - my) for wi, x, y in zip(w, xs, ys))
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum(wi * (y - my) ** 2 for wi, y in zip(w, ys))
    ss_res = sum(wi * (y - (a + b * x)) ** 2 for wi, x, y in zip(w, xs, ys))
    return a, b, (1 - ss_res / ss_tot) if ss_tot else 1.0


def fmt_t(s):
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.3g} µs"
    return f"{s * 1e9:.3g} ns"


def fmt_b(n):
    for unit, k in (("MB", 1e6), ("kB", 1e3)):
        if n >= k:
            return f"{n / k:.3g} {unit}"
    return f"{n} B"


def svg(title, xlabel, ylabel, series, path, fits=None, fit_label="dashed: t = a + b·x"):
    """series: [(name, colour, [(x, y)])]; log-log axes; fits: {name: (a, b) or a function x → y (None: not
    drawn there)} drawn as dashed lines, clipped to the plot."""
    w, h, l, r, t, b = 720, 420, 80, 170, 40, 50
    pts = [p for _, _, s in series for p in s if p[1] > 0]
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    lx0, lx1 = math.floor(math.log10(x0)), math.ceil(math.log10(x1))
    ly0, ly1 = math.floor(math.log10(y0)), math.ceil(math.log10(y1))
    if lx1 == lx0:
        lx1 += 1
    if ly1 == ly0:
        ly1 += 1

    def X(x):
        return l + (math.log10(x) - lx0) / (lx1 - lx0) * (w - l - r)

    def Y(y):
        return h - b - (math.log10(y) - ly0) / (ly1 - ly0) * (h - t - b)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
         f'<text x="{l + (w - l - r) / 2}" y="{h - 10}" text-anchor="middle">{xlabel} (log)</text>',
         f'<text x="15" y="{t + (h - t - b) / 2}" text-anchor="middle" transform="rotate(-90 15 {t + (h - t - b) / 2})">{ylabel} (log)</text>']
    for e in range(lx0, lx1 + 1):
        x = X(10 ** e)
        o.append(f'<line x1="{x:.1f}" y1="{t}" x2="{x:.1f}" y2="{h - b}" stroke="#eee"/>')
        o.append(f'<text x="{x:.1f}" y="{h - b + 15}" text-anchor="middle">{10 ** e:g}</text>')
    for e in range(ly0, ly1 + 1):
        y = Y(10 ** e)
        o.append(f'<line x1="{l}" y1="{y:.1f}" x2="{w - r}" y2="{y:.1f}" stroke="#eee"/>')
        o.append(f'<text x="{l - 5}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    o.append(f'<rect x="{l}" y="{t}" width="{w - l - r}" height="{h - t - b}" fill="none" stroke="#444"/>')
    for i, (name, colour, s) in enumerate(series):
        s = [p for p in s if p[1] > 0]
        if not s:
            continue
        if fits and name in fits:
            f = fits[name]
            model = f if callable(f) else (lambda x, a=f[0], bb=f[1]: a + bb * x)
            xs = [10 ** (math.log10(x0) + k * (math.log10(x1) - math.log10(x0)) / 40) for k in range(41)]
            line = [(x, model(x)) for x in xs]
            line = [(x, y) for x, y in line if y is not None and 10 ** ly0 <= y <= 10 ** ly1]
            if line:
                d = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in line)
                o.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-dasharray="4 3"/>')
        for x, y in s:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3.5" fill="{colour}"/>')
        d = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in s)
        o.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1"/>')
        o.append(f'<circle cx="{w - r + 15}" cy="{t + 15 + i * 18}" r="4" fill="{colour}"/>')
        o.append(f'<text x="{w - r + 25}" y="{t + 19 + i * 18}">{name}</text>')
    if fits:
        o.append(f'<text x="{w - r + 10}" y="{t + 25 + len(series) * 18}" fill="#555">{fit_label}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    d, out, link = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(out, exist_ok=True)
    rust = json.load(open(os.path.join(d, "rust.json")))
    ms = json.load(open(os.path.join(d, "msgspec.json")))["payloads"]
    md = []
    for axis, title, xlabel in AXES:
        rows = [r for r in rust if r["axis"] == axis]
        rows.sort(key=lambda r: r["x"])
        xs = [r["x"] for r in rows]
        times = {
            "msgspec": [ms[r["id"]]["decode"]["median_s"] for r in rows],
            "typed": [r["typed_median_s"] for r in rows],
            "spec-driven": [r["spec_median_s"] for r in rows],
        }
        fits = {k: fit(xs, v) for k, v in times.items()}
        svg(title, xlabel, "decode time, s", [(n, c, list(zip(xs, times[n]))) for n, c in SERIES],
            os.path.join(out, f"scale-{axis}-time.svg"), {k: (a, b) for k, (a, b, _) in fits.items()})
        heap = {
            "msgspec": [ms[r["id"]]["decode_peak_bytes"] for r in rows],
            "typed": [r["typed_peak_bytes"] for r in rows],
        }
        svg(title, xlabel, "peak heap of one decode, bytes", [(n, c, list(zip(xs, heap[n]))) for n, c in SERIES if n in heap],
            os.path.join(out, f"scale-{axis}-heap.svg"))
        md.append(f"#### {title}\n")
        md.append(f"![decode time]({link}scale-{axis}-time.svg) ![peak heap]({link}scale-{axis}-heap.svg)\n")
        md.append(f"| {xlabel} | wire bytes | msgspec | typed | spec-driven | typed ÷ msgspec | typed ns/byte | typed peak heap | msgspec peak heap |")
        md.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for i, r in enumerate(rows):
            m, ty, sp = times["msgspec"][i], times["typed"][i], times["spec-driven"][i]
            md.append(f"| {r['x']} | {r['wire_bytes']:,} | {fmt_t(m)} | {fmt_t(ty)} | {fmt_t(sp)} | {m / ty:.2f}× | "
                      f"{ty / r['wire_bytes'] * 1e9:.2f} | {fmt_b(r['typed_peak_bytes'])} | {fmt_b(heap['msgspec'][i])} |")
        md.append("")
        md.append("Fits `t = a + b·x` (least squares in relative error over the points; R² of the relative residuals):")
        md.append("")
        for name, (a, b, r2) in fits.items():
            md.append(f"- {name}: a = {fmt_t(max(a, 0.0)) if a >= 0 else '−' + fmt_t(-a)}, b = {fmt_t(b)} per {xlabel[:-1] if xlabel.endswith('s') else xlabel}, R² = {r2:.4f}")
        knees = []
        for name, v in times.items():
            per_byte = [t / r["wire_bytes"] for t, r in zip(v, rows)]
            for i in range(1, len(per_byte)):
                ratio = per_byte[i] / per_byte[i - 1]
                if (ratio > 1.5 or ratio < 1 / 1.5) and rows[i - 1]["wire_bytes"] >= 4096:
                    knees.append(f"{name} between {xlabel} {rows[i - 1]['x']} and {rows[i]['x']}: cost per byte ×{ratio:.2f}")
        md.append("- cost per wire byte, past the first 4 kB: " + ("; ".join(knees) if knees else "within a factor of 1.5 between neighbouring points for every series (no knee)"))
        md.append("")
    print("\n".join(md))


if __name__ == "__main__":
    main()
