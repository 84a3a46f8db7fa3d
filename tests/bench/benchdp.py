"""tests/bench/benchdp.py: the part `dp` of tests/bench/render (guest/dp.sh): does the fix
cost anything on the data path? rxe-verify's WRITE and READ bandwidth over the same MR on
stock rdma_rxe and rxe-kvfix, in ABBA rounds (pair p = rounds 2p-1 and 2p), in the guest
as booted (tag dp) and while the fragmenter holds (tag dpfrag). Each run's page array
allocator is read from its /proc/vmallocinfo watch (TAG-rNN-MOD-SIZE.vmalloc), never
assumed; the pairs are grouped by the allocator that served rxe-kvfix's array.

collect(d) -> the part's figures or None; verdict(ratios) decides one cell (pure: the
unit tests call it); targets(res) the page's target lines; section(res, p) the table.
"""
import glob
import json
import os
import re

from benchstats import pair_of, ratio_interval, size_bytes, size_text, stats

RESOLUTION = 0.05  # a cost below 5 % is what the bench cannot tell from none (its noise under TCG)
STATES = {"dp": "as booted", "dpfrag": "fragmented"}
MOD_NAME = {"stock": "stock", "fixed": "rxe-kvfix"}
RUN_RE = re.compile(r"(dp|dpfrag)-r(\d+)-(stock|fixed)-(\d+[KMG])(?:-split(\d+))?\.json$")


def verdict(ratios):
    """Paired ratios rxe-kvfix/stock of MiB/s -> the cell's decision from their geometric
    mean and its 95 % t-interval (benchstats.ratio_interval, as the registration table):
    'costs X %' when the whole interval is under 1.0; 'no measurable cost' when it reaches
    1.0 and its bottom is at or above 1 - RESOLUTION (any cost it allows is under 5 %);
    otherwise 'undecided at N pairs' (with fewer than two pairs, always), with the pairs
    the measured spread would need to decide against 1 - RESOLUTION."""
    iv = ratio_interval(ratios, 1.0 - RESOLUTION, at_least=True)
    n = iv["n"]
    d = {"n": n, "geomean": iv["geomean"], "lo": iv["lo"], "hi": iv["hi"], "pairs_needed": None,
         "at_limit": False}
    if n < 2:
        d["verdict"] = f"undecided at {n} pairs"
        d["why"] = "an interval needs two pairs"
    elif iv["hi"] < 1.0:
        d["verdict"] = f"costs {100 * (1 - iv['geomean']):.1f} %"
        d["why"] = (f"the whole 95 % interval is under 1.0: the cost is {100 * (1 - iv['hi']):.1f}–"
                    f"{100 * (1 - iv['lo']):.1f} %")
    elif iv["lo"] >= 1.0 - RESOLUTION:
        d["verdict"] = "no measurable cost"
        d["why"] = (f"the 95 % interval reaches 1.0 and its bottom {iv['lo']:.3f} is at or above "
                    f"{1 - RESOLUTION:.2f}: any cost is under {RESOLUTION:.0%}"
                    + (f" (rxe-kvfix faster by {100 * (iv['lo'] - 1):.1f} % at least)" if iv["lo"] > 1.0 else ""))
    else:
        d["verdict"] = f"undecided at {n} pairs"
        d["pairs_needed"] = iv["pairs_needed"]
        d["at_limit"] = iv["at_limit"]
        d["why"] = (f"the 95 % interval holds 1.0 and reaches below {1 - RESOLUTION:.2f}"
                    + (f": about {iv['pairs_needed']} pairs would decide it" if iv["pairs_needed"] else ""))
    return d


def combine(ds):
    """The verdicts of a cell's operations -> one: a cost if one costs, no measurable cost if all say so."""
    costs = [d for d in ds if d["verdict"].startswith("costs")]
    if costs:
        return max(costs, key=lambda d: 1 - d["geomean"])["verdict"]
    if ds and all(d["verdict"] == "no measurable cost" for d in ds):
        return "no measurable cost"
    return f"undecided at {min((d['n'] for d in ds), default=0)} pairs"


def allocator(path, size):
    """A run's page array allocator from its vmallocinfo watch: ('vmalloc', caller, bytes)
    when a line of rdma_rxe, not its queues' rxe_queue_init, holds at least the array's
    bytes (16 B per 4 KiB page); ('kmalloc', None, 0) when the watch saw none; (None, ...)
    without a watch file."""
    if not os.path.exists(path):
        return None, None, None
    want = size // 4096 * 16
    best = ("kmalloc", None, 0)
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            p = line.split()
            if len(p) < 3 or not p[1].isdigit():
                continue
            caller, n = p[2], int(p[1])
            if "[rdma_rxe]" in line and not caller.startswith("rxe_queue_init") and n >= want and n > best[2]:
                best = ("vmalloc", caller.split("+")[0], n)
    return best


