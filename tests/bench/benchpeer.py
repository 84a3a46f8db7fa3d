"""tests/bench/benchpeer.py: the peer comparison of tests/bench/render:
rxe-verify against perftest 26.x's ib_write_bw / ib_read_bw --data_validation, the two
tools that check the data they move, in the interleaved pairs of guest/bw.sh
(peer-pairs.tsv), and each tool's cost of verification.

collect(d) reads the file (None without one); section(res, p) writes the RESULTS.md
table with the p(line) printer of benchtable. Pure but for the one file read.
"""
import os
import statistics

from benchstats import ratio_interval, size_bytes, size_text, stats

HEAD = ["msg_size", "op", "pair", "rv_wire_MiBps", "rv_verified_MiBps", "pt26_verified_MiBps",
        "pt26_unverified_MiBps", "pt26_validated_bytes", "order", "guest_load1"]


class PeerError(ValueError):
    """peer-pairs.tsv is not what guest/bw.sh writes."""


def _num(x):
    return None if x == "NA" else float(x)


def collect(d):
    path = os.path.join(d, "peer-pairs.tsv")
    if not os.path.exists(path):
        return None
    rows = {}
    with open(path, encoding="utf-8") as f:
        head = f.readline().split()
        if head != HEAD:
            raise PeerError(f"{path}: header is {' '.join(head)!r}, want {' '.join(HEAD)!r} (tab-separated)")
        for n, line in enumerate(f, 2):
            p = line.split()
            if not p:
                continue
            if len(p) != len(HEAD) or p[1] not in ("write", "read"):
                raise PeerError(f"{path}:{n}: want {len(HEAD)} fields (msg_size, op write|read, pair, ...): {line.strip()!r}")
            try:
                r = {"pair": int(p[2]), "rv_wire": _num(p[3]), "rv_verified": _num(p[4]),
                     "pt_verified": _num(p[5]), "pt_unverified": _num(p[6]),
                     "pt_validated_bytes": None if p[7] == "NA" else int(p[7]), "order": p[8]}
            except ValueError:
                raise PeerError(f"{path}:{n}: the MiB/s columns must be numbers or NA: {line.strip()!r}") from None
            rows.setdefault((size_bytes(p[0]), p[1]), []).append(r)
    out = []
    for (msg, op), prs in sorted(rows.items()):
        both = [x for x in prs if x["rv_verified"] and x["pt_verified"]]
        e = {"msg": msg, "msg_text": size_text(msg), "op": op, "pairs": prs,
             "rv_verified": stats([x["rv_verified"] for x in prs]),
             "rv_wire": stats([x["rv_wire"] for x in prs]),
             "pt_verified": stats([x["pt_verified"] for x in prs]),
             "pt_validated_bytes": stats([x["pt_validated_bytes"] for x in prs]),
             "pt_unverified": stats([x["pt_unverified"] for x in prs]),
             "no_figure": sum(1 for x in prs if x["pt_verified"] is None or x["pt_unverified"] is None),
             # rxe-verify verified / perftest verified, per pair (>1: rxe-verify faster)
             "verified_ratio": ratio_interval([x["rv_verified"] / x["pt_verified"] for x in both], 1.0),
             # each tool's verified rate against its own unchecked one, per pair
             "pt_cost": [x["pt_verified"] / x["pt_unverified"] for x in prs if x["pt_verified"] and x["pt_unverified"]],
             "rv_cost": [x["rv_verified"] / x["rv_wire"] for x in prs if x["rv_verified"] and x["rv_wire"]]}
        out.append(e)
    return out


def _iv(k):
    return f"{k['geomean']:.2f} [{k['lo']:.2f}–{k['hi']:.2f}]" if k.get("geomean") else "–"


def _med(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "–"


def _st(s):
    return f"{s['median']:.1f} ({s['min']:.1f}–{s['max']:.1f})" if s else "–"


def section(res, p, build):
    """The peer table; build: perftest 26's build.info ({key: value}) or {}."""
    peer = res.get("peer_pairs")
    p("## Peer: rxe-verify against perftest 26 `--data_validation`")
    p("")
    if not peer:
        p("No peer runs in this boot: perftest 26.x was not in the guest (the setting `perftest_src`, "
          "`make bench PERFTEST_SRC=`, names the local source it is built from; nothing is downloaded).")
        p("")
        return
    if build:
        p(f"perftest {build.get('tag')} ({build.get('commit', '')[:12]}, configure.ac version "
          f"{build.get('package_version')}), built by `tests/bench/perftest-build` in the guest's root "
          f"against its rdma-core {build.get('rdma_core')}: `{build.get('configure')}`, SIMD path "
          f"{build.get('simd')}, {build.get('compiler')}.")
        p("")
    p("Each pair runs rxe-verify (`run -m full`: WRITE then READ over the region, every byte checked), "
      "Debian's perftest and perftest 26 with and without `--data_validation` (receiver-side checks) at the "
      "same message size with `-t 128`, in ABBA order. A run moves the region's bytes (at least 5 messages: "
      "64 MiB messages, 320 MiB), except perftest 26's, which makes at least 32 iterations because "
      "`--data_validation` needs a tx depth of 32 and perftest lowers the tx depth to the iteration count "
      "(8 MiB messages: 256 MiB a run at tx depth 32, 64 MiB: 2 GiB; Debian's perftest runs those at tx depth "
      "8 and 5). The rates are per second, so runs of different lengths compare. "
      "MiB/s: median (min–max) of the pairs. "
      "perftest's verified rate counts only with its `VALIDATION: PASSED - N chunks, M bytes` line "
      "(M: the bytes it checked, in summary.json). "
      "rxe-verify has no unchecked mode: its cost of verification is its verified rate (fills and checks in "
      "the wall time) over its RDMA-time rate in the same run; perftest's is its verified run over its "
      "unverified one.")
    p("")
    p("| message | op | pairs | rxe-verify verified | perftest 26 verified | rxe-verify/perftest verified, geomean [95 %] | "
      "rxe-verify verified/RDMA time | perftest 26 verified/unverified | perftest 26 unverified |")
    p("|---|---|---|---|---|---|---|---|---|")
    for e in peer:
        p(f"| {e['msg_text']} | {e['op'].upper()} | {len(e['pairs'])}" + (f" ({e['no_figure']} without a figure)" if e["no_figure"] else "")
          + f" | {_st(e['rv_verified'])} | {_st(e['pt_verified'])} | {_iv(e['verified_ratio'])} | {_med(e['rv_cost'])} | "
          f"{_med(e['pt_cost'])} | {_st(e['pt_unverified'])} |")
    sp = res.get("bandwidth_span") or {}
    ver = sp.get("rxe-verify verified") or {}
    got = ", ".join(f"{op.upper()} {ver[op]:.1f} MiB/s" for op in ("write", "read") if op in ver)
    p("| 1 GiB + 16 B, one MR, every byte both ways | WRITE, READ | 1 | "
      + (got + " (rxe-verify `run -s 1G+16 -m full`, the full span below)" if got else "not run in this form (make bench runs it)")
      + " | not measured: perftest's validation checks a ring of 8–24 chunks per QP of messages of one size "
        "(its validation_common.h), not the bytes of one 1 GiB + 16 B region at an unaligned offset | – | – | – | – |")
    p("")
    p("Also only on rxe-verify's side: a failed registration explained in words (cause, remedy; the fragmented "
      "part below measures it on stock rdma_rxe).")
    p("")
