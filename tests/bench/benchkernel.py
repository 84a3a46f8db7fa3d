"""tests/bench/benchkernel.py: the kernel-side registration timing of tests/bench/render:
guest/bench.sh's .ktrace files (ftrace function_graph filtered to
rxe_reg_user_mr and rxe_dereg_mr) and the two registration targets decided on them.

add_ktrace(e, path, size) adds a churn run's kernel figures (the one file read);
targets(res) returns the two target rows from the collected registration part.
"""
import os

from benchstats import AT_LIMIT_WORDS, GIB, combine, flatness_interval, parse_ktrace, size_text, stats
from benchtable import TARGET_FLAT, TARGET_REG_RATIO

KERNEL_METHOD = ("the kernel's own time per call of rxe_reg_user_mr (ftrace function_graph filtered to "
                 "the two rxe verbs, bench.sh ktrace_*): pinning, the page table, the MR setup; not the syscall or the process")


def targets(res):
    """The registration targets decided on the kernel-side timing: per size the paired
    round ratios' 95 % interval against the limit; flatness from the per-size intervals.
    Undecided says how many pairs (samples) the measured spread would need."""
    reg, T = res["registration"], []
    per = [(s["size_text"], s["kreg_interval"]) for s in reg["sizes"] if s.get("pairs_kreg")]
    for t, k in per:
        if k["verdict"] == "undecided" and k.get("pairs_needed"):
            k["why"] = (f"{k['n']} pairs; about {k['pairs_needed']} would decide it at the measured spread"
                        + (AT_LIMIT_WORDS if k.get("at_limit") else ""))
    v = combine([k["verdict"] for _, k in per])
    why = "; ".join(
        f"{t} {k['geomean']:.3f} [{k['lo']:.3f}–{k['hi']:.3f}, {k['n']} pairs] {k['verdict']}"
        + (f" (about {k['pairs_needed']} pairs would decide it)" if k.get("pairs_needed") else "")
        + (AT_LIMIT_WORDS if k.get("at_limit") else "")
        if k.get("geomean") else f"{t}: {k.get('why', 'no interval')}" for t, k in per)
    T.append({"target": f"registration: rxe-kvfix/stock ≤ {TARGET_REG_RATIO} per size, kernel-side (paired ABBA rounds, 64 MiB–1 GiB)",
              "verdict": v, "method": KERNEL_METHOD,
              "why": f"geometric mean of the pairs' fixed/stock [95 % interval]: {why}"})
    pts = [(s["size"], (s["fixed"].get("kreg_per_gib_round_medians") or {}).get("samples")) for s in reg["sizes"]]
    pts += [(e["size"], (e.get("kreg_seconds_per_gib") or {}).get("samples")) for e in reg["fixed_only"]]
    fl = flatness_interval(pts, TARGET_FLAT)
    res["derived"]["fixed_kernel_per_gib_flatness"] = fl
    if fl:
        hi = f"{fl['spread_hi']:.0%}" if fl["spread_hi"] is not None else "unbounded: an interval reaches zero"
        why = (f"spread of the per-size means {fl['spread']:.0%} [{fl['spread_lo']:.0%}–{hi} from the "
               f"sizes' 95 % intervals] (cheapest {size_text(fl['cheapest'])}, dearest {size_text(fl['dearest'])}; "
               f"samples per size {min(fl['n'])}–{max(fl['n'])}: round medians to 1 GiB, calls above)")
        if fl.get("samples_needed"):
            why += f"; about {fl['samples_needed']} samples per size would decide it"
        if fl.get("at_limit"):
            why += AT_LIMIT_WORDS
        T.append({"target": f"registration: rxe-kvfix's kernel seconds per GiB flat within {TARGET_FLAT:.0%} from "
                            f"{size_text(fl['sizes'][0])} to {size_text(fl['sizes'][-1])}",
                  "verdict": fl["verdict"], "method": KERNEL_METHOD, "why": why})
    else:
        T.append({"target": "registration: rxe-kvfix's kernel seconds per GiB flat", "verdict": "undecided",
                  "method": KERNEL_METHOD, "why": "fewer than two sizes with two or more kernel-side samples"})
    return T


def add_ktrace(e, path, size):
    """The kernel's own time per call (ftrace function_graph, bench.sh ktrace_take) of
    the churn run e: kreg_seconds, kdereg_seconds, kreg_seconds_per_gib (absent without
    a .ktrace file: bench.sh could not set the tracer)."""
    if not os.path.exists(path):
        return
    with open(path, errors="replace") as f:
        k = parse_ktrace(f.read())
    reg = k.get("rxe_reg_user_mr") or []
    e["kreg_seconds"] = stats(reg)
    e["kdereg_seconds"] = stats(k.get("rxe_dereg_mr") or [])
    e["kreg_seconds_per_gib"] = stats([x * GIB / size for x in reg])
