"""tests/bench/benchdefaults.py: the bench part `defaults` of tests/bench/render
(guest/defaults.sh): rxe-verify and perftest each at its own defaults, interleaved
(defaults-pairs.tsv), and rxe-verify's ways of waiting for completions with the CPU each
run spent (wait-pairs.tsv).

collect(d) reads the two files (None without them); targets(res) returns the target row
"rxe-verify at defaults >= TARGET_DEFAULTS x perftest at defaults"; section(res, p) writes
the RESULTS.md sections with the p(line) printer of benchtable. Pure but for the reads.
"""
import math
import os
import statistics

from benchstats import AT_LIMIT_WORDS, GIB, combine, ratio_interval, size_bytes, size_text, stats

TARGET_DEFAULTS = 0.95  # rxe-verify at its defaults / perftest unverified at its defaults
DF_HEAD = ["msg_size", "op", "pair", "tool", "MiBps", "verified_MiBps", "bytes", "retries", "order",
           "guest_load1", "validated_bytes", "user_s", "sys_s"]
# what defaults.sh wrote before it timed each tool's CPU (still read: no CPU figures)
DF_HEAD_NO_CPU = DF_HEAD[:-2]
WT_HEAD = ["msg_size", "round", "mode", "wait_mode", "spin_us", "write_MiBps", "read_MiBps",
           "write_verified_MiBps", "read_verified_MiBps", "bytes", "user_s", "sys_s", "wall_s", "order",
           "guest_load1"]
TOOLS = ("rxe-verify", "perftest", "perftest26", "perftest26-validated")
MODE_WORDS = {"default": "default (adaptive)", "busy-poll": "--busy-poll", "no-spin": "--no-spin"}
TOOL_WORDS = {"rxe-verify": "rxe-verify at defaults (checked)", "perftest": "perftest at defaults (unchecked)",
              "perftest26": "perftest 26 at defaults (unchecked)",
              "perftest26-validated": "perftest 26 --data_validation"}
TARGET_TEXT = (f"at defaults: rxe-verify ≥ {TARGET_DEFAULTS} × perftest unverified, per size and op "
               "(`rxe-verify run -m full` against Debian's ib_write_bw/ib_read_bw, each at its own defaults, "
               "same message size and bytes, interleaved pairs, defaults-pairs.tsv)")


class DefaultsError(ValueError):
    """defaults-pairs.tsv or wait-pairs.tsv is not what guest/defaults.sh writes."""


def _num(x):
    return None if x == "NA" else float(x)


def _rows(path, head, older=()):
    """(line number, {column: value}) of each row; a file with an OLDER header (a prefix
    of HEAD) gives NA for the columns it lacks."""
    with open(path, encoding="utf-8") as f:
        got = f.readline().rstrip("\n").split("\t")
        if got != head and got not in older:
            raise DefaultsError(f"{path}: header is {' '.join(got)!r}, want {' '.join(head)!r} (tab-separated)")
        missing = head[len(got):]
        head = got
        for n, line in enumerate(f, 2):
            p = line.rstrip("\n").split("\t")
            if p == [""]:
                continue
            if len(p) != len(head):
                raise DefaultsError(f"{path}:{n}: want {len(head)} tab-separated fields ({', '.join(head[:4])}, ...): {line.strip()!r}")
            yield n, {**dict(zip(head, p)), **{k: "NA" for k in missing}}


