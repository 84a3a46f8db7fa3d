"""tests/bench/benchplot.py: the PNG plots of RESULTS.md, rendered with gnuplot
(Debian package gnuplot-nox; tests/host-deps installs it).

render_all(res, dir) -> ({name: title}, None) or ({}, why) when gnuplot is missing
or fails: the caller prints the reason loudly and the page says the plots were
skipped and why.
"""
import os
import shutil
import subprocess
import tempfile

from benchstats import MIB
from benchtable import TARGET_TOOL_RATIO

# the plots' file names, beside RESULTS.md
NAMES = ("reg-per-gib.png", "frag.png", "bw.png", "peer.png")
MOD_STYLE = {"stock": 'lc rgb "#c0392b" pt 7 ps 1.1', "fixed": 'lc rgb "#1f5fa8" pt 9 ps 1.2'}
MOD_NAME = {"stock": "stock rdma_rxe", "fixed": "rxe-kvfix"}


def _terminal():
    out = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    text = out.stdout + out.stderr
    if "pngcairo" in text:
        return 'set terminal pngcairo size 960,560 noenhanced font "DejaVu Sans,11"'
    if " png " in text or "\npng" in text or "png " in text:
        return "set terminal png size 960,560 noenhanced"
    return None


def _block(name, rows):
    lines = [f"${name} << EOD"] + [" ".join(str(x) for x in r) for r in rows] + ["EOD"]
    return "\n".join(lines) + "\n"


