"""tests/bench/benchstats.py: the statistics and the verdicts of tests/bench/render.

Pure functions over lists of figures (no I/O): the unit tests
(tests/bench/test_render.py) call them directly.
"""
import math
import re
import statistics

# A paired-ratio interval "includes 1.0" as a finding only when it is this narrow:
# within [1/WIDE, WIDE]; wider, it is "too wide to tell".
WIDE = 1.25
MIN_PAIRS = 3  # fewer paired rounds than this: too few to exclude 1.0


def stats(samples):
    """n, median, min, max of the samples (None when there are none)."""
    v = [s for s in samples if s is not None]
    if not v:
        return None
    return {"n": len(v), "median": statistics.median(v), "min": min(v), "max": max(v),
            "samples": v}


def cpu_share(samples, t0, t1, nproc, hz):
    """samples: (epoch, load1, load5, load15[, host busy ticks, QEMU ticks]) every few
    seconds -> the host's CPU between the samples nearest t0 and t1: in cores busy
    outside QEMU and in QEMU, and the share of the host outside QEMU; None without
    ticks or with fewer than two samples in the window."""
    v = [s for s in samples if len(s) == 6]
    # the QEMU processes' ticks only grow while they run: a drop is the guest gone (the
    # sampler's last reading after it powered off), and a window ending there would
    # count all of QEMU's time as the host's
    for i in range(1, len(v)):
        if v[i][5] < v[i - 1][5]:
            v = v[:i]
            break
    if len(v) < 2:
        return None
    a = min(v, key=lambda s: abs(s[0] - t0))
    b = min(v, key=lambda s: abs(s[0] - t1))
    secs = b[0] - a[0]
    if secs <= 0:
        return None
    busy, qemu = (b[4] - a[4]) / hz / secs, (b[5] - a[5]) / hz / secs
    other = max(0.0, busy - qemu)
    return {"seconds": secs, "cores_outside_qemu": other, "cores_qemu": qemu,
            "share_outside_qemu": other / nproc, "nproc": nproc}


def abba_module(r):
    """The module of round r (1-based) in the ABBA order: stock, fixed, fixed, stock, ..."""
    return "stock" if (r - 1) % 4 in (0, 3) else "fixed"


def pair_of(r):
    """Rounds 2p-1 and 2p form pair p (one round of each module in ABBA order)."""
    return (r + 1) // 2


def paired_ratios(by_round, key):
    """by_round: {round: {"module": m, key: value}} -> [(pair, fixed/stock)] for the
    pairs where both rounds have a positive figure."""
    pairs = {}
    for r, e in by_round.items():
        v = e.get(key)
        if v is None:
            continue
        pairs.setdefault(pair_of(r), {})[e["module"]] = v
    out = []
    for p in sorted(pairs):
        s, f = pairs[p].get("stock"), pairs[p].get("fixed")
        if s and f is not None and s > 0:
            out.append((p, f / s))
    return out


def ratio_verdict(ratios, below="rxe-kvfix faster", above="rxe-kvfix slower"):
    """Median ratio with the min-max interval of the paired ratios, and whether that
    interval excludes 1.0, includes it (narrowly), or is too wide to tell. below/above
    name what an interval wholly under/over 1.0 means: the defaults are for times
    (fixed/stock seconds); a bandwidth ratio passes its own words."""
    if not ratios:
        return {"n": 0, "median": None, "min": None, "max": None, "verdict": "no pairs"}
    lo, hi = min(ratios), max(ratios)
    d = {"n": len(ratios), "median": statistics.median(ratios), "min": lo, "max": hi}
    if len(ratios) < MIN_PAIRS:
        d["verdict"] = f"too few pairs ({len(ratios)} < {MIN_PAIRS}) to tell"
    elif hi < 1.0:
        d["verdict"] = f"excludes 1.0 ({below})"
    elif lo > 1.0:
        d["verdict"] = f"excludes 1.0 ({above})"
    elif lo >= 1 / WIDE and hi <= WIDE:
        d["verdict"] = f"includes 1.0 (interval within {1 / WIDE:.2f}-{WIDE:.2f})"
    else:
        d["verdict"] = "too wide to tell"
    return d


def target_upper(lo, hi, limit):
    """A target 'ratio <= limit' against an interval: met, not met or undecided."""
    if lo is None or hi is None:
        return "undecided"
    if hi <= limit:
        return "met"
    if lo > limit:
        return "not met"
    return "undecided"


