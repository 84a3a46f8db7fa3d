"""tests/bench/benchmerge.py: a bench run of some parts merged, part by part, into the
published summary (render merge).

`make bench BENCH_PARTS=defaults` measures one part in ~20 min where the full run takes
75; its summary alone would publish the other parts as "Not run in this boot". merge()
takes each part's figures from NEW when NEW ran the part (its environment's `parts`;
without one, when it has the part's figures), else from BASE, and records under
`part_runs` the boot each part comes from (date, commit, form, the part's time, the
host's load and its CPU outside QEMU over the part and the boot, the modules), which
the page prints in a table at its top (benchtable.runs_table). When every part comes
from one boot, the result is that boot's own summary: its page is the page of today.

What a part fills (render collect): PART_KEYS. Targets: each part's rows are those of
render's targets() over the run the part comes from, recomputed when that run is a
results.json; a summary keeps no samples (the flatness rows are computed from them),
so its rows are carried over, computed over the same figures when it was summarized.
No row depends on another part's figures but "the machine to itself", recomputed over
the merged parts: each part's host CPU outside QEMU and each boot's whole.

merge(base, new, targets, notes_path) -> the merged summary (benchsummary.summarize:
the page rendered from it is the page); raises MergeError(message, exit status):
2 BASE is not a summary (or either is not schema 3), 1 the two cannot be merged (the
form or what the page states once for all parts differ: SAME; NEW ran no part). The
host CPU model may differ between the boots: the page names each.
"""
import copy

import benchsummary
import benchtable
from benchtable import PARTS

# part -> (its top-level keys, its keys under "rounds", its keys of "environment")
PART_KEYS = {
    "registration": (("registration", "derived"), ("registration",), ("rounds", "reg_reps")),
    "bandwidth": (("bandwidth_pairs", "bandwidth_span", "peer_pairs", "peer_build"), (), ()),
    "defaults": (("defaults",), (), ()),
    "fragmented": (("fragmented",), ("fragmented",), ("frag_rounds",)),
    "data path": (("data_path",), (), ("dp_run",)),
}
# what the page states once for all parts: the boots merged must agree on it (the
# form too: a short-form part would stand beside full-form ones). The host's CPU model
# may differ (a machine of the same kind, another CPU): each part's comparisons are
# made within its own boot, and the page names each boot's CPU (host_cpu_models)
SAME = ("kernel", "emulation", "guest_mem", "guest_cpus", "host_nproc")
# a target row's part, by the start of its text (render targets(), benchkernel, benchdefaults)
TARGET_PARTS = (("registration", "registration"), ("kernel memory", "registration"), ("fragmented guest", "fragmented"),
                ("bandwidth", "bandwidth"), ("verified full span", "bandwidth"), ("at defaults", "defaults"),
                ("data path", "data path"),
                ("the machine to itself", None))
# the order of render targets(): the parts' rows, then the machine's
TARGET_ORDER = ("registration", "fragmented", "bandwidth", "defaults", "data path")
ORDER = ("schema_version", "kind", "form", "environment", "part_runs", "rounds", "registration", "fragmented",
         "bandwidth_pairs", "bandwidth_span", "defaults", "data_path", "peer_pairs", "peer_build", "derived", "targets")


class MergeError(ValueError):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


def has_figures(doc, part):
    if part == "registration":
        reg = doc.get("registration") or {}
        return bool(reg.get("sizes") or reg.get("fixed_only"))
    if part == "bandwidth":
        return bool(doc.get("bandwidth_pairs") or doc.get("bandwidth_span") or doc.get("peer_pairs"))
    if part == "defaults":
        return bool(doc.get("defaults"))
    if part == "data path":
        return bool(doc.get("data_path"))
    return bool((doc.get("fragmented") or {}).get("sizes"))


def ran(doc, part):
    """The run (or a merged summary) measured the part: a part that ran and gave no
    figures counts, its page says so (the newest measurement of the part)."""
    if doc.get("part_runs") is not None:
        return part in doc["part_runs"]
    parts = (doc.get("environment") or {}).get("parts")
    return dict(PARTS)[part] in parts.split(",") if parts else has_figures(doc, part)


def run_record(doc, part):
    """The boot the part of doc was measured in, as the page's table at the top reads it."""
    if doc.get("part_runs") is not None:
        return doc["part_runs"][part]
    env = doc["environment"]
    cpu = env.get("host_cpu") or {}
    return {"date_start": env.get("date_start"), "date_end": env.get("date_end"), "commit": env.get("commit"),
            "form": doc.get("form"), "parts": env.get("parts"), "vm_wall_seconds": env.get("vm_wall_seconds"),
            "seconds": (env.get("part_seconds") or {}).get(part),
            "host_load1_samples": env.get("host_load1_samples"), "host_loadavg": env.get("host_loadavg"),
            "host_cpu": {k: cpu[k] for k in ("whole boot", part) if cpu.get(k)} or None,
            "stock_module": env.get("stock_module"), "fixed_module": env.get("fixed_module"),
            "host_cpu_model": env.get("host_cpu_model")}