def collect(d):
    """-> {"pairs": [per message size and op], "wait": [per message size]} or None."""
    df, wt = os.path.join(d, "defaults-pairs.tsv"), os.path.join(d, "wait-pairs.tsv")
    if not os.path.exists(df) and not os.path.exists(wt):
        return None
    by = {}
    # CPU per pair: {msg: {tool: {pair: [cpu seconds, bytes]}}}; rxe-verify's one run
    # moves both ops and carries the run's CPU on both rows: counted once
    spent = {}
    if os.path.exists(df):
        for n, r in _rows(df, DF_HEAD, (DF_HEAD_NO_CPU,)):
            if r["op"] not in ("write", "read") or r["tool"] not in TOOLS:
                raise DefaultsError(f"{df}:{n}: op must be write or read and tool one of {', '.join(TOOLS)}: {r['op']} {r['tool']}")
            try:
                e = {"pair": int(r["pair"]), "MiBps": _num(r["MiBps"]), "verified": _num(r["verified_MiBps"]),
                     "retries": int(r["retries"]), "validated_bytes": None if r["validated_bytes"] == "NA" else int(r["validated_bytes"])}
            except ValueError:
                raise DefaultsError(f"{df}:{n}: pair, retries and the MiB/s columns must be numbers (or NA): {r}") from None
            by.setdefault((size_bytes(r["msg_size"]), r["op"]), {}).setdefault(r["tool"], []).append(e)
            if r["user_s"] != "NA" and e["MiBps"]:
                try:
                    c, b = float(r["user_s"]) + float(r["sys_s"]), int(r["bytes"])
                except ValueError:
                    raise DefaultsError(f"{df}:{n}: bytes, user_s and sys_s must be numbers (or NA): {r}") from None
                acc = spent.setdefault(size_bytes(r["msg_size"]), {}).setdefault(r["tool"], {}).setdefault(e["pair"], [0.0, 0])
                acc[0] = c if r["tool"] == "rxe-verify" else acc[0] + c
                acc[1] += b
    pairs = []
    for (msg, op), tools in sorted(by.items()):
        fig = {t: {x["pair"]: x["MiBps"] for x in tools.get(t, []) if x["MiBps"]} for t in TOOLS}
        rv = fig["rxe-verify"]
        ratios = [(p, rv[p] / fig["perftest"][p]) for p in sorted(rv) if p in fig["perftest"]]
        r26 = [rv[p] / fig["perftest26"][p] for p in sorted(rv) if p in fig["perftest26"]]
        q = [x for _, x in ratios]
        pairs.append({
            "msg": msg, "msg_text": size_text(msg), "op": op,
            "pairs": len({x["pair"] for t in tools.values() for x in t}),
            "no_figure": sum(1 for t in tools.values() for x in t if x["MiBps"] is None),
            "MiBps": {t: stats(list(fig[t].values())) for t in TOOLS if t in tools},
            "rv_verified": stats([x["verified"] for x in tools.get("rxe-verify", [])]),
            "validated_bytes": stats([x["validated_bytes"] for x in tools.get("perftest26-validated", [])]),
            # a tool's retransmissions: rxe-verify's one run moves both ops, so its count
            # is the run's (the same on its WRITE and READ rows)
            "retries": {t: sum(x["retries"] for x in tools[t]) for t in TOOLS if t in tools},
            "pair_ratios": ratios,
            "ratio": {"median": statistics.median(q) if q else None, "min": min(q, default=None), "max": max(q, default=None),
                      **ratio_interval(q, TARGET_DEFAULTS, at_least=True)},
            "ratio_pt26": ratio_interval(r26, 1.0)})
    wait = []
    if os.path.exists(wt):
        per = {}
        for n, r in _rows(wt, WT_HEAD):
            try:
                gib = int(r["bytes"]) / GIB
                cpu = float(r["user_s"]) + float(r["sys_s"])
                e = {"round": int(r["round"]), "write": float(r["write_MiBps"]), "read": float(r["read_MiBps"]),
                     "cpu_per_gib": cpu / gib, "sys_per_gib": float(r["sys_s"]) / gib, "wall": float(r["wall_s"]),
                     "wait_mode": r["wait_mode"], "spin_us": None if r["spin_us"] == "NA" else int(r["spin_us"])}
            except (ValueError, ZeroDivisionError):
                raise DefaultsError(f"{wt}:{n}: round, bytes (> 0), the MiB/s and the CPU seconds must be numbers: {r}") from None
            per.setdefault(size_bytes(r["msg_size"]), {}).setdefault(r["mode"], []).append(e)
        for msg in sorted(per):
            modes = []
            for mode, runs in per[msg].items():
                modes.append({"mode": mode, "wait_mode": runs[0]["wait_mode"], "spin_us": runs[0]["spin_us"],
                              "rounds": len(runs), "write": stats([x["write"] for x in runs]),
                              "read": stats([x["read"] for x in runs]), "cpu_per_gib": stats([x["cpu_per_gib"] for x in runs]),
                              "sys_per_gib": stats([x["sys_per_gib"] for x in runs])})
            wait.append({"msg": msg, "msg_text": size_text(msg), "modes": modes})
    # each tool's CPU at its defaults, per GiB moved, a figure per pair: beside the
    # waiting modes, in the same boot
    tools_cpu = {msg: {t: {"pairs": len(per_pair), "cpu_per_gib": stats([c / (b / GIB) for c, b in per_pair.values() if b])}
                       for t, per_pair in tools.items()} for msg, tools in spent.items()}
    for w in wait:
        w["tools"] = tools_cpu.get(w["msg"], {})
    return {"pairs": pairs, "wait": wait}