def parse_run(path, size):
    try:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        r = (j.get("results") or [{}])[0]
    except (OSError, ValueError):
        return {"ok": False, "registered": None, "error": "no JSON from rxe-verify run"}
    e = {"ok": r.get("result") == "pass", "registered": r.get("registered")}
    if e["ok"]:
        for op in ("write", "read"):
            e[op] = r[op]["MBps"] * 1e6 / (1 << 20)
    else:
        cause = (r.get("diagnosis") or {}).get("cause")
        e["error"] = f"{r.get('result')}: errno {r.get('reg_errno')} ({cause})" if r.get("registered") is False \
            else f"{r.get('result')} ({cause})"
    alloc, caller, n = allocator(path[:-5] + ".vmalloc", size)
    e.update(allocator=alloc, vmalloc_caller=caller, vmalloc_bytes=n)
    return e


def collect(d):
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "dp*-r*-*-*.json"))):
        m = RUN_RE.match(os.path.basename(path))
        if not m:
            continue
        tag, r, mod, size = m.group(1), int(m.group(2)), m.group(3), size_bytes(m.group(4))
        split = int(m.group(5)) if m.group(5) else None
        e = parse_run(path, size // (split or 1))
        e.update(state=STATES[tag], round=r, pair=pair_of(r), module=mod, split=split)
        runs.setdefault((tag, size, pair_of(r)), {})[f"{mod}_split" if split else mod] = e
    if not runs:
        return None
    cells, pairs = {}, []
    for (tag, size, p), by in sorted(runs.items()):
        st, fx = by.get("stock"), by.get("fixed")
        sp = by.get("stock_split")
        row = {"state": STATES[tag], "size": size, "size_text": size_text(size), "pair": p, "stock": st, "fixed": fx,
               "stock_split": sp}
        pairs.append(row)
        if not fx or not fx["ok"] or not fx.get("allocator"):
            continue  # rxe-kvfix gave no figure (a FAIL in the guest): no cell to put it in
        c = cells.setdefault((size, fx["allocator"]), {"size": size, "size_text": size_text(size),
                                                       "allocator": fx["allocator"], "states": [], "write": [],
                                                       "read": [], "stock_refused": 0, "pairs": 0,
                                                       "stock_vmalloc": 0, "against_split": []})
        c["pairs"] += 1
        if STATES[tag] not in c["states"]:
            c["states"].append(STATES[tag])
        if st and st.get("allocator") == "vmalloc":
            c["stock_vmalloc"] += 1  # never expected: stock has no vmalloc path
        if st and st["ok"]:
            for op in ("write", "read"):
                c[op].append(fx[op] / st[op])
        elif st and st.get("registered") is False:
            c["stock_refused"] += 1
            if sp and sp["ok"]:
                # the one MR stock could not register, split into MRs it could: same bytes, same region
                for op in ("write", "read"):
                    c[op].append(fx[op] / sp[op])
                if sp["split"] not in c["against_split"]:
                    c["against_split"].append(sp["split"])
    out = []
    for key in sorted(cells):
        c = cells[key]
        for op in ("write", "read"):
            c[f"{op}_ratio"] = verdict(c[op])
            c[f"{op}_ratio"]["samples"] = c.pop(op)
        if not c["write_ratio"]["n"] and c["stock_refused"]:
            c["verdict"] = f"stock could not register ({c['stock_refused']} of {c['pairs']} pairs)"
        else:
            c["verdict"] = combine([c["write_ratio"], c["read_ratio"]])
            if c["against_split"]:
                c["verdict"] += (f" (stock could not register one MR in {c['stock_refused']} of {c['pairs']} pairs: "
                                 "there against the same region split into "
                                 + " or ".join(f"{k} MRs of {size_text(c['size'] // k)}" for k in c["against_split"]) + ")")
        c["stock_MiBps"] = {op: stats([((x["stock"] or {}) if (x["stock"] or {}).get("ok") else (x["stock_split"] or {})).get(op)
                                       for x in pairs
                                       if x["size"] == c["size"] and (x["fixed"] or {}).get("allocator") == c["allocator"]])
                            for op in ("write", "read")}
        c["fixed_MiBps"] = {op: stats([(x["fixed"] or {}).get(op) for x in pairs
                                       if x["size"] == c["size"] and (x["fixed"] or {}).get("allocator") == c["allocator"]])
                            for op in ("write", "read")}
        out.append(c)
    return {"cells": out, "pairs": pairs}


def needed(c):
    """An undecided cell -> what would decide it: the larger of its operations' pair counts
    at the measured spread ('' when decided, or when no count can be given)."""
    ds = [c[f"{op}_ratio"] for op in ("write", "read") if c[f"{op}_ratio"]["verdict"].startswith("undecided")]
    if not c["verdict"].startswith("undecided") or not ds:
        return ""
    if any(d.get("at_limit") for d in ds):
        return "the estimate sits on the 0.95 limit: no feasible run decides it"
    ns = [d["pairs_needed"] for d in ds]
    return f"about {max(ns)} pairs would decide it" if all(ns) else ""


def spread(c):
    """A cell's run-to-run spread: the widest (max/min - 1) of its four per-run series."""
    w = [s["max"] / s["min"] - 1 for m in ("stock_MiBps", "fixed_MiBps") for s in c[m].values() if s and s["min"]]
    return max(w, default=None)


def shows(dp):
    """What the table shows, in words computed from its figures (the page's reader's line)."""
    cells = dp["cells"]
    ratio_cells = [c for c in cells if c["write_ratio"]["geomean"] is not None or c["read_ratio"]["geomean"] is not None]
    if not ratio_cells:
        return "no cell has a ratio: stock registered none of the sizes it was compared at."
    g = [c[f"{op}_ratio"]["geomean"] for c in ratio_cells for op in ("write", "read") if c[f"{op}_ratio"]["geomean"]]
    costs = [c for c in cells if c["verdict"].startswith("costs")]
    nocost = [c for c in cells if c["verdict"].startswith("no measurable cost")]
    und = [c for c in cells if c["verdict"].startswith("undecided")]
    sp = [x for x in (spread(c) for c in cells) if x is not None]
    out = [f"the geometric means of rxe-kvfix/stock lie between {min(g):.2f} and {max(g):.2f} over "
           f"{len(ratio_cells)} cells × WRITE and READ"]
    if costs:
        out.append("a cost shows in " + ", ".join(f"{c['size_text']} {c['allocator']} ({c['verdict']})" for c in costs))
    else:
        out.append("no cell's interval lies wholly under 1.0: no cost is shown")
    if nocost:
        out.append("no measurable cost (under 5 %) in " + ", ".join(f"{c['size_text']} {c['allocator']}" for c in nocost))
    if und:
        out.append("undecided: " + "; ".join(f"{c['size_text']} {c['allocator']} at {c['write_ratio']['n']} pairs"
                                              + (f" ({needed(c)})" if needed(c) else "") for c in und))
    if sp:
        out.append(f"the fastest of one configuration's runs is up to {1 + max(sp):.1f}× its slowest in this guest "
                   "(QEMU TCG on a 2-core host), far more than any difference between the modules, so a cost "
                   "within that spread needs the pair counts above to be told from none")
    return "; ".join(out) + "."


def targets(res):
    dp = res.get("data_path")
    t = ("data path: rxe-kvfix/stock bandwidth over the same MR, WRITE and READ, per size × page array "
         f"allocator (paired ABBA rounds; no measurable cost: the 95 % interval reaches 1.0 and stays above {1 - RESOLUTION:.2f})")
    if not dp:
        return [{"target": t, "verdict": "undecided", "why": "no dp-r*.json: the part dp did not run (bench_parts)"}]
    cells = dp["cells"]
    nocost = [c for c in cells if c["verdict"].startswith("no measurable cost")]
    v = ("not met" if any(c["verdict"].startswith("costs") for c in cells) else
         "met" if nocost and all(c in nocost or c["verdict"].startswith("stock could not") for c in cells)
         else "undecided")
    why = "; ".join(f"{c['size_text']} {c['allocator']}: {c['verdict']}" for c in cells) or "no rxe-kvfix run gave a figure"
    return [{"target": t, "verdict": v, "why": why}]


def fmt_iv(d):
    if d["geomean"] is None:
        return "–"
    if d["lo"] is None:
        return f"{d['geomean']:.3f}"
    return f"{d['geomean']:.3f} [{d['lo']:.3f}–{d['hi']:.3f}]"


def fmt_mibs(s):
    return "–" if not s else f"{s['median']:.1f} ({s['min']:.1f}–{s['max']:.1f})"


def section(res, p):
    dp = res.get("data_path")
    p("## The data path: stock against rxe-kvfix")
    p("")
    if not dp:
        p("No data-path figures: the part `dp` did not run (`bench_parts`).")
        p("")
        return
    env = res.get("environment") or {}
    p("Does the fix cost anything when data moves? The fix changes only how the MR's page array is "
      "allocated (kvcalloc: kmalloc first, vmalloc when no block of its order is free); every RDMA "
      "WRITE and READ looks pages up in it. `tests/vm/guest/dp.sh`: `rxe-verify run "
      f"{env.get('dp_run') or ''}` over the same MR size on each module (one seed: the same transfers), "
      "rounds in ABBA order (stock, rxe-kvfix, rxe-kvfix, stock, ...), each loading its module; pair p "
      "is rounds 2p−1 and 2p, its ratio rxe-kvfix's MiB/s over stock's. In the guest as booted both "
      "arrays come from kmalloc; with the fragmenter holding (the part `frag`'s state) rxe-kvfix's "
      "comes from vmalloc where no block of its order is free, which is when stock's kzalloc fails too: "
      "there stock's round also runs the same region split into MRs of 256 MiB (order-8 arrays, still "
      "free in that guest), the same bytes over the same memory, and the pair's ratio is against that. "
      "The allocator is read per run, not assumed: `/proc/vmallocinfo`'s rdma_rxe lines while the MR "
      "is live (a line of at least the array's bytes other than the queues' `rxe_queue_init`: vmalloc). "
      "Cells by the allocator that served rxe-kvfix's array; verdict from the geometric mean of the "
      "pairs' ratios and its 95 % t-interval: *costs X %* when the interval is wholly under 1.0, "
      f"*no measurable cost* when it reaches 1.0 and its bottom is ≥ {1 - RESOLUTION:.2f}, else "
      "*undecided at N pairs*; a cell where stock never registered says so instead of a ratio.")
    p("")
    p("| MR size | rxe-kvfix's array | guest | pairs | stock WRITE MiB/s | rxe-kvfix WRITE MiB/s | WRITE ratio [95 %] | "
      "stock READ MiB/s | rxe-kvfix READ MiB/s | READ ratio [95 %] | verdict |")
    p("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in dp["cells"]:
        p(f"| {c['size_text']} | {c['allocator']} | {', '.join(c['states'])} | {c['pairs']}"
          + (f" (stock refused {c['stock_refused']})" if c["stock_refused"] else "") + " | "
          f"{fmt_mibs(c['stock_MiBps']['write'])} | {fmt_mibs(c['fixed_MiBps']['write'])} | {fmt_iv(c['write_ratio'])} | "
          f"{fmt_mibs(c['stock_MiBps']['read'])} | {fmt_mibs(c['fixed_MiBps']['read'])} | {fmt_iv(c['read_ratio'])} | "
          f"**{c['verdict']}**" + (f" ({needed(c)})" if needed(c) else "")
          + (f" ({c['stock_vmalloc']} stock runs showed a vmalloc array!)" if c["stock_vmalloc"] else "")
          + " |")
    p("")
    p(f"*What it shows:* {shows(dp)[0].upper()}{shows(dp)[1:]}")
    p("")
    p("*What the code says, not measured here:* in the kmalloc cells both modules run the same data-path "
      "code over a page array in the same kind of memory (the kernel's direct map), so a difference there "
      "is not expected at all; in the vmalloc cells the array is reached through 4 KiB mappings, and one "
      "4 KiB page of it holds 256 entries of 16 bytes, the pages of 1 MiB of the MR: at most one more TLB "
      "miss per MiB moved, against the tens of milliseconds a MiB takes here. This bounds the cost the "
      "table looks for; it does not replace the measurement, which under TCG cannot tell a few per cent "
      "from none.")
    p("")
    p("Per pair (MiB/s WRITE / READ; the allocator each run's watch saw; stock split: the same region as "
      "several MRs, run where stock could not register one):")
    p("")
    p("| guest | MR size | pair | stock | stock's array | stock split | its arrays | rxe-kvfix | rxe-kvfix's array |")
    p("|---|---|---|---|---|---|---|---|---|")
    for x in dp["pairs"]:
        cells = []
        for m in ("stock", "stock_split", "fixed"):
            e = x[m]
            if not e:
                cells += ["–", "–"]
                continue
            fig = f"{e['write']:.1f} / {e['read']:.1f}" if e["ok"] else f"**{e.get('error')}**"
            if e.get("split"):
                fig += f" ({e['split']} MRs)"
            al = "none: not registered" if e.get("registered") is False else (e.get("allocator") or "no watch")
            if al == "vmalloc":
                al += f" ({e['vmalloc_caller']}, {e['vmalloc_bytes'] >> 10} KiB)"
            cells += [fig, al]
        p(f"| {x['state']} | {x['size_text']} | {x['pair']} | " + " | ".join(cells) + " |")
    p("")
