"""Unit tests of tests/bench/render and its modules (python3 -m unittest; ctest runs
them as bench_render). Synthetic churn documents, no VM: the pairing, the verdicts,
the bw-pairs.tsv reader and the loud skip of the plots without gnuplot."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchstats as bs  # noqa: E402

RENDER = os.path.join(HERE, "render")
GIB = 1 << 30


def churn_doc(size, regs, failed_after=None):
    its = [{"index": i + 1, "registered": True, "reg_seconds": r, "dereg_seconds": r / 10,
            "reg_errno": 0} for i, r in enumerate(regs)]
    doc = {"tool": "rxe-verify", "command": "churn", "size": size, "pages": size // 4096,
           "metadata_bytes": size // 256, "metadata_order": 10, "count": len(regs) or 1,
           "completed": len(regs), "verdict": "pass", "iterations": its,
           "kernel_memory": {"registered_minus_baseline": {"mem_free": -(size >> 8), "slab": size >> 8,
                                                           "vmalloc_used": 0, "vmallocinfo": 0},
                             "after_minus_baseline": {"mem_free": 0, "slab": 0, "vmalloc_used": 0}}}
    if failed_after is not None:
        doc["verdict"] = "fail"
        doc["iterations"] = [{"index": 1, "registered": False, "reg_seconds": failed_after, "reg_errno": 12,
                              "dereg_seconds": None, "buddyinfo_before": {"free_blocks": 0, "largest_free_order": 8}}]
        doc["failure"] = {"diagnosis": {"cause": "fragmentation"}}
    return doc


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def write_run(d, env="form=short\nrounds=6\nreg_reps=3\nfrag_rounds=4\n", host="", reg=True, frag=True, ticks=False):
    """The raw outputs of one bench boot (render collect DIR): registration (6 ABBA rounds at
    1 GiB, rxe-kvfix 10 % faster, and 2 GiB on rxe-kvfix alone) and the fragmented guest (4
    rounds, stock fails), bench-env.txt and bench-host.txt with the env and host lines
    given; ticks: the host samples carry CPU ticks (2 cores, 0.02 of them outside QEMU)."""
    write(d, "bench-env.txt", env)
    write(d, "bench-host.txt", "host_loadavg_start=1.0 1.0 1.0 1/1 1\nhost_loadavg_end=1.0 1.0 1.0 1/1 1\n" + host
          + ("host_nproc=2\nhost_clk_tck=100\n" if ticks else ""))
    write(d, "bench-host-load.tsv", "epoch\tload1\tload5\tload15\n" + "".join(
        f"{1000 + 5 * i}\t2.0\t1\t1" + (f"\t{182 * 5 * i}\t{180 * 5 * i}" if ticks else "") + "\n" for i in range(20)))
    for r in range(1, 7) if reg else ():
        m = bs.abba_module(r)
        # rxe-kvfix 10% faster in every pair
        t = 0.1 * (0.9 if m == "fixed" else 1.0) * (1 + r / 100)
        write(d, f"reg-r{r:02d}-{m}-1G.json", json.dumps(churn_doc(GIB, [t, t, t])))
        write(d, f"reg-round-{r:02d}.txt", f"start_{m}={1000 + 10 * r}.0 0.5 0.4 0.3 1/1 1\nend_{m}={1008 + 10 * r}.0 0.5 0.4 0.3 1/1 1\n")
    if reg:
        write(d, "reg-fixed-2G.json", json.dumps(churn_doc(2 * GIB, [0.2, 0.2, 0.2])))
        write(d, "reg-round-99.txt", "start_fixed=1100.0 0.5 0.4 0.3 1/1 1\nend_fixed=1110.0 0.5 0.4 0.3 1/1 1\n")
    for r in range(1, 5) if frag else ():
        m = bs.abba_module(r)
        doc = churn_doc(GIB, [0.05]) if m == "fixed" else churn_doc(GIB, [], failed_after=0.2)
        write(d, f"frag-r{r:02d}-{m}-1G.json", json.dumps(doc))
        write(d, f"frag-r{r:02d}-{m}-1G.vmstat0", "compact_stall 1\nallocstall_normal 0\n")
        write(d, f"frag-r{r:02d}-{m}-1G.vmstat1", "compact_stall 1\nallocstall_normal 2\n")


def write_defaults(d, ratios, pt26=True, short=False):
    """defaults-pairs.tsv as guest/defaults.sh writes it: {(msg, op): [rxe-verify/perftest per pair]};
    and wait-pairs.tsv: two rounds of three modes at 64K (busy-poll spends twice the CPU)."""
    import benchdefaults
    rows = ["\t".join(benchdefaults.DF_HEAD)]
    for (msg, op), rs in ratios.items():
        for n, r in enumerate(rs, 1):
            o = "rv,pt,pt26" if n % 2 else "pt26,pt,rv"
            b = bs.size_bytes("32M" if short else "64M")
            # CPU: rxe-verify's run 1.0 s (on both rows), perftest 0.5 s a run (server + client)
            rows.append(f"{msg}\t{op}\t{n}\trxe-verify\t{30 * r:.3f}\t{29 * r:.3f}\t{b}\t{n % 2}\t{o}\t1.0\tNA\t0.750\t0.250")
            rows.append(f"{msg}\t{op}\t{n}\tperftest\t30.00\tNA\t{b}\t2\t{o}\t1.0\tNA\t0.400\t0.100")
            if pt26:
                rows.append(f"{msg}\t{op}\t{n}\tperftest26\t31.00\tNA\t{b}\t0\t{o}\t1.0\tNA\tNA\tNA")
                rows.append(f"{msg}\t{op}\t{n}\tperftest26-validated\t{'NA' if n == 2 else '20.00'}\tNA\t{b}\t0\t{o}\t1.0\t{'NA' if n == 2 else b}\tNA\tNA")
    open(os.path.join(d, "defaults-pairs.tsv"), "w").write("\n".join(rows) + "\n")
    w = ["\t".join(benchdefaults.WT_HEAD)]
    for n in (1, 2):
        for mode, wm, spin, cpu in (("default", "adaptive", "50", 1.0), ("busy-poll", "busy_poll", "NA", 2.0),
                                    ("no-spin", "event", "0", 0.9)):
            # 128 MiB moved (64 MiB each way): CPU s per GiB = 8 x the run's seconds
            w.append(f"64K\t{n}\t{mode}\t{wm}\t{spin}\t{30 + n}\t{31 + n}\t29\t30\t134217728\t{cpu * 0.75}\t{cpu * 0.25}\t5.0\tx\t1.0")
    open(os.path.join(d, "wait-pairs.tsv"), "w").write("\n".join(w) + "\n")


class Stats(unittest.TestCase):
    def test_abba_order_and_pairs(self):
        self.assertEqual([bs.abba_module(r) for r in range(1, 9)],
                         ["stock", "fixed", "fixed", "stock", "stock", "fixed", "fixed", "stock"])
        self.assertEqual([bs.pair_of(r) for r in range(1, 7)], [1, 1, 2, 2, 3, 3])

    def test_paired_ratios_skip_incomplete_pairs(self):
        by = {1: {"module": "stock", "v": 2.0}, 2: {"module": "fixed", "v": 1.0},
              3: {"module": "fixed", "v": 3.0}, 4: {"module": "stock", "v": None}}
        self.assertEqual(bs.paired_ratios(by, "v"), [(1, 0.5)])

    def test_verdicts(self):
        self.assertTrue(bs.ratio_verdict([0.5, 0.6, 0.7])["verdict"].startswith("excludes 1.0 (rxe-kvfix faster"))
        self.assertTrue(bs.ratio_verdict([1.1, 1.2, 1.3])["verdict"].startswith("excludes 1.0 (rxe-kvfix slower"))
        self.assertTrue(bs.ratio_verdict([0.9, 1.0, 1.1])["verdict"].startswith("includes 1.0"))
        self.assertEqual(bs.ratio_verdict([0.3, 1.0, 3.0])["verdict"], "too wide to tell")
        self.assertTrue(bs.ratio_verdict([0.5, 0.6])["verdict"].startswith("too few pairs"))
        self.assertEqual(bs.ratio_verdict([])["verdict"], "no pairs")
        self.assertEqual(bs.ratio_verdict([0.5, 0.7, 0.9])["median"], 0.7)
        # a bandwidth ratio (rxe-verify/perftest MiB/s) names the tool, not the module
        self.assertEqual(bs.ratio_verdict([1.4, 1.6, 2.0], below="rxe-verify slower", above="rxe-verify faster")["verdict"],
                         "excludes 1.0 (rxe-verify faster)")

    def test_targets(self):
        self.assertEqual(bs.target_upper(0.8, 1.0, 1.05), "met")
        self.assertEqual(bs.target_upper(1.1, 1.3, 1.05), "not met")
        self.assertEqual(bs.target_upper(0.9, 1.3, 1.05), "undecided")
        self.assertEqual(bs.target_lower(0.96, 1.2, 0.95), "met")
        self.assertEqual(bs.target_lower(0.5, 0.9, 0.95), "not met")
        self.assertEqual(bs.combine(["met", "undecided"]), "undecided")
        self.assertEqual(bs.combine(["met", "not met", "undecided"]), "not met")
        self.assertEqual(bs.combine(["met", "met"]), "met")

    def test_flatness(self):
        self.assertEqual(bs.flatness([(1, [1.0, 1.1]), (2, [1.05, 1.1])], 0.2)["verdict"], "met")
        self.assertEqual(bs.flatness([(1, [1.0, 1.1]), (2, [2.0, 2.1])], 0.2)["verdict"], "not met")
        self.assertEqual(bs.flatness([(1, [1.0, 1.1, 3.0]), (2, [2.0, 2.5])], 0.2)["verdict"], "undecided")
        self.assertIsNone(bs.flatness([(1, [1.0])], 0.2))

    def test_t95(self):
        self.assertEqual(bs.t95(1), 12.706)
        self.assertEqual(bs.t95(19), 2.131)  # between rows 15 and 20: the larger quantile
        self.assertEqual(bs.t95(500), 1.96)

    def test_ratio_interval(self):
        near_one = [1.0 + d for d in (0.01, -0.01, 0.02, 0, -0.02, 0.03, 0, 0.01, -0.01, 0) * 2]
        self.assertEqual(bs.ratio_interval(near_one, 1.05)["verdict"], "met")
        self.assertEqual(bs.ratio_interval([1.2 + d for d in (0.01, -0.01, 0.02, 0, -0.02) * 4], 1.05)["verdict"], "not met")
        wide = bs.ratio_interval([1.3, 0.9, 1.4, 1.0, 1.2], 1.05)
        self.assertEqual(wide["verdict"], "undecided")
        self.assertGreater(wide["pairs_needed"], 5)
        self.assertLess(wide["lo"], wide["geomean"])
        self.assertLess(wide["geomean"], wide["hi"])
        # a mean on the limit: at_limit beside the count (thousands of pairs, or none at all
        # when the mean is the limit itself)
        on = bs.ratio_interval([1.05 * (1.0 + d) for d in (0.05, -0.05, 0.03, -0.03, 0.001)], 1.05)
        self.assertEqual(on["verdict"], "undecided")
        self.assertTrue(on["at_limit"])
        self.assertGreater(on["pairs_needed"], 500)
        self.assertFalse(wide["at_limit"])
        self.assertEqual(bs.ratio_interval([1.0], 1.05)["verdict"], "undecided")
        self.assertEqual(bs.ratio_interval([], 1.05)["n"], 0)

    def test_ratio_interval_at_least(self):
        # 'ratio >= limit': the same interval, the verdict the other way round
        tight_above = [0.99, 1.0, 1.01, 1.0, 0.995]
        self.assertEqual(bs.ratio_interval(tight_above, 0.95, at_least=True)["verdict"], "met")
        self.assertEqual(bs.ratio_interval(tight_above, 0.95)["verdict"], "not met")
        below = bs.ratio_interval([0.85, 0.86, 0.84, 0.85, 0.855], 0.95, at_least=True)
        self.assertEqual(below["verdict"], "not met")
        wide = bs.ratio_interval([0.9, 1.02, 0.85, 1.05, 0.97], 0.95, at_least=True)
        self.assertEqual(wide["verdict"], "undecided")
        self.assertGreater(wide["pairs_needed"], 5)
        self.assertEqual({k: v for k, v in wide.items() if k != "at_least"},
                         bs.ratio_interval([0.9, 1.02, 0.85, 1.05, 0.97], 0.95) | {"verdict": "undecided"})
        self.assertNotIn("at_least", bs.ratio_interval(tight_above, 0.95))

    def test_flatness_interval(self):
        tight = [1.0, 1.01, 0.99, 1.0]
        self.assertEqual(bs.flatness_interval([(1, tight), (2, [x * 1.02 for x in tight])], 0.15)["verdict"], "met")
        self.assertEqual(bs.flatness_interval([(1, tight), (2, [x * 1.5 for x in tight])], 0.15)["verdict"], "not met")
        u = bs.flatness_interval([(1, [1.0, 1.02, 0.98, 1.01]), (2, [1.05, 1.04, 1.06, 1.05]), (8, [1.1, 1.12, 1.09, 1.11])], 0.15)
        self.assertEqual(u["verdict"], "undecided")
        self.assertGreater(u["samples_needed"], 4)
        self.assertFalse(u["at_limit"])
        # a spread as wide as the limit (20 % against 20 %, "about 56169 samples per
        # size", as a full make bench has measured): the count stays, at_limit says no
        # run will reach it
        on = bs.flatness_interval([(1, [1.0, 1.03, 0.97, 1.0]), (2, [1.2, 1.23, 1.17, 1.201])], 0.2)
        self.assertEqual(on["verdict"], "undecided")
        self.assertTrue(on["at_limit"])
        self.assertGreater(on["samples_needed"], 1000)
        self.assertIsNone(bs.flatness_interval([(1, tight), (2, [1.0])], 0.15))
        # two samples far apart: an interval below zero, an infinite bound, no sample count
        # (a short-form bench with such figures once crashed render here)
        two = bs.flatness_interval([(1, [0.05, 0.06]), (2, [0.04, 0.09])], 0.2)
        self.assertEqual(two["verdict"], "undecided")
        self.assertIsNone(two["spread_hi"])
        self.assertIsNone(two["samples_needed"])

    def test_parse_ktrace(self):
        k = bs.parse_ktrace(" 1) ! 1234.567 us |  rxe_reg_user_mr [rdma_rxe]();\n"
                            " 0)               |  rxe_reg_user_mr [rdma_rxe]() {\n"
                            " 1) @ 1234567 us  |  } /* rxe_reg_user_mr [rdma_rxe] */\n"
                            " 0)   12.500 us   |  rxe_dereg_mr [rdma_rxe]();\n")
        self.assertEqual(k["rxe_reg_user_mr"], [0.001234567, 1.234567])
        self.assertEqual(k["rxe_dereg_mr"], [1.25e-05])

    def test_cpu_share(self):
        # 2 cores at 100 Hz; QEMU takes 150 ticks/s, the host is busy 170 ticks/s: 0.2 cores outside
        smp = [(1000 + 5 * i, 2.0, 1.0, 1.0, 850 * i, 750 * i) for i in range(13)]
        c = bs.cpu_share(smp, 1010, 1050, 2, 100)
        self.assertEqual(c["seconds"], 40)
        self.assertAlmostEqual(c["cores_qemu"], 1.5)
        self.assertAlmostEqual(c["cores_outside_qemu"], 0.2)
        self.assertAlmostEqual(c["share_outside_qemu"], 0.1)
        self.assertIsNone(bs.cpu_share([s[:4] for s in smp], 1010, 1050, 2, 100))  # no ticks: no figure
        self.assertIsNone(bs.cpu_share(smp, 1010, 1011, 2, 100))  # one sample in the window
        # the sampler's last reading after the guest powered off (QEMU's ticks back to 0):
        # the window ends at the last reading QEMU was alive for
        gone = smp + [(1065, 2.0, 1.0, 1.0, 850 * 13, 0)]
        c = bs.cpu_share(gone, 1010, 1065, 2, 100)
        self.assertEqual(c["seconds"], 50)
        self.assertAlmostEqual(c["cores_outside_qemu"], 0.2)

    def test_quiet_target(self):
        import benchtable
        c = lambda share: {"cores_outside_qemu": 2 * share, "cores_qemu": 1.9, "share_outside_qemu": share, "nproc": 2}  # noqa: E731
        self.assertEqual(benchtable.quiet_target({"host_cpu": {"whole boot": c(0.01), "bandwidth": c(0.05)}})["verdict"], "met")
        self.assertEqual(benchtable.quiet_target({"host_cpu": {"whole boot": c(0.01), "bandwidth": c(0.06)}})["verdict"], "not met")
        self.assertEqual(benchtable.quiet_target({})["verdict"], "undecided")

    def test_vmstat_delta(self):
        d = bs.vmstat_delta({"compact_stall": 3, "allocstall_normal": 1},
                            {"compact_stall": 5, "compact_fail": 1, "allocstall_normal": 4, "allocstall_movable": 2})
        self.assertEqual((d["compact_stall"], d["compact_fail"], d["compact_success"], d["allocstall"]), (2, 1, 0, 5))
        self.assertEqual(d["allocstall_by_zone"], {"allocstall_normal": 3, "allocstall_movable": 2})


class Render(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp(prefix="render-test-")
        write_run(self.d)

    def tearDown(self):
        shutil.rmtree(self.d)

    def run_render(self, *args, env=None):
        return subprocess.run([sys.executable, RENDER, *args], capture_output=True, text=True, env=env)

    def collect(self):
        out = self.run_render("collect", self.d, "-o", os.path.join(self.d, "results.json"))
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.load(open(os.path.join(self.d, "results.json")))

    def test_pairs_verdicts_and_targets(self):
        res = self.collect()
        (q,) = [t for t in res["targets"] if t["target"].startswith("the machine to itself")]
        self.assertEqual(q["verdict"], "undecided")  # the samples here have no ticks
        s = res["registration"]["sizes"][0]
        self.assertEqual(len(s["pairs_reg"]), 3)
        self.assertTrue(s["reg_ratio"]["verdict"].startswith("excludes 1.0 (rxe-kvfix faster"), s["reg_ratio"])
        self.assertAlmostEqual(res["rounds"]["registration"][0]["host_load1"]["mean"], 2.0)
        t = {x["target"].split(":")[0] + ":" + x["target"].split(":")[1][:20]: x["verdict"] for x in res["targets"]}
        reg = [x for x in res["targets"] if x["target"].startswith("registration: rxe-kvfix/stock")][0]
        self.assertEqual(reg["verdict"], "met", t)
        frag = [x for x in res["targets"] if x["target"].startswith("fragmented")][0]
        self.assertEqual(frag["verdict"], "met")
        (only,) = res["registration"]["fixed_only"]
        self.assertEqual((only["size_text"], only["reg_seconds_per_gib"]["median"]), ("2 GiB", 0.1))
        self.assertEqual(res["derived"]["fixed_per_gib_flatness"]["sizes"], [GIB, 2 * GIB])
        self.assertNotIn(99, [pp for pp, _ in s["pairs_reg"]])
        f = res["fragmented"]["sizes"][0]
        self.assertEqual((f["stock"]["registered"], f["fixed"]["registered"]), (0, 2))
        self.assertAlmostEqual(f["stock"]["fail_seconds"]["median"], 0.2)
        self.assertEqual(f["fixed"]["allocstall"], 4)

    def test_kernel_side_timing_decides_the_registration_targets(self):
        # the kernel's time per call (bench.sh's .ktrace files): rxe-kvfix 2 % dearer, tight
        for r in range(1, 7):
            m = bs.abba_module(r)
            us = 100000 * (1.02 if m == "fixed" else 1.0) * (1 + (r % 3) / 1000)
            open(os.path.join(self.d, f"reg-r{r:02d}-{m}-1G.ktrace"), "w").write(
                "".join(f" 0) ! {us + i:.3f} us |  rxe_reg_user_mr [rdma_rxe]();\n" for i in range(3)))
        open(os.path.join(self.d, "reg-fixed-2G.ktrace"), "w").write(
            "".join(f" 1) ! {204000 + 10 * i:.3f} us |  rxe_reg_user_mr [rdma_rxe]();\n" for i in range(3)))
        res = self.collect()
        s = res["registration"]["sizes"][0]
        self.assertEqual(len(s["pairs_kreg"]), 3)
        self.assertEqual(s["kreg_interval"]["verdict"], "met", s["kreg_interval"])
        k = [x for x in res["targets"] if x["target"].startswith("registration: rxe-kvfix/stock") and "kernel-side" in x["target"]]
        self.assertEqual(len(k), 1)
        self.assertEqual(k[0]["verdict"], "met")
        self.assertIn("rxe_reg_user_mr", k[0]["method"])
        fl = [x for x in res["targets"] if "kernel seconds per GiB flat" in x["target"]][0]
        self.assertIn(fl["verdict"], ("met", "undecided", "not met"))
        self.assertEqual(res["derived"]["fixed_kernel_per_gib_flatness"]["sizes"], [GIB, 2 * GIB])
        # the process clock's target stays, labelled as the reference
        self.assertTrue(any(x["target"].startswith("registration (process clock, for reference)") for x in res["targets"]))
        md = os.path.join(self.d, "RESULTS.md")
        out = self.run_render("table", os.path.join(self.d, "results.json"), "-o", md)
        self.assertEqual(out.returncode, 0, out.stderr)
        text = open(md).read()
        self.assertIn("*Timed by:* the kernel's own time per call of rxe_reg_user_mr", text)
        self.assertIn("| 1 GiB | ", text.split("Kernel-side (ftrace")[1])

    def test_summary_renders_the_same_page(self):
        # the kernel-side timing too, so the summary keeps what those tables read
        for r in range(1, 7):
            m = bs.abba_module(r)
            open(os.path.join(self.d, f"reg-r{r:02d}-{m}-1G.ktrace"), "w").write(
                "".join(f" 0) ! {100000 + 10 * r + i:.3f} us |  rxe_reg_user_mr [rdma_rxe]();\n" for i in range(3)))
        self.collect()
        res, summ = os.path.join(self.d, "results.json"), os.path.join(self.d, "summary.json")
        out = self.run_render("summarize", res, "-o", summ)
        self.assertEqual(out.returncode, 0, out.stderr)
        text = open(summ).read()
        self.assertNotIn('"samples"', text)
        self.assertLess(len(text), len(open(res).read()))
        self.assertEqual(json.loads(text)["kind"], "summary")
        pages = []
        for src in (res, summ):
            md = os.path.join(self.d, os.path.basename(src) + ".md")
            out = self.run_render("table", src, "-o", md, "--no-plots")
            self.assertEqual(out.returncode, 0, out.stderr)
            pages.append(open(md).read())
        self.assertEqual(pages[0], pages[1])
        # from the summary the plots are not drawn: the page shows those in the directory
        for name in ("frag.png", "bw.png"):
            open(os.path.join(self.d, name), "wb").write(b"\x89PNG\r\n\x1a\n")
        out = self.run_render("table", summ, "-o", os.path.join(self.d, "S.md"))
        self.assertEqual(out.returncode, 0, out.stderr)
        page = open(os.path.join(self.d, "S.md")).read()
        self.assertIn("](frag.png)", page)
        self.assertIn("*Plot `reg-per-gib.png` (", page)
        self.assertFalse(os.path.exists(os.path.join(self.d, "reg-per-gib.png")))
        # a summary is not summarized again
        self.assertEqual(self.run_render("summarize", summ).returncode, 2)

    def test_peer_pairs(self):
        rows = "".join(f"{m}\t{op}\t{n}\t{100 + n}\t{80 + n}\t{40 + n}\t{50 + n}\t33554432\t{'rv,pt,peer' if n % 2 else 'peer,pt,rv'}\t1.0\n"
                       for m in ("64K", "1M") for op in ("write", "read") for n in range(1, 4))
        open(os.path.join(self.d, "peer-pairs.tsv"), "w").write("\t".join(__import__("benchpeer").HEAD) + "\n" + rows)
        open(os.path.join(self.d, "bench-host.txt"), "a").write("perftest26_tag=26.04.17\nperftest26_simd=AVX2=yes\n")
        res = self.collect()
        (e,) = [x for x in res["peer_pairs"] if x["msg_text"] == "1 MiB" and x["op"] == "read"]
        self.assertEqual(len(e["pairs"]), 3)
        self.assertGreater(e["verified_ratio"]["geomean"], 1.9)
        self.assertAlmostEqual(e["pt_cost"][0], 41 / 51)
        self.assertEqual(res["peer_build"]["tag"], "26.04.17")
        self.assertEqual(e["pt_validated_bytes"]["median"], 33554432)
        md = os.path.join(self.d, "RESULTS.md")
        self.assertEqual(self.run_render("table", os.path.join(self.d, "results.json"), "-o", md).returncode, 0)
        text = open(md).read()
        self.assertLess(text.index("## Peer: rxe-verify against perftest 26"), text.index("## Registration time"))
        self.assertIn("perftest 26.04.17", text)
        self.assertIn("| 1 GiB + 16 B, one MR, every byte both ways |", text)

    def test_host_cpu_outside_qemu(self):
        # ticks at 100 Hz on 2 cores: QEMU 180/s throughout; the host busy 182/s, but 240/s
        # during the bandwidth part (1030-1060): 0.6 cores of something else there
        rows, busy, qemu = [], 0, 0
        for i in range(20):
            t = 1000 + 5 * i
            rows.append(f"{t}\t2.0\t1\t1\t{busy}\t{qemu}\n")
            busy += 5 * (240 if 1030 <= t < 1060 else 182)
            qemu += 5 * 180
        open(os.path.join(self.d, "bench-host-load.tsv"), "w").write(
            "epoch\tload1\tload5\tload15\tbusy_ticks\tqemu_ticks\n" + "".join(rows))
        open(os.path.join(self.d, "bench-host.txt"), "a").write("host_nproc=2\nhost_clk_tck=100\n")
        open(os.path.join(self.d, "bench-env.txt"), "a").write(
            "t_reg_start=1000\nt_reg_end=1030\nt_bw_start=1030\nt_bw_end=1060\n")
        cpu = self.collect()["environment"]["host_cpu"]
        self.assertAlmostEqual(cpu["registration"]["cores_outside_qemu"], 0.02)
        self.assertAlmostEqual(cpu["bandwidth"]["cores_outside_qemu"], 0.6)
        self.assertAlmostEqual(cpu["bandwidth"]["share_outside_qemu"], 0.3)
        self.assertAlmostEqual(cpu["whole boot"]["cores_qemu"], 1.8)
        self.assertNotIn("fragmented", cpu)
        (q,) = [t for t in self.collect()["targets"] if t["target"].startswith("the machine to itself")]
        self.assertEqual(q["verdict"], "not met")  # 30 % outside QEMU in the bandwidth part
        md = os.path.join(self.d, "RESULTS.md")
        self.assertEqual(self.run_render("table", os.path.join(self.d, "results.json"), "-o", md,
                                         "--no-plots").returncode, 0)
        self.assertIn("Host CPU outside the QEMU process (what else ran on the host): 0.20 cores (10.2% of 2) "
                      "over the whole boot; registration 0.02 cores (1.0% of 2), bandwidth 0.60 cores (30.0% of 2); "
                      "QEMU itself 1.80 cores.", open(md).read())

    def test_peer_pairs_bad_header(self):
        open(os.path.join(self.d, "peer-pairs.tsv"), "w").write("msg\top\n")
        out = self.run_render("collect", self.d, "-o", os.path.join(self.d, "r.json"))
        self.assertEqual(out.returncode, 1)
        self.assertIn("peer-pairs.tsv: header is", out.stderr)

    def test_plots_skipped_loudly_without_gnuplot(self):
        self.collect()
        bindir = tempfile.mkdtemp(prefix="render-nognuplot-")
        try:
            env = dict(os.environ, PATH=bindir)
            out = self.run_render("table", os.path.join(self.d, "results.json"), "-o", os.path.join(self.d, "R.md"), env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("PLOTS SKIPPED: gnuplot is not installed", out.stderr)
            page = open(os.path.join(self.d, "R.md")).read()
            self.assertIn("not rendered: gnuplot is not installed", page)
            self.assertTrue(page.split("\n## Targets\n")[1].lstrip().startswith("- **met**"), page[:600])
        finally:
            shutil.rmtree(bindir)

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot is not installed (tests/host-deps installs gnuplot-nox)")
    def test_plots_rendered(self):
        self.collect()
        out = self.run_render("table", os.path.join(self.d, "results.json"), "-o", os.path.join(self.d, "R.md"))
        self.assertEqual(out.returncode, 0, out.stderr)
        for name in ("reg-per-gib.png", "frag.png"):
            with open(os.path.join(self.d, name), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot is not installed (tests/host-deps installs gnuplot-nox)")
    def test_a_defaults_only_run_says_it_has_no_plot(self):
        # `make bench BENCH_PARTS=defaults`: no registration, fragmented or bandwidth samples
        shutil.rmtree(self.d)
        self.d = tempfile.mkdtemp(prefix="render-test-")
        write_run(self.d, env="form=full\nparts=defaults\n", reg=False, frag=False)
        write_defaults(self.d, {("64K", "write"): [1.0, 1.01, 0.99]})
        self.collect()
        out = self.run_render("table", os.path.join(self.d, "results.json"), "-o", os.path.join(self.d, "R.md"))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("PLOTS SKIPPED: no part with a plot in this run (parts: defaults;", out.stderr)

    def test_bw_pairs(self):
        with open(os.path.join(self.d, "bw-pairs.tsv"), "w") as f:
            f.write("msg_size\top\tpair\trv_MiBps\tpt_MiBps\tratio\n")
            for p, r in enumerate((1.01, 1.03, 1.05), 1):
                f.write(f"64K\twrite\t{p}\t{r * 30:.1f}\t30.0\t{r}\n")
        res = self.collect()
        (row,) = res["bandwidth_pairs"]
        self.assertEqual((row["msg_text"], row["op"], row["ratio"]["n"]), ("64 KiB", "write", 3))
        self.assertEqual(row["ratio"]["verdict"], "excludes 1.0 (rxe-verify faster)")
        bw = [x for x in res["targets"] if "rxe-verify/perftest" in x["target"]][0]
        self.assertEqual(bw["verdict"], "met")

    def test_no_bw_pairs_leaves_the_bandwidth_target_undecided(self):
        res = self.collect()
        self.assertEqual(res["schema_version"], 3)
        self.assertNotIn("bandwidth", res)
        bw = [x for x in res["targets"] if "rxe-verify/perftest" in x["target"]][0]
        self.assertEqual(bw["verdict"], "undecided")
        self.assertIn("no bw-pairs.tsv", bw["why"])

    def test_bw_sh_columns_and_full_span(self):
        # guest/bw.sh writes further columns after the six, and bw-span.tsv in the full form
        with open(os.path.join(self.d, "bw-pairs.tsv"), "w") as f:
            f.write("msg_size\top\tpair\trv_MiBps\tpt_MiBps\tratio\trv_verified_MiBps\torder\tguest_load1\trv_retries\tpt_retries\n")
            for p, r in enumerate((1.2, 1.4, 1.3), 1):
                f.write(f"1M\tread\t{p}\t{r * 20:.1f}\t20.0\t{r}\t{r * 19:.1f}\trv-first\t1.0\t0\t{p}\n")
        with open(os.path.join(self.d, "bw-span.tsv"), "w") as f:
            f.write("what\top\tMiBps\nrxe-verify wire\twrite\t30.0\nrxe-verify verified\twrite\t28.0\n"
                    "rxe-verify wire\tread\t33.0\nrxe-verify verified\tread\t12.0\nperftest wire\twrite\t20.0\n")
        res = self.collect()
        (row,) = res["bandwidth_pairs"]
        self.assertAlmostEqual(row["rv_verified_MiBps"]["median"], 24.7)
        self.assertEqual(row["retries"], {"rxe-verify": 0, "perftest": 6})
        span = [x for x in res["targets"] if x["target"].startswith("verified full span")][0]
        self.assertEqual(span["verdict"], "not met")  # READ 12 / 20 = 0.6 < 0.8
        self.assertIn("READ 12.0 / 20.0 MiB/s = 0.60", span["why"])
        self.assertFalse([x for x in res["targets"] if "no lower than stock" in x["target"]])
        out = self.run_render("table", os.path.join(self.d, "results.json"), "-o", os.path.join(self.d, "R.md"))
        self.assertEqual(out.returncode, 0, out.stderr)
        page = open(os.path.join(self.d, "R.md")).read()
        self.assertIn("| rxe-verify verified | 28.0 | 12.0 |", page)
        self.assertIn("0 / 6", page)

    def test_bw_pairs_bad_header(self):
        with open(os.path.join(self.d, "bw-pairs.tsv"), "w") as f:
            f.write("size op ratio\n")
        out = self.run_render("collect", self.d)
        self.assertEqual(out.returncode, 1)
        self.assertIn("header is", out.stderr)

    def write_defaults(self, ratios, pt26=True, short=False):
        write_defaults(self.d, ratios, pt26, short)

    def test_defaults_part_met_not_met_undecided(self):
        self.write_defaults({("64K", "write"): [1.00, 1.01, 0.99, 1.00, 1.005],   # met
                             ("1M", "write"): [0.85, 0.86, 0.84, 0.85, 0.855],   # not met
                             ("8M", "read"): [0.90, 1.02, 0.85, 1.05, 0.97]})    # undecided
        open(os.path.join(self.d, "bench-env.txt"), "a").write("t_defaults_start=1000\nt_defaults_end=1150\n")
        res = self.collect()
        per = {(x["msg_text"], x["op"]): x for x in res["defaults"]["pairs"]}
        self.assertEqual(per[("64 KiB", "write")]["ratio"]["verdict"], "met")
        self.assertEqual(per[("1 MiB", "write")]["ratio"]["verdict"], "not met")
        u = per[("8 MiB", "read")]["ratio"]
        self.assertEqual(u["verdict"], "undecided")
        self.assertAlmostEqual(u["median"], 0.97)
        self.assertEqual(per[("8 MiB", "read")]["retries"], {"rxe-verify": 3, "perftest": 10, "perftest26": 0,
                                                              "perftest26-validated": 0})
        self.assertEqual(per[("8 MiB", "read")]["no_figure"], 1)  # pair 2's validated run
        self.assertEqual(per[("1 MiB", "write")]["MiBps"]["perftest26-validated"]["n"], 4)
        (t,) = [x for x in res["targets"] if x["target"].startswith("at defaults: rxe-verify ≥ 0.95")]
        self.assertEqual(t["verdict"], "not met")
        self.assertIn("1 MiB WRITE 0.851 [", t["why"])
        self.assertIn("not met: the whole interval is under 0.95: decided at this spread; meeting it needs rxe-verify 12% faster", t["why"])
        self.assertRegex(t["why"], r"8 MiB READ 0\.95\d \[0\.\d+–1\.\d+, 5 pairs\] undecided: about \d+ pairs would decide it "
                                   r"at the measured spread, or an interval of ±\d+\.\d% around the geometric mean \(now ±\d+\.\d%\)")
        self.assertIn("64 KiB WRITE 1.001 [", t["why"])
        self.assertEqual(res["environment"]["part_seconds"]["defaults"], 150)
        (w,) = res["defaults"]["wait"]
        modes = {m["mode"]: m for m in w["modes"]}
        self.assertEqual(set(modes), {"default", "busy-poll", "no-spin"})
        self.assertAlmostEqual(modes["busy-poll"]["cpu_per_gib"]["median"], 16.0)
        self.assertAlmostEqual(modes["default"]["sys_per_gib"]["median"], 2.0)
        self.assertEqual((modes["default"]["spin_us"], modes["busy-poll"]["spin_us"]), (50, None))
        self.assertEqual(modes["no-spin"]["write"]["median"], 31.5)
        # each tool's CPU at its defaults beside the modes: perftest 0.5 s a 64 MiB run
        # (server + client), rxe-verify 1.0 s its run; perftest 26 gave none (NA)
        self.assertAlmostEqual(w["tools"]["perftest"]["cpu_per_gib"]["median"], 8.0)
        self.assertAlmostEqual(w["tools"]["rxe-verify"]["cpu_per_gib"]["median"], 16.0)
        self.assertEqual(w["tools"]["perftest"]["pairs"], 5)
        self.assertNotIn("perftest26", w["tools"])
        # the page, from the results and from the summary alike
        res_p, summ = os.path.join(self.d, "results.json"), os.path.join(self.d, "summary.json")
        self.assertEqual(self.run_render("summarize", res_p, "-o", summ).returncode, 0)
        pages = []
        for src in (res_p, summ):
            md = os.path.join(self.d, os.path.basename(src) + ".md")
            out = self.run_render("table", src, "-o", md, "--no-plots")
            self.assertEqual(out.returncode, 0, out.stderr)
            pages.append(open(md).read())
        self.assertEqual(pages[0], pages[1])
        page = pages[0]
        self.assertIn("- **not met** — at defaults: rxe-verify ≥ 0.95 × perftest unverified", page)
        self.assertIn("## At defaults: rxe-verify and perftest as a user first runs them", page)
        self.assertIn("| 1 MiB | WRITE | 5 (1 run without a figure) | 25.5 (25.2–25.8) | 30.0 (30.0–30.0) | 0.85 [0.84–0.86] | "
                      "0.851 [0.842–0.860] not met | 31.0 (31.0–31.0) | 0.82 [0.81–0.83] | 20.0 (20.0–20.0) | 3 / 10 / 0 |", page)
        self.assertIn("| 64 KiB | --busy-poll | – | 2 | 31.5 (31.0–32.0) | 32.5 (32.0–33.0) | 16.000 (16.000–16.000) | 4.000 (4.000–4.000) |", page)
        self.assertIn("| 64 KiB | default (adaptive) | 50 | 2 |", page)
        self.assertIn("| 64 KiB | perftest at defaults (unchecked) | – | 5 pairs | 30.0 (30.0–30.0) | – | 8.000 (8.000–8.000) | – |", page)
        self.assertIn("| 64 KiB | rxe-verify at defaults (checked) | – | 5 pairs |", page)
        self.assertIn("perftest's CPU is its server's and client's user + sys per GiB", page)
        self.assertIn("defaults 150 s, ", page)
        self.assertNotIn('"samples"', open(summ).read())
        self.assertIn("8 MiB READ 1: 0.90, 2: 1.02", page)

    def test_defaults_short_form_one_pair_is_undecided(self):
        self.write_defaults({("64K", "write"): [0.97]}, pt26=False, short=True)
        res = self.collect()
        (t,) = [x for x in res["targets"] if x["target"].startswith("at defaults:")]
        self.assertEqual(t["verdict"], "undecided")
        self.assertIn("64 KiB WRITE [1 pairs] undecided: 1 pair(s): an interval needs two (the full form runs 5)", t["why"])
        md = os.path.join(self.d, "R.md")
        self.assertEqual(self.run_render("table", os.path.join(self.d, "results.json"), "-o", md, "--no-plots").returncode, 0)
        self.assertIn("| 64 KiB | WRITE | 1 | 29.1 (29.1–29.1) | 30.0 (30.0–30.0) | 0.97 [0.97–0.97] | – undecided | – | – | – | 1 / 2 / – |",
                      open(md).read())

    def test_no_defaults_part(self):
        # a boot without the part: the target undecided and why, the page says it did not run
        res = self.collect()
        self.assertIsNone(res["defaults"])
        (t,) = [x for x in res["targets"] if x["target"].startswith("at defaults:")]
        self.assertEqual((t["verdict"], t["why"]), ("undecided", "no defaults-pairs.tsv: the defaults part did not run "
                                                                  "(bench_parts) or gave no pair"))
        md = os.path.join(self.d, "R.md")
        self.assertEqual(self.run_render("table", os.path.join(self.d, "results.json"), "-o", md, "--no-plots").returncode, 0)
        self.assertIn("Not run in this boot: the part `defaults`", open(md).read())

    def test_committed_summary_without_the_defaults_part_still_renders(self):
        # a summary that predates the part (tests/bench/summary.json without it): the page
        # renders and says it was not run
        with open(os.path.join(HERE, "summary.json"), encoding="utf-8") as f:
            old = json.load(f)
        old.pop("defaults", None)
        with open(os.path.join(self.d, "old-summary.json"), "w", encoding="utf-8") as f:
            json.dump(old, f)
        out = self.run_render("table", os.path.join(self.d, "old-summary.json"), "-o", os.path.join(self.d, "C.md"),
                              "--plots", HERE, "--notes", os.path.join(HERE, "plot-notes.txt"))
        self.assertEqual(out.returncode, 0, out.stderr)
        page = open(os.path.join(self.d, "C.md")).read()
        self.assertIn("## At defaults: rxe-verify and perftest as a user first runs them\n\nNot run in this boot", page)
        self.assertIn("## RDMA bandwidth", page)

    def test_defaults_without_cpu_columns_still_read(self):
        # defaults-pairs.tsv as defaults.sh wrote it before it timed each tool: no CPU rows
        import benchdefaults
        self.write_defaults({("64K", "write"): [1.0, 1.0]})
        p = os.path.join(self.d, "defaults-pairs.tsv")
        lines = open(p).read().splitlines()
        open(p, "w").write("\n".join("\t".join(x.split("\t")[:len(benchdefaults.DF_HEAD_NO_CPU)]) for x in lines) + "\n")
        res = self.collect()
        (w,) = res["defaults"]["wait"]
        self.assertEqual(w["tools"], {})
        self.assertEqual(res["defaults"]["pairs"][0]["ratio"]["n"], 2)

    def test_defaults_bad_header(self):
        open(os.path.join(self.d, "wait-pairs.tsv"), "w").write("msg_size\tmode\n")
        out = self.run_render("collect", self.d, "-o", os.path.join(self.d, "r.json"))
        self.assertEqual(out.returncode, 1)
        self.assertIn("wait-pairs.tsv: header is", out.stderr)
        self.assertEqual(len(out.stderr.strip().splitlines()), 1)

    def test_not_a_directory(self):
        out = self.run_render("collect", os.path.join(self.d, "nope"))
        self.assertEqual(out.returncode, 2)
        self.assertEqual(len(out.stderr.strip().splitlines()), 1)


def load_tests(loader, tests, pattern):
    """The merge tests (render merge, test_merge.py) and the part dp's (test_dp.py) run with these (ctest's bench_render)."""
    import test_merge
    tests.addTests(loader.loadTestsFromModule(test_merge))
    import test_dp
    tests.addTests(loader.loadTestsFromModule(test_dp))
    return tests


if __name__ == "__main__":
    unittest.main()