def _need(k):
    """What the measured spread would need to decide (or to meet) the target, in words."""
    lim = TARGET_DEFAULTS
    if not k.get("geomean"):
        return f"{k['n']} pair(s): an interval needs two (the full form runs 5)"
    if k["verdict"] == "met":
        return ""
    if k["verdict"] == "not met":
        return (f"the whole interval is under {lim}: decided at this spread; meeting it needs rxe-verify "
                f"{lim / k['geomean'] - 1:.0%} faster at this size")
    half = (math.log(k["hi"]) - math.log(k["lo"])) / 2
    gap = abs(math.log(lim) - math.log(k["geomean"]))
    words = (f"about {k['pairs_needed']} pairs would decide it at the measured spread, or an interval of "
             f"±{math.exp(gap) - 1:.1%} around the geometric mean (now ±{math.exp(half) - 1:.1%})") if k.get("pairs_needed") else \
        "the geometric mean is the limit itself: no number of pairs decides it"
    return words + (AT_LIMIT_WORDS if k.get("at_limit") else "")


def targets(res):
    df = res.get("defaults") or {}
    per = [x for x in df.get("pairs") or [] if x["ratio"]["n"] or x["MiBps"].get("rxe-verify")]
    if not per:
        return [{"target": TARGET_TEXT, "verdict": "undecided",
                 "why": "no defaults-pairs.tsv: the defaults part did not run (bench_parts) or gave no pair"}]
    why = []
    for x in per:
        k = x["ratio"]
        iv = f"{k['geomean']:.3f} [{k['lo']:.3f}–{k['hi']:.3f}, {k['n']} pairs]" if k.get("geomean") else f"[{k['n']} pairs]"
        need = _need(k)
        why.append(f"{x['msg_text']} {x['op'].upper()} {iv} {k['verdict']}" + (f": {need}" if need else ""))
    return [{"target": TARGET_TEXT, "verdict": combine([x["ratio"]["verdict"] for x in per]),
             "why": "geometric mean of the pairs' rxe-verify/perftest [95 % interval]: " + "; ".join(why)}]


def _st(s, prec=1):
    return f"{s['median']:.{prec}f} ({s['min']:.{prec}f}–{s['max']:.{prec}f})" if s else "–"


def _iv(k, prec=2):
    return f"{k['geomean']:.{prec}f} [{k['lo']:.{prec}f}–{k['hi']:.{prec}f}]" if k and k.get("geomean") else "–"