def _run(script, path):
    with tempfile.NamedTemporaryFile("w", suffix=".gp", delete=False) as f:
        f.write(script)
        gp = f.name
    try:
        out = subprocess.run(["gnuplot", gp], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(gp)
    if out.returncode != 0 or not os.path.exists(path) or os.path.getsize(path) == 0:
        return f"gnuplot failed on {os.path.basename(path)}: {(out.stderr or '').strip().splitlines()[-1:]}"
    return None


def plot_reg(res, path, term):
    """Seconds per GiB against MR size: the kernel's own time in rxe_reg_user_mr (the
    figure the targets are decided on) when the run has it, else rxe-verify's clock."""
    reg = res["registration"]
    kernel = any(e.get("kreg_seconds_per_gib") for s in reg["sizes"] for e in s["rounds"])
    per_gib, round_medians = ("kreg_seconds_per_gib", "kreg_per_gib_round_medians") if kernel else \
        ("reg_seconds_per_gib", "per_gib_round_medians")
    pts = {"stock": [], "fixed": []}
    med = {"stock": [], "fixed": []}
    for s in reg["sizes"]:
        mib = s["size"] / MIB
        for e in s["rounds"]:
            v = (e.get(per_gib) or {}).get("median")
            if v:
                pts[e["module"]].append((mib * (0.94 if e["module"] == "stock" else 1.06), v))
        for m in ("stock", "fixed"):
            st = s[m][round_medians]
            if st:
                med[m].append((mib, st["median"]))
    for e in reg["fixed_only"]:
        for v in (e.get(per_gib) or {}).get("samples") or []:
            pts["fixed"].append((e["size"] / MIB * 1.06, v))
        if e.get(per_gib):
            med["fixed"].append((e["size"] / MIB, e[per_gib]["median"]))
    if not pts["stock"] and not pts["fixed"]:
        return False, None
    s = term + "\n" + f'set output "{path}"\n'
    for m in ("stock", "fixed"):
        s += _block(f"p{m}", pts[m] or [("NaN", "NaN")]) + _block(f"m{m}", med[m] or [("NaN", "NaN")])
    ylabel = "seconds per GiB in rxe_reg_user_mr (ftrace)" if kernel else "seconds per GiB (ibv_reg_mr, process clock)"
    s += ('set title "Registration: seconds per GiB by MR size (points: round medians, past 1 GiB '
          'single registrations; lines: medians)"\n'
          f'set logscale x 2\nset logscale y\nset xlabel "MR size (MiB)"\nset ylabel "{ylabel}"\n'
          'set xtics ("64" 64, "128" 128, "256" 256, "512" 512, "1024" 1024, "2048" 2048, "4096" 4096, "8192" 8192)\n'
          'set grid\nset key bottom left box opaque\n')
    top = max(x for v in pts.values() for x, _ in v)
    s += f"set xrange [45:{top * 1.35:.0f}]\n"
    if reg["fixed_only"]:
        s += ('set arrow from 1024*1.3, graph 0 to 1024*1.3, graph 1 nohead dt 2 lc rgb "#888888"\n'
              'set label "rxe-kvfix only ->" right at 1024*1.25, graph 0.95 tc rgb "#666666"\n'
              'set label "(stock: order > 10)" right at 1024*1.25, graph 0.91 tc rgb "#666666"\n')
    s += ("plot " + ", ".join(
        [f'$p{m} using 1:2 with points {MOD_STYLE[m]} title "{MOD_NAME[m]}, per round"' for m in ("stock", "fixed")] +
        [f'$m{m} using 1:2 with lines {MOD_STYLE[m].split(" pt")[0]} lw 2 title "{MOD_NAME[m]}, median"' for m in ("stock", "fixed")]) + "\n")
    return True, _run(s, path)


def plot_frag(res, path, term):
    frag = res["fragmented"]
    if not frag["sizes"]:
        return False, None
    rows = {"sok": [], "sfail": [], "fok": [], "ffail": []}
    xt = []
    for i, s in enumerate(frag["sizes"]):
        xt.append(f'"{s["size_text"].replace(" ", "")}" {i}')
        for a in s["attempts"]:
            if a["seconds"] is None:
                continue
            k = ("s" if a["module"] == "stock" else "f") + ("ok" if a["registered"] else "fail")
            rows[k].append((i + (-0.12 if a["module"] == "stock" else 0.12) + 0.02 * (a["round"] % 3 - 1), a["seconds"]))
    s = term + "\n" + f'set output "{path}"\n'
    for k, v in rows.items():
        s += _block(k, v or [("NaN", "NaN")])
    s += ('set title "Fragmented guest: seconds for ibv_reg_mr to register, or (stock) to fail with ENOMEM"\n'
          f'set xtics ({", ".join(xt)})\nset xrange [-0.6:{len(xt) - 0.4}]\nset logscale y\nset grid ytics\n'
          'set xlabel "MR size"\nset ylabel "seconds"\nset key outside right top\n'
          'plot $sok using 1:2 with points lc rgb "#c0392b" pt 7 ps 1.3 title "stock: registered", '
          '$sfail using 1:2 with points lc rgb "#c0392b" pt 2 ps 1.8 lw 2 title "stock: failed (time to fail)", '
          '$fok using 1:2 with points lc rgb "#1f5fa8" pt 9 ps 1.4 title "rxe-kvfix: registered", '
          '$ffail using 1:2 with points lc rgb "#1f5fa8" pt 3 ps 1.8 lw 2 title "rxe-kvfix: failed"\n')
    return True, _run(s, path)


def plot_bw(res, path, term):
    """rxe-verify/perftest per interleaved pair (bw-pairs.tsv), the median per message size and
    operation, and the target as a dashed line; nothing to plot without pairs."""
    bwp = res.get("bandwidth_pairs")
    if not bwp:
        return False, None
    rows, xt = [], []
    for i, x in enumerate(bwp):
        xt.append(f'"{x["msg_text"].replace(" ", "")} {x["op"].upper()}" {i}')
        for j, pr in enumerate(x["pairs"]):
            rows.append((i + 0.04 * (j % 5 - 2), pr["ratio"]))
    med = [(i, x["ratio"]["median"]) for i, x in enumerate(bwp) if x["ratio"]["median"] is not None]
    s = term + "\n" + f'set output "{path}"\n'
    s += _block("r", rows) + _block("m", med or [("NaN", "NaN")])
    s += ('set title "Bandwidth: rxe-verify / perftest per interleaved pair (bw-pairs.tsv)"\n'
          f'set xtics ({", ".join(xt)})\nset xrange [-0.6:{len(xt) - 0.4}]\nset grid ytics\n'
          'set ylabel "rxe-verify MiB/s / perftest MiB/s"\nset key outside right top\n'
          f'set arrow from graph 0, first {TARGET_TOOL_RATIO} to graph 1, first {TARGET_TOOL_RATIO} nohead dt 2 lc rgb "#888888"\n'
          'plot $r using 1:2 with points lc rgb "#1f5fa8" pt 7 title "one pair", '
          '$m using 1:2 with points lc rgb "#000000" pt 5 ps 1.6 title "median"\n')
    return True, _run(s, path)


def plot_peer(res, path, term):
    """Verified bandwidth per tool and message size (peer-pairs.tsv): rxe-verify's
    verified rate and perftest 26's --data_validation rate, one point per pair; WRITE
    left and READ right of each size. Nothing to plot without peer pairs."""
    peer = res.get("peer_pairs")
    if not peer:
        return False, None
    rows = {("rv", "write"): [], ("rv", "read"): [], ("pt", "write"): [], ("pt", "read"): []}
    xt, slot = [], {}
    for x in peer:
        if x["msg_text"] not in slot:
            slot[x["msg_text"]] = len(slot)
            xt.append(f'"{x["msg_text"].replace(" ", "")}" {slot[x["msg_text"]]}')
        i = slot[x["msg_text"]] + (-0.12 if x["op"] == "write" else 0.12)
        for tool, key in (("rv", "rv_verified"), ("pt", "pt_verified")):
            for j, pr in enumerate(x["pairs"]):
                if pr[key]:
                    rows[(tool, x["op"])].append((i + (0.03 if tool == "pt" else -0.03) + 0.01 * (j % 3 - 1), pr[key]))
    s = term + "\n" + f'set output "{path}"\n'
    style = {"rv": ('lc rgb "#1f5fa8"', "rxe-verify verified"), "pt": ('lc rgb "#c0392b"', "perftest 26 --data_validation")}
    plots = []
    for (tool, op), pts in rows.items():
        name = f"{tool}{op}"
        s += _block(name, pts or [("NaN", "NaN")])
        plots.append(f'${name} using 1:2 with points {style[tool][0]} pt {7 if op == "write" else 9} '
                     f'title "{style[tool][1]}, {op.upper()}"')
    s += ('set title "Verified bandwidth per tool and message size (interleaved pairs, peer-pairs.tsv)"\n'
          f'set xtics ({", ".join(xt)})\nset xrange [-0.6:{len(xt) - 0.4}]\nset grid ytics\n'
          'set ylabel "MiB/s, every byte checked"\nset key outside right top\n'
          "plot " + ", ".join(plots) + "\n")
    return True, _run(s, path)


def render_all(res, out_dir):
    if not shutil.which("gnuplot"):
        return {}, "gnuplot is not installed on this host (apt-get install gnuplot-nox; tests/host-deps lists it)"
    term = _terminal()
    if not term:
        return {}, "this gnuplot has neither the pngcairo nor the png terminal"
    os.makedirs(out_dir, exist_ok=True)
    done = {}
    for name, fn in zip(NAMES, (plot_reg, plot_frag, plot_bw, plot_peer)):
        path = os.path.join(out_dir, name)
        had, err = fn(res, path, term)
        if err:
            return done, err
        if had:
            done[name] = path
    if not done:
        # e.g. `make bench BENCH_PARTS=defaults`: its table has no plot
        return done, f"no part with a plot in this run (parts: {res.get('environment', {}).get('parts') or 'unknown'}; the plots are registration, fragmented, bandwidth and perftest 26's)"
    return done, None