def host_cpu_models(runs):
    """The host CPU the page names: the one model, or each model with its parts."""
    by = {}
    for part, _ in PARTS:
        if part in runs:
            by.setdefault(runs[part].get("host_cpu_model"), []).append(part)
    if len(by) == 1:
        return next(iter(by))
    return "; ".join(f"{m} for {', '.join(ps)}" for m, ps in by.items())


def target_part(t):
    for start, part in TARGET_PARTS:
        if t["target"].startswith(start):
            return part
    raise MergeError(f"a target of no known part: {t['target'][:70]!r} (add it to benchmerge.TARGET_PARTS)", 1)


def quiet_target(runs):
    """'the machine to itself' over the merged parts: each part's host CPU outside QEMU
    and the whole of each boot they come from."""
    row = benchtable.quiet_target({})
    why, shares, missing = [], [], False
    for r, parts in benchtable.boots(runs):
        cpu = {"whole boot": (r.get("host_cpu") or {}).get("whole boot")}
        cpu.update({p: (runs[p].get("host_cpu") or {}).get(p) for p in parts})
        if not cpu["whole boot"]:
            missing = True
            why.append(f"{', '.join(parts)} (the boot of {r.get('date_start')}): its samples carry no CPU ticks")
            continue
        shares += [c["share_outside_qemu"] for c in cpu.values() if c]
        why.append(f"{', '.join(parts)} (the boot of {r.get('date_start')}): {benchtable.host_cpu_text(cpu)}")
    worst = max(shares, default=0.0)
    row["verdict"] = "not met" if worst > benchtable.TARGET_QUIET else ("undecided" if missing or not shares else "met")
    row["why"] = "; ".join(why) + " (the host's 1-minute load counts the guest's own vCPU threads, so it is not the measure)"
    return row


def _check(base, new):
    if not benchsummary.is_summary(base):
        raise MergeError("BASE is not a summary (render summarize's output, e.g. tests/bench/summary.json): "
                         "merge adds a run's parts to a published summary", 2)
    for what, d in (("BASE", base), ("NEW", new)):
        if d.get("schema_version") != 3:
            raise MergeError(f"{what} has schema_version {d.get('schema_version')}, this render reads 3", 2)
    if base.get("form") != new.get("form"):
        raise MergeError(f"the forms differ: BASE {base.get('form')}, NEW {new.get('form')} (a part is merged only "
                         "beside parts of its own form)", 1)
    for k in SAME:
        a, b = base["environment"].get(k), new["environment"].get(k)
        if a != b:
            raise MergeError(f"the {k.replace('_', ' ')} differs: BASE {a}, NEW {b} (the page states it once for all parts)", 1)
    if not any(ran(new, p) for p, _ in PARTS):
        raise MergeError("NEW ran no part (reg, bw, defaults, frag, dp): nothing to merge", 1)


def merge(base, new, targets, notes_path):
    _check(base, new)
    if not benchsummary.is_summary(new):
        # a run's results: its target rows recomputed by the render of today
        new = copy.deepcopy(new)
        new["targets"] = targets(new)
    src = {p: new if ran(new, p) else base for p, _ in PARTS}
    runs = {p: run_record(d, p) for p, d in src.items() if ran(d, p)}
    if all(src[p] is new for p in runs) and len(benchtable.boots(runs)) <= 1:
        # one boot: its own summary, the page of an unmerged run
        return benchsummary.summarize(new, notes_path)
    env = {k: new["environment"].get(k) for k in SAME}
    env["host_cpu_model"] = host_cpu_models(runs)
    out = {"schema_version": 3, "form": new.get("form"), "environment": env, "part_runs": runs, "rounds": {}}
    for part, (keys, rounds, env_keys) in PART_KEYS.items():
        d = src[part]
        out.update({k: copy.deepcopy(d[k]) for k in keys if k in d})
        out["rounds"].update({k: copy.deepcopy(d["rounds"][k]) for k in rounds if k in (d.get("rounds") or {})})
        env.update({k: d["environment"].get(k) for k in env_keys})
    out.setdefault("derived", {})
    out["targets"] = [t for part in TARGET_ORDER for t in src[part].get("targets") or []
                      if target_part(t) == part] + [quiet_target(runs)]
    out = {k: out[k] for k in ORDER if k in out}
    return benchsummary.summarize(out, notes_path)
