"""Unit tests of the part dp of tests/bench/render (benchdp: the fix's cost on the data
path). Run with test_render.py (its load_tests; ctest's bench_render). Synthetic
rxe-verify run documents and vmallocinfo readings, no VM."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchdp  # noqa: E402
import benchstats as bs  # noqa: E402

RENDER = os.path.join(HERE, "render")
MIB = 1 << 20
# /proc/vmallocinfo lines as the guest's watch keeps them: the queues' (always there) and a
# 1 GiB MR's page array of 4 MiB + the guard page from kvcalloc's vmalloc fallback
QUEUE = "0xffffc90000a00000-0xffffc90000a31000  200704 rxe_queue_init+0xbd/0x1a0 [rdma_rxe] pages=48 vmalloc N0=48\n"
ARRAY_1G = ("0xffffc90001000000-0xffffc90001401000 4198400 rxe_mr_init_user+0x1a2/0x3c0 [rdma_rxe] pages=1024 "
            "vmalloc vpages N0=1024\n")


def put(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run_doc(w, r, refused=False):
    """rxe-verify run --json: one size, passed at w/r MB/s (10^6), or refused its registration."""
    if refused:
        res = {"result": "fail", "registered": False, "reg_errno": 12, "diagnosis": {"cause": "fragmentation"}}
    else:
        res = {"result": "pass", "registered": True, "write": {"MBps": w}, "read": {"MBps": r}}
    return json.dumps({"tool": "rxe-verify", "command": "run", "results": [res]})


def write_dp(d, tag, size, rounds, fixed_factor, vmalloc=None, stock_refused=False, split=None):
    """ABBA rounds of one size: stock at 60/66 MB/s (a drift of 1 % a round both modules
    share), rxe-kvfix at fixed_factor(pair) times it; the fixed runs' watch holds vmalloc
    (extra lines) beside the queue's line; split: stock's round also ran the region as
    that many MRs (dp.sh, where stock refused one), at the same speed."""
    for r in range(1, rounds + 1):
        m = bs.abba_module(r)
        base = os.path.join(d, f"{tag}-r{r:02d}-{m}-{size}")
        k = 1 + r / 100
        if m == "stock":
            doc = run_doc(60 * k, 66 * k, refused=stock_refused)
        else:
            f = fixed_factor(bs.pair_of(r))
            doc = run_doc(60 * k * f, 66 * k * f)
        put(base + ".json", doc)
        if split and m == "stock":
            put(f"{base}-split{split}.json", run_doc(60 * k, 66 * k))
            put(f"{base}-split{split}.vmalloc", QUEUE)
        put(base + ".vmalloc", QUEUE + (vmalloc if m == "fixed" and vmalloc else ""))


class Verdict(unittest.TestCase):
    def test_costs(self):
        d = benchdp.verdict([0.90, 0.91, 0.89, 0.90, 0.905])
        self.assertEqual(d["verdict"], "costs 9.9 %", d)
        self.assertLess(d["hi"], 1.0)

    def test_undecided(self):
        d = benchdp.verdict([0.80, 1.20, 0.95, 1.02])
        self.assertEqual(d["verdict"], "undecided at 4 pairs", d)
        self.assertLess(d["lo"], 1 - benchdp.RESOLUTION)
        self.assertGreater(d["hi"], 1.0)

    def test_no_measurable_cost(self):
        d = benchdp.verdict([0.99, 1.01, 1.00, 1.005, 0.995])
        self.assertEqual(d["verdict"], "no measurable cost", d)
        self.assertGreaterEqual(d["lo"], 1 - benchdp.RESOLUTION)

    def test_faster_is_no_cost(self):
        d = benchdp.verdict([1.10, 1.12, 1.11])
        self.assertEqual(d["verdict"], "no measurable cost", d)
        self.assertIn("faster", d["why"])

    def test_one_pair_never_decides(self):
        # even a large difference: one pair has no interval (the short form)
        for rs in ([0.5], [1.0], []):
            self.assertEqual(benchdp.verdict(rs)["verdict"], f"undecided at {len(rs)} pairs")

    def test_a_small_cost_inside_the_resolution_is_not_no_cost(self):
        # 3 % slower, tightly: the interval is under 1.0, so it costs, whatever the resolution
        self.assertTrue(benchdp.verdict([0.97, 0.971, 0.969, 0.97])["verdict"].startswith("costs 3"))

    def test_combine(self):
        c, n, u = (benchdp.verdict(x) for x in ([0.9, 0.9, 0.91], [1.0, 1.0, 1.01], [0.8, 1.2, 1.0]))
        self.assertTrue(benchdp.combine([n, c]).startswith("costs"))
        self.assertEqual(benchdp.combine([n, n]), "no measurable cost")
        self.assertEqual(benchdp.combine([n, u]), "undecided at 3 pairs")


class Allocator(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp(prefix="dp-test-")

    def tearDown(self):
        shutil.rmtree(self.d)

    def watch(self, text):
        p = os.path.join(self.d, "w.vmalloc")
        put(p, text)
        return p

    def test_the_array_line_is_vmalloc(self):
        self.assertEqual(benchdp.allocator(self.watch(QUEUE + ARRAY_1G), 1 << 30), ("vmalloc", "rxe_mr_init_user", 4198400))

    def test_the_queues_alone_are_kmalloc(self):
        # rxe's queues are vmalloc_user'd on both modules: never the page array
        self.assertEqual(benchdp.allocator(self.watch(QUEUE), 1 << 30)[0], "kmalloc")
        self.assertEqual(benchdp.allocator(self.watch(""), 1 << 30)[0], "kmalloc")

    def test_a_line_smaller_than_the_array_is_not_it(self):
        # a 4 MiB line cannot be the 16 MiB array of a 4 GiB MR
        self.assertEqual(benchdp.allocator(self.watch(ARRAY_1G), 4 << 30)[0], "kmalloc")

    def test_no_watch_no_claim(self):
        self.assertIsNone(benchdp.allocator(os.path.join(self.d, "missing"), 1 << 30)[0])


class Collect(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp(prefix="dp-render-")
        put(os.path.join(self.d, "bench-env.txt"),
            "form=short\nparts=dp\ndp_run=-m sampled --passes 1 --seed 1\nt_dp_start=1000\nt_dp_end=1100\n")
        # as booted: 256M, rxe-kvfix 10 % slower in every pair (a cost), 1G the same speed
        # but wide (undecided); fragmented: 512M rxe-kvfix from vmalloc, within 1 %; 1G
        # stock refused every time
        write_dp(self.d, "dp", "256M", 8, lambda p: 0.9)
        write_dp(self.d, "dp", "1G", 6, lambda p: (0.85, 1.15, 1.0)[p - 1])
        write_dp(self.d, "dpfrag", "512M", 8, lambda p: 1 + (p % 2 - 0.5) / 100,
                 vmalloc=ARRAY_1G.replace("4198400", "2101248"), stock_refused=True, split=2)
        write_dp(self.d, "dpfrag", "1G", 4, lambda p: 1.0, vmalloc=ARRAY_1G, stock_refused=True)

    def tearDown(self):
        shutil.rmtree(self.d)

    def render(self, *args):
        return subprocess.run([sys.executable, RENDER, *args], capture_output=True, text=True)

    def test_cells_verdicts_target_and_page(self):
        rj, md, sj = (os.path.join(self.d, n) for n in ("results.json", "RESULTS.md", "summary.json"))
        out = self.render("collect", self.d, "-o", rj)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(rj, encoding="utf-8") as f:
            res = json.load(f)
        cells = {(c["size_text"], c["allocator"]): c for c in res["data_path"]["cells"]}
        self.assertEqual(sorted(cells), [("1 GiB", "kmalloc"), ("1 GiB", "vmalloc"), ("256 MiB", "kmalloc"),
                                         ("512 MiB", "vmalloc")])
        self.assertTrue(cells[("256 MiB", "kmalloc")]["verdict"].startswith("costs 10"), cells[("256 MiB", "kmalloc")])
        self.assertEqual(cells[("256 MiB", "kmalloc")]["write_ratio"]["n"], 4)
        self.assertEqual(cells[("1 GiB", "kmalloc")]["verdict"], "undecided at 3 pairs")
        self.assertEqual(cells[("512 MiB", "vmalloc")]["verdict"],
                         "no measurable cost (stock could not register one MR in 4 of 4 pairs: there against "
                         "the same region split into 2 MRs of 256 MiB)")
        self.assertEqual(cells[("512 MiB", "vmalloc")]["states"], ["fragmented"])
        self.assertEqual(cells[("1 GiB", "vmalloc")]["verdict"], "stock could not register (2 of 2 pairs)")
        (t,) = [x for x in res["targets"] if x["target"].startswith("data path")]
        self.assertEqual(t["verdict"], "not met")  # 256 MiB costs
        self.assertEqual(res["environment"]["part_seconds"]["data path"], 100.0)
        out = self.render("table", rj, "-o", md, "--no-plots")
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(md, encoding="utf-8") as f:
            page = f.read()
        self.assertIn("## The data path: stock against rxe-kvfix", page)
        self.assertIn("| 256 MiB | kmalloc | as booted | 4 |", page)
        self.assertIn("**stock could not register (2 of 2 pairs)**", page)
        self.assertIn("vmalloc (rxe_mr_init_user, 2052 KiB)", page)
        # what it shows, computed from the figures: the cost named, the undecided cell with
        # the pairs that would decide it, the run-to-run spread
        self.assertRegex(page, r"\*\*undecided at 3 pairs\*\* \((about \d+ pairs would decide it|the estimate sits "
                               r"on the 0\.95 limit: no feasible run decides it)\)")
        shows = [x for x in page.splitlines() if x.startswith("*What it shows:* The geometric means")]
        self.assertEqual(len(shows), 1, page)
        self.assertIn("a cost shows in 256 MiB kmalloc (costs 10", shows[0])
        self.assertIn("no measurable cost (under 5 %) in 512 MiB vmalloc", shows[0])
        self.assertRegex(shows[0], r"undecided: 1 GiB kmalloc at 3 pairs")
        self.assertRegex(shows[0], r"is up to \d+\.\d× its slowest")
        self.assertIn("| fragmented | 512 MiB | 1 | **fail: errno 12 (fragmentation)** | none: not registered | "
                      "57.8 / 63.6 (2 MRs) | kmalloc | 58.7 / 64.5 | vmalloc (rxe_mr_init_user, 2052 KiB) |", page)
        # the summary (what git keeps) renders the same page
        out = self.render("summarize", rj, "-o", sj)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_no_cost_anywhere_is_met(self):
        for f in os.listdir(self.d):
            if f.startswith("dp-r"):
                os.unlink(os.path.join(self.d, f))
        out = self.render("collect", self.d)
        self.assertEqual(out.returncode, 0, out.stderr)
        (t,) = [x for x in json.loads(out.stdout)["targets"] if x["target"].startswith("data path")]
        self.assertEqual(t["verdict"], "met", t)


if __name__ == "__main__":
    unittest.main()
