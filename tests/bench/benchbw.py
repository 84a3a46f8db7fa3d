"""tests/bench/benchbw.py: the bandwidth part of tests/bench/render (guest/bw.sh):
rxe-verify against Debian's perftest in interleaved pairs (bw-pairs.tsv) and the verified
full span (bw-span.tsv). collect_pairs(d) and collect_span(d) read one file each (None
without it) and raise BwError on a file that is not what bw.sh writes.
"""
import os

from benchstats import ratio_verdict, size_bytes, size_text, stats


class BwError(ValueError):
    """bw-pairs.tsv or bw-span.tsv is not what guest/bw.sh writes."""


def die(msg):
    raise BwError(msg)


def collect_pairs(d):
    """bw-pairs.tsv (msg_size op pair rv_MiBps pt_MiBps ratio; rxe-verify and perftest
    interleaved in pairs), when the guest wrote one -> [{msg, op, pairs, ratio}]."""
    path = os.path.join(d, "bw-pairs.tsv")
    if not os.path.exists(path):
        return None
    rows = {}
    with open(path, encoding="utf-8") as f:
        head = f.readline().split()
        want = ["msg_size", "op", "pair", "rv_MiBps", "pt_MiBps", "ratio"]
        if head[:6] != want:
            die(f"{path}: header is {' '.join(head)!r}, want {' '.join(want)!r} first (tab-separated)")
        for n, line in enumerate(f, 2):
            p = line.split()
            if not p:
                continue
            if len(p) != len(head) or p[1] not in ("write", "read"):
                die(f"{path}:{n}: want {len(head)} tab-separated fields (msg_size, op write|read, pair, rv, pt, ratio, ...): {line.strip()!r}")
            try:
                rv, pt, ra = float(p[3]), float(p[4]), float(p[5])
            except ValueError:
                die(f"{path}:{n}: rv_MiBps, pt_MiBps and ratio must be numbers: {line.strip()!r}")
            row = {"pair": p[2], "rv_MiBps": rv, "pt_MiBps": pt, "ratio": ra}
            # guest/bw.sh's further columns: the verified rate, the order, load, retransmissions
            extra = dict(zip(head[6:], p[6:]))
            if "rv_verified_MiBps" in extra:
                row["rv_verified_MiBps"] = float(extra["rv_verified_MiBps"])
            for k in ("rv_retries", "pt_retries"):
                if k in extra:
                    row[k] = int(extra[k])
            if "order" in extra:
                row["order"] = extra["order"]
            rows.setdefault((size_bytes(p[0]), p[1]), []).append(row)
    out = []
    for (msg, op), prs in sorted(rows.items()):
        e = {"msg": msg, "msg_text": size_text(msg), "op": op, "pairs": prs,
             "rv_MiBps": stats([x["rv_MiBps"] for x in prs]), "pt_MiBps": stats([x["pt_MiBps"] for x in prs]),
             "ratio": ratio_verdict([x["ratio"] for x in prs], below="rxe-verify slower", above="rxe-verify faster")}
        if all("rv_verified_MiBps" in x for x in prs):
            e["rv_verified_MiBps"] = stats([x["rv_verified_MiBps"] for x in prs])
        if all("pt_retries" in x for x in prs):
            e["retries"] = {"rxe-verify": sum(x["rv_retries"] for x in prs), "perftest": sum(x["pt_retries"] for x in prs)}
        out.append(e)
    return out


def collect_span(d):
    """bw-span.tsv (what op MiBps; guest/bw.sh's full form): the verified full span of
    1 GiB + 16 B beside ib_write_bw over a 1026 MiB MR -> {what: {op: MiB/s}} or None."""
    path = os.path.join(d, "bw-span.tsv")
    if not os.path.exists(path):
        return None
    out = {}
    with open(path, encoding="utf-8") as f:
        head = f.readline().rstrip("\n").split("\t")
        if head != ["what", "op", "MiBps"]:
            die(f"{path}: header is {head!r}, want what, op, MiBps (tab-separated)")
        for n, line in enumerate(f, 2):
            p = line.rstrip("\n").split("\t")
            if p == [""]:
                continue
            try:
                out.setdefault(p[0], {})[p[1]] = float(p[2])
            except (IndexError, ValueError):
                die(f"{path}:{n}: want what, op, MiB/s: {line.strip()!r}")
    return out