def target_lower(lo, hi, limit):
    """A target 'ratio >= limit' against an interval."""
    if lo is None or hi is None:
        return "undecided"
    if lo >= limit:
        return "met"
    if hi < limit:
        return "not met"
    return "undecided"


def combine(verdicts):
    """Several per-size target verdicts -> one: not met if any is, met if all are."""
    if not verdicts:
        return "undecided"
    if "not met" in verdicts:
        return "not met"
    if all(v == "met" for v in verdicts):
        return "met"
    return "undecided"


def flatness(points, limit):
    """points: [(size, round figures of seconds per GiB)] -> spread of the per-size
    medians, (max - min) / min, and a verdict: met within limit; not met when beyond
    it and the round ranges of the cheapest and the dearest size do not overlap;
    otherwise undecided (the noise is as large as the difference)."""
    pts = [(s, stats(v)) for s, v in points if v]
    pts = [(s, st) for s, st in pts if st]
    if len(pts) < 2:
        return None
    med = [st["median"] for _, st in pts]
    lo_i, hi_i = med.index(min(med)), med.index(max(med))
    spread = (max(med) - min(med)) / min(med) if min(med) > 0 else None
    if spread is not None and spread <= limit:
        verdict = "met"
    elif pts[lo_i][1]["max"] < pts[hi_i][1]["min"]:
        verdict = "not met"
    else:
        verdict = "undecided"
    return {"sizes": [s for s, _ in pts], "median_seconds_per_gib": med, "spread": spread,
            "cheapest": pts[lo_i][0], "dearest": pts[hi_i][0], "verdict": verdict, "target_max": limit}


VMSTAT_KEYS = ("compact_stall", "compact_fail", "compact_success")


def vmstat_delta(before, after):
    """compact_stall/fail/success and the sum of allocstall_* (and each) between two
    /proc/vmstat readings ({name: int})."""
    d = {k: after.get(k, 0) - before.get(k, 0) for k in VMSTAT_KEYS}
    stalls = {k: after[k] - before.get(k, 0) for k in after if k.startswith("allocstall_")}
    d["allocstall"] = sum(stalls.values())
    d["allocstall_by_zone"] = {k: v for k, v in stalls.items() if v}
    return d


GIB = 1 << 30
MIB = 1 << 20
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_bytes(text):
    if text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def size_text(n):
    for unit, div in (("GiB", GIB), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def fmt_mib(v):
    return "–" if v is None else f"{v / MIB:+.2f}"


# --- decisions from intervals (what decides the registration targets) -------------------
# Two-sided 95 % Student t quantiles by degrees of freedom; a df between two rows takes
# the smaller row's (larger) quantile, so the interval is never narrower than it should be.
_T95 = ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447), (7, 2.365),
        (8, 2.306), (9, 2.262), (10, 2.228), (12, 2.179), (15, 2.131), (20, 2.086),
        (25, 2.060), (30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980))


def t95(df):
    """The 95 % two-sided t quantile for df degrees of freedom (1.96 beyond 120)."""
    q = None
    for d, v in _T95:
        if d <= df:
            q = v
    return 1.96 if df > 120 else (q if q is not None else float("inf"))


# An estimate closer to its limit than a tenth of its interval's half-width "sits on the
# limit": deciding it would take a hundred times the samples or more, so the render says
# so beside the count, which no run would reach.
AT_LIMIT = 10.0
AT_LIMIT_WORDS = " (the estimate sits on the limit, closer to it than a tenth of its interval: no feasible run decides it)"


