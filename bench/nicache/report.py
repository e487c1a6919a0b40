#!/usr/bin/env python3
"""bench/nicache/run.sh's report: CSV -> Markdown table (stdout) and an SVG plot.

    report.py <csv> <svg path to write> <svg name to link from the Markdown>

CSV rows (run, c_percent, round, rps, requests, errors, sluice_hits, origin_requests, seconds,
origin_cpu_s, sluice_cpu_s, origin_queue):
  origin  wrk straight to the origin at cacheable fraction c
  sluice  wrk through Sluice at c, after the cacheable URLs were fetched once
  hit     pure-hit run through Sluice (c = 100%, warmed): Sluice's hit capacity
ideal(c) = min(O(c) / (1 - c), H), O(c) the median origin run at c, H the mean of the hit runs;
Sluice(c) is the median Sluice run at c.
Standard library only.
"""
import csv
import math
import statistics
import sys


def load(path):
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        for k in ("c_percent", "round", "requests", "errors", "sluice_hits", "origin_requests"):
            r[k] = int(r[k])
        for k in ("rps", "seconds", "origin_cpu_s", "sluice_cpu_s", "origin_queue"):
            r[k] = float(r[k])
    return rows


def analyse(rows):
    hits = [r["rps"] for r in rows if r["run"] == "hit"]
    h = sum(hits) / len(hits)
    levels = []
    for r in rows:
        if r["run"] == "sluice" and r["c_percent"] not in levels:
            levels.append(r["c_percent"])
    points = []
    for p in levels:
        orig = [r for r in rows if r["run"] == "origin" and r["c_percent"] == p]
        sl = [r for r in rows if r["run"] == "sluice" and r["c_percent"] == p]
        o = statistics.median(r["rps"] for r in orig)
        s = statistics.median(r["rps"] for r in sl)
        c = p / 100
        ideal = h if c >= 1 else min(o / (1 - c), h)
        requests = sum(r["requests"] for r in sl)
        points.append({
            "c": p,
            "origin": o,
            "origin_range": (min(r["rps"] for r in orig), max(r["rps"] for r in orig)),
            "sluice": s,
            "sluice_range": (min(r["rps"] for r in sl), max(r["rps"] for r in sl)),
            "ideal": ideal,
            "bound": "hit" if c >= 1 or o / (1 - c) >= h else "origin",
            "vs_ideal": s / ideal,
            "vs_origin": s / o,
            "hit_pct": 100 * sum(r["sluice_hits"] for r in sl) / requests,
            "origin_busy": sum(r["origin_requests"] for r in sl) / sum(r["seconds"] for r in sl),
            "errors": sum(r["errors"] for r in orig + sl),
            "busy_alone": 100 * sum(r["origin_cpu_s"] for r in orig) / sum(r["seconds"] for r in orig),
            "busy_sluice": 100 * sum(r["origin_cpu_s"] for r in sl) / sum(r["seconds"] for r in sl),
            "queue": statistics.mean(r["origin_queue"] for r in sl),
            "vs_ideal_cpu": None,
            "ms_per_req": 1000 * sum(r["origin_cpu_s"] for r in orig) / sum(r["origin_requests"] for r in orig),
        })
    for pt in points:
        # The ideal again, with the origin's capacity scaled to the CPU share it got during
        # Sluice's runs (meaningful when it had a queue all along, i.e. it was the bottleneck).
        c = pt["c"] / 100
        if c < 1 and pt["busy_alone"] > 0:
            o = pt["origin"] * pt["busy_sluice"] / pt["busy_alone"]
            pt["vs_ideal_cpu"] = pt["sluice"] / min(o / (1 - c), h)
        else:
            pt["vs_ideal_cpu"] = pt["vs_ideal"]
    return hits, h, points


def fmt(v):
    return f"{v:,.0f}"


def fmt_range(v, rng):
    if rng[0] == rng[1]:
        return fmt(v)
    return f"{fmt(v)} ({fmt(rng[0])}–{fmt(rng[1])})"