def section(res, p):
    """## At defaults and ## Waiting modes (or that the part did not run)."""
    df = res.get("defaults")
    p("## At defaults: rxe-verify and perftest as a user first runs them")
    p("")
    if not df or not (df.get("pairs") or df.get("wait")):
        p("Not run in this boot: the part `defaults` (guest/defaults.sh) was not in `bench_parts`, or the boot "
          "predates it.")
        p("")
        return
    p("`tests/vm/guest/defaults.sh` on rxe-kvfix: `rxe-verify run -d DEV -s REGION -m full --msg-size MSG` "
      "(its defaults: tx depth 128, adaptive completion waiting, every byte checked both ways; *BW average* is "
      "its RDMA time, as it prints it) beside Debian's `ib_write_bw` / `ib_read_bw -d DEV -s MSG -n REGION/MSG` "
      "and perftest 26's at their defaults, without and with `--data_validation`. Only the flags that make them "
      "move the same bytes on the same device; perftest keeps its default QP timeout, outstanding reads, tx depth "
      "and GID choice, unpinned. perftest 26's validated runs make at least 32 iterations (its validation needs "
      "a tx depth of 32, and perftest lowers the tx depth to the iterations). Pairs in ABBA order; MiB/s: median "
      "(min–max) of the pairs; retransmissions: the port's completer_retry_err over each tool's runs.")
    p("")
    if df.get("pairs"):
        p("| message | op | pairs | rxe-verify MiB/s | perftest MiB/s | rxe-verify/perftest median [min–max] | "
          f"geomean [95 %], target ≥ {TARGET_DEFAULTS} | perftest 26 MiB/s | rxe-verify/perftest 26 geomean [95 %] | "
          "perftest 26 validated MiB/s | retransmissions rv / pt / pt 26 |")
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for x in df["pairs"]:
            k, m, rt = x["ratio"], x["MiBps"], x["retries"]
            med = f"{k['median']:.2f} [{k['min']:.2f}–{k['max']:.2f}]" if k.get("median") is not None else "–"
            p(f"| {x['msg_text']} | {x['op'].upper()} | {x['pairs']}" + (f" ({x['no_figure']} run{'s' if x['no_figure'] != 1 else ''} without a figure)" if x["no_figure"] else "")
              + f" | {_st(m.get('rxe-verify'))} | {_st(m.get('perftest'))} | {med} | {_iv(k, 3)} {k['verdict']} | "
              f"{_st(m.get('perftest26'))} | {_iv(x['ratio_pt26'])} | {_st(m.get('perftest26-validated'))} | "
              + " / ".join(str(rt[t]) if t in rt else "–" for t in ("rxe-verify", "perftest", "perftest26")) + " |")
        p("")
        p("- Pair ratios (pair: rxe-verify/perftest): " + "; ".join(
            f"{x['msg_text']} {x['op'].upper()} " + ", ".join(f"{pp}: {r:.2f}" for pp, r in x["pair_ratios"])
            for x in df["pairs"] if x["pair_ratios"]) + ".")
        p("")
    p("## rxe-verify's waiting modes: bandwidth and CPU")
    p("")
    if not df.get("wait"):
        p("No waiting-mode rounds in this boot.")
        p("")
        return
    p("The same `rxe-verify run` at each way of waiting for completions (`completion_wait.hpp`): the default "
      "(poll an empty completion queue for up to its spin, then sleep on the completion channel), `--spin USEC`, "
      "`--busy-poll` (never sleeps, as perftest) and `--no-spin` (sleeps at once); rounds in ABBA order. CPU: "
      "user + sys of the rxe-verify process per GiB it moved (WRITE and READ), pattern fills, checks and the "
      "kernel's rxe work in its system calls included: the modes differ by what they spend waiting. Median "
      "(min–max) of the rounds." + (
          " Below each size, each tool at its defaults in the same boot (the at-defaults pairs above): perftest's "
          "CPU is its server's and client's user + sys per GiB it moved with ib_write_bw and ib_read_bw (it "
          "busy-polls its completion queue and checks no byte), a figure per pair; rxe-verify's the run's (every "
          "byte checked both ways)." if any(w.get("tools") for w in df["wait"]) else ""))
    p("")
    p("| message | mode | spin µs | rounds | WRITE MiB/s | READ MiB/s | CPU s per GiB | of it sys |")
    p("|---|---|---|---|---|---|---|---|")
    for w in df["wait"]:
        for m in w["modes"]:
            spin = "–" if m["spin_us"] is None else m["spin_us"]
            p(f"| {w['msg_text']} | {MODE_WORDS.get(m['mode'], '--spin ' + m['mode'][5:] if m['mode'].startswith('spin-') else m['mode'])} "
              f"| {spin} | {m['rounds']} | {_st(m['write'])} | {_st(m['read'])} | {_st(m['cpu_per_gib'], 3)} | "
              f"{_st(m['sys_per_gib'], 3)} |")
        mib = {(x["op"], t): v for x in df.get("pairs") or [] if x["msg_text"] == w["msg_text"] for t, v in x["MiBps"].items()}
        for t in TOOLS:
            c = w.get("tools", {}).get(t)
            if c and c["cpu_per_gib"]:
                p(f"| {w['msg_text']} | {TOOL_WORDS[t]} | – | {c['pairs']} pairs | {_st(mib.get(('write', t)))} | "
                  f"{_st(mib.get(('read', t)))} | {_st(c['cpu_per_gib'], 3)} | – |")
    p("")