def ratio_interval(ratios, limit, at_least=False):
    """Paired ratios (fixed/stock) -> their geometric mean with a 95 % t-interval (on the
    logs) and the verdict on 'ratio <= limit': met when the interval's top is at or under
    limit, not met when its bottom is above it, else undecided, with the number of pairs
    that would decide it at the measured spread, and at_limit when the mean sits on the
    limit (within a tenth of the interval's half-width: a hundred times the pairs or more).
    at_least: the verdict on 'ratio >= limit' instead (met when the bottom is at or above
    limit, not met when the top is under it); the interval and the counts are the same."""
    v = [r for r in ratios if r and r > 0]
    d = {"n": len(v), "limit": limit, "geomean": None, "lo": None, "hi": None, "verdict": "undecided",
         "pairs_needed": None, "at_limit": False}
    if at_least:
        d["at_least"] = True
    if len(v) < 2:
        d["why"] = f"{len(v)} pair(s): an interval needs two"
        return d
    logs = [math.log(x) for x in v]
    m, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t95(len(v) - 1) * sd / math.sqrt(len(v))
    d.update(geomean=math.exp(m), lo=math.exp(max(-700.0, m - half)), hi=math.exp(min(700.0, m + half)), sd_log=sd)
    gap = abs(math.log(limit) - m)
    if (d["lo"] >= limit) if at_least else (d["hi"] <= limit):
        d["verdict"] = "met"
    elif (d["hi"] < limit) if at_least else (d["lo"] > limit):
        d["verdict"] = "not met"
    else:
        d["at_limit"] = gap < half / AT_LIMIT
        if gap > 0:
            d["pairs_needed"] = max(len(v) + 1, math.ceil((2.0 * sd / gap) ** 2))
    return d


def flatness_interval(points, limit):
    """points: [(size, samples of seconds per GiB)] -> the spread of the per-size means,
    (max - min) / min, with bounds from each mean's 95 % t-interval: met when even the
    widest reading of the intervals stays within limit, not met when even the narrowest
    exceeds it, else undecided with the samples per size that would decide it, and
    at_limit when the spread sits on the limit (as in ratio_interval)."""
    pts = []
    for size, v in points:
        v = [x for x in (v or []) if x is not None]
        if len(v) >= 2:
            m = statistics.fmean(v)
            half = t95(len(v) - 1) * statistics.stdev(v) / math.sqrt(len(v))
            pts.append((size, len(v), m, m - half, m + half))
    if len(pts) < 2:
        return None
    means = [p[2] for p in pts]
    lo_all, hi_all = min(p[3] for p in pts), max(p[4] for p in pts)
    spread = (max(means) - min(means)) / min(means)
    spread_hi = (hi_all - lo_all) / lo_all if lo_all > 0 else float("inf")
    m_lo = max(p[3] for p in pts)
    m_hi = min(p[4] for p in pts)
    spread_lo = max(0.0, (m_lo - m_hi) / m_hi) if m_hi > 0 else 0.0
    d = {"sizes": [p[0] for p in pts], "n": [p[1] for p in pts], "means": means, "spread": spread,
         "spread_lo": spread_lo, "spread_hi": spread_hi, "target_max": limit, "samples_needed": None,
         "at_limit": False, "cheapest": pts[means.index(min(means))][0], "dearest": pts[means.index(max(means))][0]}
    if not math.isfinite(spread_hi):
        d["spread_hi"] = None  # unbounded (results.json stays strict JSON)
    if spread_hi <= limit:
        d["verdict"] = "met"
    elif spread_lo > limit:
        d["verdict"] = "not met"
    else:
        d["verdict"] = "undecided"
        # the intervals' share of the bounds shrinks with 1/sqrt(n): the n that brings the
        # bound on the far side of the limit back to it
        # (with two samples an interval can reach below zero: the bound is then infinite
        # and says nothing of the samples needed)
        width = (spread_hi - spread) if spread <= limit else (spread - spread_lo)
        gap = abs(limit - spread)
        if math.isfinite(width):
            d["at_limit"] = gap < width / AT_LIMIT
        if math.isfinite(width) and gap > 0:
            d["samples_needed"] = max(min(d["n"]) + 1, math.ceil(min(d["n"]) * (width / gap) ** 2))
    return d


_KTRACE = re.compile(r"(\d+(?:\.\d+)?) us\s+\|\s+(?:\}\s*/\*\s*)?(\w+)")


def parse_ktrace(text):
    """ftrace function_graph lines (depth 1, funcgraph-tail on) -> {function: [seconds
    per call]}. A call is one line, ' 1) ! 1234.567 us |  rxe_reg_user_mr [rdma_rxe]();',
    or, when its entry and return are apart in the buffer (it slept, another CPU wrote
    between), its closing line carries the duration: '... us |  } /* rxe_reg_user_mr */'."""
    out = {}
    for line in text.splitlines():
        m = _KTRACE.search(line)
        if m:
            out.setdefault(m.group(2), []).append(float(m.group(1)) / 1e6)
    return out
