"""tests/bench/benchtable.py: results.json (tests/bench/render collect) or its summary -> RESULTS.md."""
import os
import re

import benchdefaults
import benchdp
import benchpeer
from benchstats import AT_LIMIT_WORDS, MIB, WIDE, MIN_PAIRS, fmt_mib, size_text

TARGET_REG_RATIO = 1.05      # fixed/stock registration time, per size
TARGET_FLAT = 0.20           # per-GiB cost across sizes: (max - min) / min
TARGET_TOOL_RATIO = 1.0      # rxe-verify / perftest wire bandwidth: the verifier moves data at least as fast as perftest
TARGET_QUIET = 0.05          # host CPU outside QEMU, share of the host: "the machine to itself"
MOD_NAME = {"stock": "stock", "fixed": "rxe-kvfix"}
# the parts of a run (render collect), their bench_parts names, and the part each plot draws
PARTS = (("registration", "reg"), ("bandwidth", "bw"), ("defaults", "defaults"), ("fragmented", "frag"),
         ("data path", "dp"))
PLOT_PART = {"reg-per-gib.png": "registration", "frag.png": "fragmented", "bw.png": "bandwidth", "peer.png": "bandwidth"}


def quiet_target(env):
    """The benchmark had the machine to itself: the host's CPU outside QEMU at most
    TARGET_QUIET of the host over the boot and in every part."""
    t = f"the machine to itself: host CPU outside the QEMU process ≤ {TARGET_QUIET:.0%} of the host, whole boot and every part"
    cpu = env.get("host_cpu")
    if not cpu:
        return {"target": t, "verdict": "undecided", "why": "the host samples carry no CPU ticks (a run before 2026-12-05)"}
    worst = max(c["share_outside_qemu"] for c in cpu.values() if c)
    return {"target": t, "verdict": "met" if worst <= TARGET_QUIET else "not met",
            "why": host_cpu_text(cpu) + " (the host's 1-minute load counts the guest's own vCPU threads, so it is not the measure)"}


def host_cpu_text(cpu):
    """'0.02 cores (1.0 % of 2) over the whole boot; registration ..., ...; QEMU 1.87 cores'."""
    w = cpu["whole boot"]
    parts = [f"{k} {cpu_one(c)}" for k, c in cpu.items() if k != "whole boot" and c]
    return (f"{cpu_one(w)} over the whole boot" + ("; " + ", ".join(parts) if parts else "")
            + f"; QEMU itself {w['cores_qemu']:.2f} cores")


def cpu_one(c):
    return f"{c['cores_outside_qemu']:.2f} cores ({c['share_outside_qemu']:.1%} of {c['nproc']})"


def boots(runs):
    """part_runs (a page merged by render merge) -> [(the boot's record, [its parts])], in part order."""
    out = []
    for part, _ in PARTS:
        r = runs.get(part)
        if r:
            same = [b for b in out if (b[0].get("date_start"), b[0].get("commit")) == (r.get("date_start"), r.get("commit"))]
            if not same:
                out.append((r, []))
            (same or out[-1:])[0][1].append(part)
    return out


def runs_table(res, runs, p):
    """A merged page's header: which boot each part's figures come from."""
    env, bs = res["environment"], boots(runs)
    p(f"{res.get('form')} form, the figures of {len(bs)} boots merged part by part (`tests/bench/render merge`: the "
      f"table says which boot each part comes from), kernel {env.get('kernel')}, QEMU/TCG guest on a "
      f"{env.get('host_nproc')}-core host.")
    p("")
    p("| part | boot (UTC) | commit | form | the part's time | host 1-minute load over the boot | "
      "host CPU outside QEMU: the part; the whole boot | host CPU model |")
    p("|---|---|---|---|---|---|---|---|")
    for part, _ in PARTS:
        r = runs.get(part)
        if not r:
            p(f"| {part} | not run in these boots | – | – | – | – | – | – |")
            continue
        hl, cpu = r.get("host_load1_samples"), r.get("host_cpu") or {}
        load = (f"{hl['median']:.2f} median ({hl['min']:.2f}–{hl['max']:.2f}, {hl['n']} samples)" if hl else
                f"start {(r.get('host_loadavg') or {}).get('start')}, end {(r.get('host_loadavg') or {}).get('end')}")
        w = cpu.get("whole boot")
        c = (f"{cpu_one(cpu[part]) if cpu.get(part) else '–'}; {cpu_one(w)}, QEMU itself {w['cores_qemu']:.2f} cores" if w
             else "no CPU ticks sampled")
        p(f"| {part} | {r.get('date_start')} – {r.get('date_end')} | {r.get('commit')} | {r.get('form')} | "
          f"{'–' if r.get('seconds') is None else format(r['seconds'], '.0f') + ' s'}"
          f"{'' if r.get('vm_wall_seconds') is None else ' of a ' + format(r['vm_wall_seconds'], '.0f') + ' s VM'} | {load} | {c} | "
          f"{r.get('host_cpu_model') or '–'} |")