def markdown(hits, h, points, svg_name):
    out = []
    out.append("| c | origin alone req/s | Sluice req/s | ideal req/s | Sluice / ideal | Sluice / origin "
               "| hits | origin req/s in Sluice runs | origin CPU busy: alone / in Sluice runs | origin queue in Sluice runs "
               "| Sluice / ideal at the origin's CPU share |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pt in points:
        out.append(
            f"| {pt['c']}% | {fmt_range(pt['origin'], pt['origin_range'])} | {fmt_range(pt['sluice'], pt['sluice_range'])} | {fmt(pt['ideal'])} ({pt['bound']}) "
            f"| **{pt['vs_ideal']:.2f}** | {pt['vs_origin']:.1f}× | {pt['hit_pct']:.1f}% | {fmt(pt['origin_busy'])} "
            f"| {pt['busy_alone']:.0f}% / {pt['busy_sluice']:.0f}% | {pt['queue']:.1f} | {pt['vs_ideal_cpu']:.2f} |")
    out.append("")
    runs = ", ".join(fmt(x) for x in hits)
    out.append(f"Sluice hit capacity H = {fmt(h)} req/s (mean of the pure-hit runs before and after the sweep: {runs}). "
               "ideal(c) = min(O(c) / (1 − c), H), O(c) = the median origin-alone run at the same c; "
               "(origin) or (hit) says which bound is the smaller. "
               "Origin CPU busy: the origin's CPU seconds per wall second (it burns "
               f"{statistics.mean(p['ms_per_req'] for p in points):.2f} ms per response, HTTP included); "
               "origin req/s in Sluice runs: what the origin generated while wrk ran through Sluice (counted up to "
               "the moment the origin answers a stats request after wrk stops, so it includes the requests still "
               "queued there then: up to wrk's connection count); "
               "origin queue: mean number of requests waiting at or being generated by the origin during "
               "Sluice's runs (sampled every 0.25 s): above 1, the origin had work all the time. "
               "Sluice / ideal at the origin's CPU share: the same ratio with O(c) scaled by (origin CPU busy in "
               "Sluice runs) / (origin CPU busy alone), i.e. against what the origin could do with the CPU "
               "that other work on the machine left it (a diagnostic; the target is judged on Sluice / ideal).")
    worst = min(points, key=lambda p: p["vs_ideal"])
    best = max(points, key=lambda p: p["vs_origin"])
    errors = sum(p["errors"] for p in points)
    ok = worst["vs_ideal"] >= 0.9
    out.append("")
    out.append(f"- Sluice / ideal: lowest {worst['vs_ideal']:.2f} (at c = {worst['c']}%); target ≥ 0.9 everywhere: "
               f"**{'holds' if ok else 'does not hold'}** in this run.")
    worst_cpu = min(points, key=lambda p: p["vs_ideal_cpu"])
    out.append(f"- Sluice / ideal at the origin's CPU share: lowest {worst_cpu['vs_ideal_cpu']:.2f} (at c = {worst_cpu['c']}%).")
    out.append(f"- Sluice / origin alone: up to {best['vs_origin']:.1f}× (at c = {best['c']}%); NICache reached 6.8× at 100%.")
    out.append(f"- wrk errors (socket errors and non-2xx), all runs: {errors}.")
    out.append("")
    out.append(f"![throughput against the cacheable fraction]({svg_name})")
    return "\n".join(out)


def svg(points, h, path):
    W, H = 820, 440
    left, right, top, bottom = 80, 250, 40, 60
    pw, ph = W - left - right, H - top - bottom
    values = [v for p in points for v in (p["origin"], p["sluice"], p["ideal"])] + [h]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))

    def x(c):
        return left + pw * c / 100

    def y(v):
        return top + ph * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))

    e = []
    e.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             'font-family="sans-serif" font-size="12">')
    e.append(f'<rect width="{W}" height="{H}" fill="white"/>')
    e.append(f'<text x="{left + pw / 2}" y="22" text-anchor="middle" font-size="14">'
             'Throughput vs cacheable fraction (NICache figure 6 on Sluice)</text>')
    # grid and axes
    d = lo
    while d <= hi * 1.0001:
        for m in range(1, 10):
            v = d * m
            if v > hi * 1.0001:
                break
            major = m == 1
            e.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                     f'stroke="{"#ccc" if major else "#eee"}"/>')
            if major:
                label = f"{v:,.0f}"
                e.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{label}</text>')
        d *= 10
    for c in range(0, 101, 10):
        e.append(f'<line x1="{x(c):.1f}" x2="{x(c):.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        e.append(f'<text x="{x(c):.1f}" y="{top + ph + 16}" text-anchor="middle">{c}%</text>')
    e.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    e.append(f'<text x="{left + pw / 2}" y="{H - 18}" text-anchor="middle">cacheable fraction c of the requests</text>')
    e.append(f'<text transform="translate(18,{top + ph / 2}) rotate(-90)" text-anchor="middle">requests/s (log scale)</text>')
    series = [
        ("ideal min(O/(1−c), H)", "ideal", "#999", "6,4"),
        ("origin alone", "origin", "#d62728", ""),
        ("Sluice", "sluice", "#1f77b4", ""),
    ]
    # The ideal as a curve, with O the median origin-alone rate over all levels; the hollow
    # markers are each level's own ideal (its own O), the one the table's ratios use.
    o_all = statistics.median(p["origin"] for p in points)
    curve = []
    for k in range(0, 1001):
        c = k / 10
        curve.append(f"{x(c):.1f},{y(h if c >= 100 else min(o_all / (1 - c / 100), h)):.1f}")
    for i, (name, key, color, dash) in enumerate(series):
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        if key == "ideal":
            e.append(f'<polyline points="{" ".join(curve)}" fill="none" stroke="{color}" stroke-width="2"{dash_attr}/>')
            for p in points:
                e.append(f'<circle cx="{x(p["c"]):.1f}" cy="{y(p[key]):.1f}" r="3.5" fill="white" stroke="{color}" stroke-width="1.5"/>')
        else:
            pts = " ".join(f"{x(p['c']):.1f},{y(p[key]):.1f}" for p in points)
            e.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"{dash_attr}/>')
            for p in points:
                e.append(f'<circle cx="{x(p["c"]):.1f}" cy="{y(p[key]):.1f}" r="3.5" fill="{color}"/>')
        ly = top + 16 + 20 * i
        lx = left + pw + 14
        e.append(f'<line x1="{lx}" x2="{lx + 24}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2"{dash_attr}/>')
        e.append(f'<text x="{lx + 30}" y="{ly + 4}">{name}</text>')
    ly = top + 16 + 20 * len(series) + 10
    notes = [f"H (hit capacity) = {h:,.0f} req/s", f"O (median origin alone) = {o_all:,.0f} req/s",
             "hollow: each level's ideal", "(its own O, as in the table)"]
    for j, t in enumerate(notes):
        e.append(f'<text x="{left + pw + 14}" y="{ly + 16 * j}" fill="#555" font-size="11">{t}</text>')
    e.append("</svg>")
    open(path, "w").write("\n".join(e) + "\n")


def main():
    csv_path, svg_path, svg_name = sys.argv[1:4]
    hits, h, points = analyse(load(csv_path))
    svg(points, h, svg_path)
    print(markdown(hits, h, points, svg_name))


if __name__ == "__main__":
    main()
