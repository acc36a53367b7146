#!/usr/bin/env python3
"""Ratios of alternating pairs: bench/pairs.py OUTDIR reads the <i>-old.json and
<i>-new.json files bench/shapes.sh pairs wrote and prints, per phase, the median
CPU per order (system) and orders/s of each side, the new/old ratio of every
pair and its median, then the median CPU per order by component, and each run's
load averages. A pair whose phase is incomplete on either side is left out."""
import json, glob, sys, statistics, os
d = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(d, "*-*.json"))):
    i, side = os.path.basename(f)[:-5].split("-")
    try:
        runs.setdefault(int(i), {})[side] = json.load(open(f))
    except ValueError:
        pass  # a run still writing
phases = ["place", "pay", "cancel", "expire"]
print(f"{'phase':8} {'pairs':5} {'cpu old':>8} {'cpu new':>8} {'ratio':>6} (per pair)   {'o/s old':>8} {'o/s new':>8} {'ratio':>6}")
for ph in phases:
    co, cn, ro, rn, ratios, tput = [], [], [], [], [], []
    for i, p in sorted(runs.items()):
        if "old" not in p or "new" not in p: continue
        def get(r):
            for x in r.get("phases", []):
                if x["name"] == ph and x.get("complete"):
                    return x
        a, b = get(p["old"]), get(p["new"])
        if not a or not b: continue
        co.append(a["cpu_ms_per_order"]["system"]); cn.append(b["cpu_ms_per_order"]["system"])
        ro.append(a["orders_per_second"]); rn.append(b["orders_per_second"])
        ratios.append(cn[-1]/co[-1]); tput.append(rn[-1]/ro[-1])
    if not co: continue
    print(f"{ph:8} {len(co):5} {statistics.median(co):8.2f} {statistics.median(cn):8.2f} {statistics.median(ratios):6.2f} {' '.join(f'{r:.2f}' for r in ratios)}   {statistics.median(ro):8.1f} {statistics.median(rn):8.1f} {statistics.median(tput):6.2f}")
# components for the topology
comp = {}
for ph in phases:
    for side in ("old", "new"):
        vals = {}
        for i, p in runs.items():
            r = p.get(side)
            if not r: continue
            for x in r.get("phases", []):
                if x["name"] == ph and x.get("complete"):
                    for k, v in x["cpu_ms_per_order"].items():
                        vals.setdefault(k, []).append(v)
        comp[(ph, side)] = {k: statistics.median(v) for k, v in vals.items()}
for ph in phases:
    o, n = comp.get((ph, "old"), {}), comp.get((ph, "new"), {})
    print(ph, " ".join(f"{k} {o.get(k,0):.2f}->{n.get(k,0):.2f}" for k in sorted(o)))
loads = []
for i, p in sorted(runs.items()):
    for side in ("old", "new"):
        r = p.get(side)
        if r:
            loads.append((i, side, [x["load_average_before"] for x in r["phases"]]))
for l in loads: print("load", *l)