def fmt_stats(s, scale=1.0, prec=3, unit=""):
    if not s:
        return "–"
    return f"{s['median'] * scale:.{prec}f}{unit} ({s['min'] * scale:.{prec}f}–{s['max'] * scale:.{prec}f}, n={s['n']})"


def fmt_rv(r):
    """A ratio_verdict: median [min–max, n pairs]."""
    if not r or not r.get("n"):
        return "–"
    return f"{r['median']:.2f} [{r['min']:.2f}–{r['max']:.2f}, {r['n']} pairs]"


def fmt_load(h):
    return "–" if not h else f"{h['mean']:.2f} (max {h['max']:.2f})"


def read_notes(path):
    """PLOT.png: sentence lines; 'run: DATE' names the run they were written for."""
    notes, run = {}, None
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^([\w.-]+\.png):\s*(.+)$", line.strip())
                if m:
                    notes[m.group(1)] = m.group(2)
                elif line.startswith("run:"):
                    run = line[4:].strip()
    return notes, run


def mod_text(m):
    """A module's file and version as the guest recorded it, or why there is none (bench.sh
    before 2026-12-08 recorded rxe-kvfix's in the registration part only)."""
    return f"`{m}`" if m else "not recorded"


def markdown(res, plots, notes_path):
    env, reg, frag = res["environment"], res["registration"], res["fragmented"]
    bwp = res.get("bandwidth_pairs")
    notes, notes_run = read_notes(notes_path)
    runs = res.get("part_runs")
    L = []
    p = L.append

    def plot(name, what):
        if "skipped" in plots:
            p(f"*Plot `{name}` ({what}) not rendered: {plots['skipped']}.*")
            p("")
            return
        if name not in plots:
            p(f"*Plot `{name}` ({what}): no figures to plot.*")
            p("")
            return
        p(f"![{what}]({name})")
        p("")
        n = notes.get(name)
        # a merged page: the run of the part the plot draws
        run = (runs.get(PLOT_PART[name]) or {}).get("date_start") if runs else env.get("date_start")
        if n and notes_run == run:
            p(f"*What it shows:* {n}")
        elif n:
            p(f"*What it showed in the run of {notes_run} (this is the run of {run}: "
              f"look at the plot again and update tests/bench/plot-notes.txt):* {n}")
        else:
            p("*No reader's note yet: look at the PNG and add a line to tests/bench/plot-notes.txt.*")
        p("")

    hl = env.get("host_load1_samples")
    p("# rxe-kvfix benchmarks: stock rdma_rxe beside rxe-kvfix")
    p("")
    if runs:
        runs_table(res, runs, p)
    else:
        p(f"{res.get('form')} form, {env.get('date_start')}, kernel {env.get('kernel')}, QEMU/TCG guest on a "
          f"{env.get('host_nproc')}-core host, host 1-minute load during the boot "
          + (f"{hl['median']:.2f} median ({hl['min']:.2f}–{hl['max']:.2f}, {hl['n']} samples, the guest's own vCPU threads included: under TCG a busy 2-vCPU guest alone brings a 2-core host near 2)" if hl else
             f"start {env['host_loadavg'].get('start')}, end {env['host_loadavg'].get('end')}") + ".")
    cpu = not runs and env.get("host_cpu")
    if cpu:
        p("")
        p(f"Host CPU outside the QEMU process (what else ran on the host): {host_cpu_text(cpu)}.")
    p("")
    p("## Targets")
    p("")
    for t in res.get("targets") or []:
        p(f"- **{t['verdict']}** — {t['target']}: {t['why']}" + (f" *Timed by:* {t['method']}." if t.get("method") else ""))
    p("")
    p("Kernel-side decisions (when the guest could trace): per size, the geometric mean of the pairs' "
      "fixed/stock ratios of the kernel's median time in `rxe_reg_user_mr`, with a 95 % Student-t interval "
      "on the logs; met when its top is ≤ the limit, not met when its bottom is above it, otherwise "
      "undecided with the number of pairs the measured spread would need. Flatness: the spread of the "
      "per-size means with bounds from each size's 95 % interval, and likewise.")
    p("")
    p("Targets are printed, never enforced (a benchmark measures, tests assert). Paired verdicts: the "
      "interval is the min–max of the per-pair ratios; *excludes 1.0* when the whole interval is on one "
      f"side, *includes 1.0* when it holds 1.0 and lies within {1 / WIDE:.2f}–{WIDE:.2f}, otherwise *too "
      f"wide to tell*; with fewer than {MIN_PAIRS} pairs, too few to tell. A target 'ratio ≤ X' is met when "
      "the interval's top is ≤ X, not met when its bottom is above X, undecided between (and with fewer than "
      f"{MIN_PAIRS} pairs); 'ratio ≥ X' the other way round; several sizes: not met if one is, met if all are.")
    p("")
    benchpeer.section(res, p, res.get("peer_build") or {})
    if res.get("peer_pairs"):
        plot("peer.png", "verified bandwidth per tool and message size")
    p("Regenerate: `make bench` (the full form; CI runs the short form in `tests/vm/scenarios --only bench`). "
      + ("This file, `summary.json` and the plots were written by `tests/bench/render` from one guest boot; " if not runs else
         f"This file and `summary.json` merge {len(boots(runs))} guest boots part by part: a run of some parts "
         "(`make bench BENCH_PARTS=defaults`) is merged into the published `summary.json` by `tests/bench/render merge`, "
         "the plots are those of the boot of their part; ")
      + "`summary.json` holds the figures this page is rendered from (`tests/bench/render table summary.json`), "
      f"the {'boots' + chr(39) if runs else 'boot' + chr(39) + 's'} raw samples (`results.json`) stay in {'their' if runs else 'its'} results "
      f"{'directories' if runs else 'directory'}.")
    p("")
    p(f"**All figures were measured under {env.get('emulation')}** on a {env.get('host_nproc')}-core host "
      f"({env.get('host_cpu_model')}), not on hardware: absolute times and bandwidths are those of an emulated CPU "
      "and only the comparisons (same guest, same boot, same commands, interleaved) carry over.")
    p("")
    p("| | |")
    p("|---|---|")
    npairs = max((len(x["pairs"]) for x in bwp), default=0) if bwp else 0
    p(f"| form | {res.get('form')}: {env.get('rounds')} registration rounds of {env.get('reg_reps')} registrations "
      f"per size, {env.get('frag_rounds')} fragmented rounds, "
      + (f"{npairs} interleaved bandwidth pairs per message size" if bwp else "no bandwidth pairs")
      + (f" (parts: {'; '.join(', '.join(ps) + ' from the boot of ' + str(r.get('date_start')) for r, ps in boots(runs))})" if runs else
         f" (parts: {env.get('parts')})" if env.get("parts") else "") + " |")
    p(f"| kernel | {env.get('kernel')} |")
    p(f"| guest | {env.get('guest_mem')} memory, {env.get('guest_cpus')} vCPUs |")
    if runs:
        p("| host load, host CPU, when, commit | per part, in the table at the top |")
        mods = {}
        for r, _ in boots(runs):
            mods.setdefault((r.get("stock_module"), r.get("fixed_module")), []).append(str(r.get("date_start")))
        p("| modules | " + "; ".join(f"stock: {mod_text(sm)}; rxe-kvfix: {mod_text(fm)}"
                                     + (f" (the boot{'s' if len(ds) > 1 else ''} of {', '.join(ds)})" if len(mods) > 1 else "")
                                     for (sm, fm), ds in mods.items()) + " |")
    else:
        p(f"| host load (1/5/15 min) | start {env['host_loadavg'].get('start')}, end {env['host_loadavg'].get('end')}; "
          + (f"1-minute load sampled every 5 s: median {hl['median']:.2f}, {hl['min']:.2f}–{hl['max']:.2f}" if hl else "not sampled")
          + " |")
        if env.get("host_cpu"):
            p(f"| host CPU outside QEMU | {host_cpu_text(env['host_cpu'])} (from /proc/stat and QEMU's /proc/PID/stat every 5 s) |")
        ps = env.get("part_seconds") or {}
        p(f"| VM wall time | {env.get('vm_wall_seconds')} s (registration {ps.get('registration') or 0:.0f} s, "
          f"bandwidth {ps.get('bandwidth') or 0:.0f} s, "
          + (f"defaults {ps['defaults']:.0f} s, " if ps.get("defaults") else "")
          + f"fragmented {ps.get('fragmented') or 0:.0f} s) |")
        p(f"| when, commit | {env.get('date_start')} – {env.get('date_end')}, {env.get('commit')} |")
        p(f"| modules | stock: {mod_text(env.get('stock_module'))}; rxe-kvfix: {mod_text(env.get('fixed_module'))} |")
    p("")

    # ------------------------------------------------------------------ registration
    p("## Registration time, interleaved")
    p("")
    p("Rounds in ABBA order (stock, rxe-kvfix, rxe-kvfix, stock, ...) in one boot; each round loads its "
      "module, adds rxe0 and runs `rxe-verify churn -s SIZE --count N` per size: one region, allocated and "
      "pre-faulted once, registered and deregistered N times, `ibv_reg_mr` (pinning + the rxe page table) "
      "and `ibv_dereg_mr` timed separately. A round's figure is the median of its N; rounds 2p−1 and 2p "
      "are pair p, and the pair's ratio is rxe-kvfix's round over stock's. Module columns: the median of "
      "the round figures (min–max, n rounds).")
    p("")
    p("| MR size | metadata (order) | stock: s per GiB | rxe-kvfix: s per GiB | rxe-kvfix/stock (paired) | verdict | stock dereg s | rxe-kvfix dereg s | dereg rxe-kvfix/stock (paired) |")
    p("|---|---|---|---|---|---|---|---|---|")
    for s in reg["sizes"]:
        md = f"{size_text(s['metadata_bytes'])} ({s['metadata_order']})" if s.get("metadata_bytes") else "–"

        def cell(m, key):
            x = s[m]
            if x["failed_rounds"] and not x[key]:
                return f"**failed: {', '.join(x['errors'])}**"
            t = fmt_stats(x[key], prec=4)
            return t + (f" ({x['failed_rounds']} round(s) failed: {', '.join(x['errors'])})" if x["failed_rounds"] else "")
        p(f"| {s['size_text']} | {md} | {cell('stock', 'per_gib_round_medians')} | {cell('fixed', 'per_gib_round_medians')} | "
          f"{fmt_rv(s['reg_ratio'])} | {s['reg_ratio']['verdict']} | {cell('stock', 'dereg_round_medians')} | "
          f"{cell('fixed', 'dereg_round_medians')} | {fmt_rv(s['dereg_ratio'])} ({s['dereg_ratio']['verdict']}) |")
    for e in reg["fixed_only"]:
        md = f"{size_text(e['metadata_bytes'])} ({e['metadata_order']})" if e.get("metadata_bytes") else "–"
        p(f"| {e['size_text']} | {md} | not run (stock cannot: order > 10) | "
          f"{fmt_stats(e.get('reg_seconds_per_gib'), prec=4) if e.get('registered') else '**' + str(e.get('error')) + '**'} "
          f"(one pass of {e.get('count')}, rxe-kvfix only) | – | – | – | {fmt_stats(e.get('dereg_seconds'), prec=4)} | – |")
    p("")
    ks = [x for x in reg["sizes"] if x.get("pairs_kreg")]
    if ks:
        p("")
        p("Kernel-side (ftrace function_graph: the duration of every `rxe_reg_user_mr` call; module "
          "columns: the median of the round medians, seconds per GiB):")
        p("")
        p("| MR size | stock: kernel s per GiB | rxe-kvfix: kernel s per GiB | pairs | rxe-kvfix/stock geometric mean [95 %] | verdict (≤ "
          f"{TARGET_REG_RATIO}) |")
        p("|---|---|---|---|---|---|")
        for x in ks:
            k = x["kreg_interval"]
            iv = f"{k['geomean']:.3f} [{k['lo']:.3f}–{k['hi']:.3f}]" if k.get("geomean") else "–"
            need = (f", about {k['pairs_needed']} pairs would decide it" if k.get("pairs_needed") else "") + (
                ", the estimate sits on the limit" if k.get("at_limit") else "")
            p(f"| {x['size_text']} | {fmt_stats(x['stock'].get('kreg_per_gib_round_medians'), prec=4)} | "
              f"{fmt_stats(x['fixed'].get('kreg_per_gib_round_medians'), prec=4)} | {k['n']} | {iv} | {k['verdict']}{need} |")
        for e in reg["fixed_only"]:
            if e.get("kreg_seconds_per_gib"):
                p(f"| {e['size_text']} | not run (order > 10) | {fmt_stats(e['kreg_seconds_per_gib'], prec=4)} (calls) | – | – | – |")
        kf = res["derived"].get("fixed_kernel_per_gib_flatness")
        if kf:
            p("")
            p("- rxe-kvfix, kernel seconds per GiB, mean per size: " +
              ", ".join(f"{size_text(sz)} {v:.4f}" for sz, v in zip(kf["sizes"], kf["means"])) +
              f"; spread **{kf['spread']:.0%}** [{kf['spread_lo']:.0%}–"
              + (f"{kf['spread_hi']:.0%}" if kf["spread_hi"] is not None else "unbounded")
              + f"] (target ≤ {TARGET_FLAT:.0%}): {kf['verdict']}"
              + (f", about {kf['samples_needed']} samples per size would decide it" if kf.get("samples_needed") else "")
              + (AT_LIMIT_WORDS if kf.get("at_limit") else "") + ".")
        p("")
    fl = res["derived"].get("fixed_per_gib_flatness")
    if fl:
        p("- rxe-kvfix, median seconds per GiB per size: " +
          ", ".join(f"{size_text(sz)} {v:.4f}" for sz, v in zip(fl["sizes"], fl["median_seconds_per_gib"])) +
          f"; spread (max−min)/min **{fl['spread']:.0%}** (target ≤ {TARGET_FLAT:.0%}): {fl['verdict']}.")
    p("- Pair ratios per size (pair: fixed/stock): " + "; ".join(
        f"{s['size_text']} " + ", ".join(f"{pp}: {r:.2f}" for pp, r in s["pairs_reg"]) for s in reg["sizes"] if s["pairs_reg"]) + ".")
    p("")
    p("Per round: the module, the host's 1-minute load while it ran (mean of the 5-s samples), the guest's "
      "at its start, its length, and its median registration seconds per size.")
    p("")
    sizes = [s["size_text"] for s in reg["sizes"]]
    p("| round | pair | module | host load | guest load | s | " + " | ".join(sizes) + " |")
    p("|---|---|---|---|---|---|" + "---|" * len(sizes))
    med = {(e["round"], s["size_text"]): e for s in reg["sizes"] for e in s["rounds"]}
    for r in res["rounds"]["registration"]:
        if r["round"] == 99:
            continue
        cells = []
        for t in sizes:
            e = med.get((r["round"], t))
            cells.append("–" if not e else (f"{e['reg_seconds']['median']:.4f}" if e.get("reg_seconds") else f"**{e.get('error')}**"))
        p(f"| {r['round']} | {(r['round'] + 1) // 2} | {MOD_NAME.get(r.get('module'), '?')} | {fmt_load(r.get('host_load1'))} | "
          f"{(r.get('guest_load_start') or '–').split(' ')[0]} | {r.get('seconds', 0):.0f} | " + " | ".join(cells) + " |")
    p("")
    plot("reg-per-gib.png", "seconds per GiB against MR size, both modules, every round; the kernel's own time when the run has it")

    # ------------------------------------------------------------------ kernel memory
    p("## Kernel memory per registered GiB")
    p("")
    p("From the churn runs of each module's first round: `/proc/meminfo` and the sum of `/proc/vmallocinfo` read "
      "before the first registration and while it is live, divided by the size in GiB. Expected: the rxe page "
      "table, 16 B per 4 KiB page = 4 MiB per GiB. Stock allocates it with kzalloc: above 8 KiB that comes "
      "straight from the page allocator and is counted in Slab (SUnreclaim) too. rxe-kvfix's kvcalloc() tries "
      "the same kmalloc first and gets it up to 4 MiB (MRs up to 1 GiB: the same figures as stock); above, "
      "vmalloc serves it: MemFree drop and VmallocUsed rise, no Slab. MiB per GiB:")
    p("")
    p("| MR size | stock: MemFree drop | stock: Slab | stock: VmallocUsed | rxe-kvfix: MemFree drop | rxe-kvfix: Slab | rxe-kvfix: VmallocUsed | rxe-kvfix: vmallocinfo |")
    p("|---|---|---|---|---|---|---|---|")
    rows = [(s["size"], s["stock"]["kernel_memory_per_gib"] or {}, s["fixed"]["kernel_memory_per_gib"] or {}) for s in reg["sizes"]]
    rows += [(e["size"], {}, e.get("kernel_memory_per_gib") or {}) for e in reg["fixed_only"]]
    for size, s, f in rows:
        p(f"| {size_text(size)} | {fmt_mib(s.get('memfree_drop'))} | {fmt_mib(s.get('slab'))} | {fmt_mib(s.get('vmalloc_used'))} | "
          f"{fmt_mib(f.get('memfree_drop'))} | {fmt_mib(f.get('slab'))} | {fmt_mib(f.get('vmalloc_used'))} | {fmt_mib(f.get('vmallocinfo'))} |")
    p("")

    # ------------------------------------------------------------------ fragmented
    p("## The fragmented guest")
    p("")
    if not frag["sizes"]:
        p("No fragmented figures: the fragmenter did not run (see the guest log; it needs gcc on the host).")
        p("")
    else:
        p("`rxe-fragment` (tests/vm/tools/fragment.c) fills the guest's memory with huge pages, keeps one mlocked "
          "4 KiB page in every 2 MiB block and frees the rest, and keeps holding it: no free block above order 8 "
          "is left, and its settings (extfrag_threshold 1000, no proactive compaction, mlocked pages unmovable) "
          "keep compaction from rebuilding one. Before each registration it tops up (takes any 2 MiB block "
          "that appeared); then one `churn --count 1 --force`, `/proc/vmstat` copied right before and after. "
          "Rounds in ABBA order as above. Stock needs one physically contiguous block of the metadata's order "
          "(order 8 at 256 MiB, 9 at 512 MiB, 10 at 640 MiB and 1 GiB); rxe-kvfix's kvcalloc falls back to "
          "vmalloc. 'time to fail' is how long stock's `ibv_reg_mr` took to return ENOMEM.")
        p("")
        for ln in frag.get("fragmenter") or []:
            p(f"    {ln}")
        p("")
        p("| MR size | metadata order | stock: registered | stock: s to register | stock: s to fail | stock: failure | rxe-kvfix: registered | rxe-kvfix: s to register | rxe-kvfix/stock (paired, both registered) | rxe-kvfix/stock (paired, stock's time to register or to fail) | dereg s stock / rxe-kvfix | compact_stall stock / rxe-kvfix | allocstall stock / rxe-kvfix |")
        p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for s in frag["sizes"]:
            st, fx = s["stock"], s["fixed"]
            p(f"| {s['size_text']} | {s.get('metadata_order', '–')} | {st['registered']}/{st['attempts']} | {fmt_stats(st['reg_seconds'], prec=4)} | "
              f"{fmt_stats(st['fail_seconds'], prec=4)} | {', '.join(st['causes']) or '–'} | {fx['registered']}/{fx['attempts']} | "
              f"{fmt_stats(fx['reg_seconds'], prec=4)} | {fmt_rv(s['reg_ratio'])} ({s['reg_ratio']['verdict']}) | "
              f"{fmt_rv(s.get('any_ratio'))} ({(s.get('any_ratio') or {}).get('verdict', '–')}) | "
              f"{fmt_stats(st.get('dereg_seconds'), prec=4)} / {fmt_stats(fx.get('dereg_seconds'), prec=4)} | "
              f"{st['compact_stall']} / {fx['compact_stall']} | {st['allocstall']} / {fx['allocstall']} |")
        p("")
        p("Per registration (the `/proc/vmstat` deltas between the readings right before and right after it; "
          "allocstall is the sum of `allocstall_*`; the churn also allocates and faults in its region there, so "
          "a stall may belong to the region, not to the rxe page table):")
        p("")
        p("| round | module | MR size | result | seconds | free blocks ≥ order before | compact_stall | compact_fail | compact_success | allocstall | host load |")
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for s in frag["sizes"]:
            for a in s["attempts"]:
                v = a.get("vmstat") or {}
                res_txt = "registered" if a["registered"] else f"**failed**: {a.get('error')}"
                by_zone = ", ".join(f"{k[len('allocstall_'):]} {n}" for k, n in (v.get("allocstall_by_zone") or {}).items())
                p(f"| {a['round']} | {MOD_NAME[a['module']]} | {s['size_text']} | {res_txt} | "
                  f"{'–' if a['seconds'] is None else format(a['seconds'], '.4f')} | {'–' if a.get('free_blocks_before') is None else a['free_blocks_before']} | "
                  f"{v.get('compact_stall', '–')} | {v.get('compact_fail', '–')} | {v.get('compact_success', '–')} | "
                  f"{v.get('allocstall', '–')}{' (' + by_zone + ')' if by_zone else ''} | {fmt_load(a.get('host_load1'))} |")
        p("")
    plot("frag.png", "registration in the fragmented guest: seconds to register (or, for stock, to fail), per attempt")

    # ------------------------------------------------------------------ bandwidth
    p("## RDMA bandwidth")
    p("")
    if bwp:
        p("Interleaved pairs (`bw-pairs.tsv`: one rxe-verify run and one perftest run per pair, same message "
          "size and operation); the ratio is rxe-verify's MiB/s over perftest's, per pair. Target (printed, "
          f"never enforced): ≥ {TARGET_TOOL_RATIO}.")
        p("")
        p("`tests/vm/guest/bw.sh` on rxe-kvfix: `rxe-verify run -m full --msg-size MSG -t 128` (pipelined, every "
          "byte checked; *wire* = time with requests in flight, *verified* = wall time including fills and checks) "
          "against `ib_write_bw` / `ib_read_bw -s MSG -n REGION/MSG -t 128 -u 19` (READ also `-o 16`, rxe-verify's "
          "max_rd_atomic; `-u 19` is rxe-verify's QP timeout, since perftest's default 14 retransmitted under TCG), "
          "pairs in ABBA order. Retransmissions are the port's completer_retry_err counter over the runs.")
        p("")
        p("| message | op | rxe-verify wire MiB/s | rxe-verify verified MiB/s | perftest MiB/s | rxe-verify/perftest (paired) | verdict | retransmissions rv / pt |")
        p("|---|---|---|---|---|---|---|---|")
        for x in bwp:
            rt = x.get("retries")
            p(f"| {x['msg_text']} | {x['op'].upper()} | {fmt_stats(x['rv_MiBps'], prec=1)} | {fmt_stats(x.get('rv_verified_MiBps'), prec=1)} | "
              f"{fmt_stats(x['pt_MiBps'], prec=1)} | {fmt_rv(x['ratio'])} | {x['ratio']['verdict']} | "
              f"{'–' if not rt else str(rt['rxe-verify']) + ' / ' + str(rt['perftest'])} |")
        p("")
    sp = res.get("bandwidth_span")
    if sp:
        p("Full span: `rxe-verify run -s 1G+16 -m full` (1 GiB + 16 B, 262,145 pages, every byte both ways, "
          "64 MiB messages) beside `ib_write_bw -s 513M -n 5` (perftest registers 2 × 513 MiB = a 1026 MiB MR), "
          "one run each, MiB/s:")
        p("")
        p("| | WRITE | READ |")
        p("|---|---|---|")
        for what in ("rxe-verify wire", "rxe-verify verified", "perftest wire"):
            v = sp.get(what) or {}
            p(f"| {what} | {'–' if 'write' not in v else format(v['write'], '.1f')} | {'–' if 'read' not in v else format(v['read'], '.1f')} |")
        p("")
    plot("bw.png", "bandwidth: rxe-verify against perftest per pair")
    benchdefaults.section(res, p)
    benchdp.section(res, p)
    return "\n".join(L) + "\n"


__all__ = ["markdown", "quiet_target", "TARGET_REG_RATIO", "TARGET_FLAT", "TARGET_TOOL_RATIO", "TARGET_QUIET", "MIB"]
