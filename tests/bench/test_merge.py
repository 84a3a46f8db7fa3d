"""Unit tests of tests/bench/render merge (benchmerge): synthetic boots (test_render's
write_run and write_defaults), no VM. test_render imports them, so its run (ctest's
bench_render, python3 -m unittest test_render) runs these too."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from test_render import HERE, RENDER, write_defaults, write_run


class Merge(unittest.TestCase):
    """render merge: a defaults-only boot merged into the summary of a full one."""

    def setUp(self):
        self.d = tempfile.mkdtemp(prefix="render-merge-")
        self.base = self.summarize(self.boot("A", "reg,bw,frag", "2026-12-05T11:42:33Z", "aaaaaaa"))
        self.new = self.boot("B", "defaults", "2027-01-10T08:00:00Z", "bbbbbbb")

    def tearDown(self):
        shutil.rmtree(self.d)

    def render(self, *args):
        return subprocess.run([sys.executable, RENDER, *args], capture_output=True, text=True)

    def boot(self, name, parts, date, commit, form="full", kernel="K1", cpu=None):
        """One synthetic boot of the parts (reg, frag and defaults have figures, bw none),
        collected: its results.json."""
        d = os.path.join(self.d, name)
        os.mkdir(d)
        times = "".join(f"t_{p}_start=1000\nt_{p}_end=1090\n" for p in parts.split(","))
        write_run(d, env=f"form={form}\nkernel={kernel}\nrounds=6\nreg_reps=3\nfrag_rounds=4\nparts={parts}\n{times}",
                  host=f"host_date_start={date}\nhost_date_end={date[:-3]}59Z\ncommit={commit}\n"
                  + (f"host_cpu_model={cpu}\n" if cpu else ""),
                  reg="reg" in parts, frag="frag" in parts, ticks=True)
        if "defaults" in parts:
            write_defaults(d, {("64K", "write"): [1.00, 1.01, 0.99, 1.00, 1.005]})
        out = self.render("collect", d, "-o", os.path.join(d, "results.json"))
        self.assertEqual(out.returncode, 0, out.stderr)
        return os.path.join(d, "results.json")

    def summarize(self, results):
        out = self.render("summarize", results, "-o", results[:-len("results.json")] + "summary.json")
        self.assertEqual(out.returncode, 0, out.stderr)
        return results[:-len("results.json")] + "summary.json"

    def merge(self, base, new, code=0):
        m = os.path.join(self.d, f"M{len(os.listdir(self.d))}.json")
        out = self.render("merge", base, new, "-o", m)
        self.assertEqual(out.returncode, code, out.stderr)
        if code:
            self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
            return out.stderr
        return m

    def page(self, summary):
        md = summary + ".md"
        out = self.render("table", summary, "-o", md, "--no-plots")
        self.assertEqual(out.returncode, 0, out.stderr)
        return open(md).read()

    def test_defaults_merged_into_a_full_base(self):
        m = json.load(open(self.merge(self.base, self.new)))
        base, new = json.load(open(self.base)), json.load(open(self.summarize(self.new)))
        self.assertEqual(m["kind"], "summary")
        for k in ("registration", "fragmented", "derived", "rounds"):
            self.assertEqual(m[k], base[k], k)
        self.assertEqual(m["defaults"], new["defaults"])
        self.assertEqual({p: r["commit"] for p, r in m["part_runs"].items()},
                         {"registration": "aaaaaaa", "bandwidth": "aaaaaaa", "defaults": "bbbbbbb", "fragmented": "aaaaaaa"})
        # the targets over the merged parts: BASE's "did not run" row for defaults is gone
        (df,) = [t for t in m["targets"] if t["target"].startswith("at defaults")]
        self.assertEqual(df["verdict"], "met")
        self.assertEqual([t for t in m["targets"] if t["target"].startswith("registration")],
                         [t for t in base["targets"] if t["target"].startswith("registration")])
        (q,) = [t for t in m["targets"] if t["target"].startswith("the machine to itself")]
        self.assertEqual(q["verdict"], "met")
        self.assertIn("registration, bandwidth, fragmented (the boot of 2026-12-05T11:42:33Z): ", q["why"])
        self.assertIn("; defaults (the boot of 2027-01-10T08:00:00Z): 0.02 cores (1.0% of 2) over the whole boot; "
                      "defaults 0.02 cores (1.0% of 2)", q["why"])
        page = self.page(self.merge(self.base, self.new))
        self.assertIn("full form, the figures of 2 boots merged part by part", page)
        self.assertIn("| defaults | 2027-01-10T08:00:00Z – 2027-01-10T08:00:59Z | bbbbbbb | full | 90 s | "
                      "2.00 median (2.00–2.00, 20 samples) | 0.02 cores (1.0% of 2); 0.02 cores (1.0% of 2), QEMU itself 1.80 cores |", page)
        self.assertIn("| registration | 2026-12-05T11:42:33Z – 2026-12-05T11:42:59Z | aaaaaaa | full | 90 s |", page)
        self.assertIn("(parts: registration, bandwidth, fragmented from the boot of 2026-12-05T11:42:33Z; "
                      "defaults from the boot of 2027-01-10T08:00:00Z)", page)
        self.assertIn("| 64 KiB | WRITE | 5 (1 run without a figure) |", page)
        self.assertNotIn("Not run in this boot", page)

    def test_another_host_cpu_model_is_named_per_part(self):
        # a machine of the same kind with another CPU: merged, each boot's CPU named
        base = self.summarize(self.boot("E", "reg,bw,frag", "2026-12-05T11:42:33Z", "eeeeeee", cpu="AMD EPYC"))
        new = self.boot("X", "defaults", "2027-01-10T08:00:00Z", "fffffff", cpu="Intel(R) Xeon(R) Processor")
        m = self.merge(base, new)
        self.assertEqual(json.load(open(m))["environment"]["host_cpu_model"],
                         "AMD EPYC for registration, bandwidth, fragmented; Intel(R) Xeon(R) Processor for defaults")
        page = self.page(m)
        self.assertIn("QEMU itself 1.80 cores | Intel(R) Xeon(R) Processor |", page)
        self.assertIn("| registration | 2026-12-05T11:42:33Z", page)
        self.assertIn("(AMD EPYC for registration, bandwidth, fragmented; Intel(R) Xeon(R) Processor for defaults)", page)

    def test_merged_again_and_a_full_run_is_its_own_page(self):
        m = self.merge(self.base, self.new)
        # a merged summary is a BASE too; the same part again: the same summary
        self.assertEqual(open(self.merge(m, self.summarize(self.new))).read(), open(m).read())
        # a run of every part replaces them all: the summary of that run alone, no part_runs
        full = self.boot("C", "reg,bw,defaults,frag", "2027-02-01T09:00:00Z", "ccccccc")
        self.assertEqual(open(self.merge(m, full)).read(), open(self.summarize(full)).read())

    def test_refusals(self):
        self.assertIn("BASE is not a summary", self.merge(self.new, self.new, code=2))
        self.assertIn("the kernel differs: BASE K1, NEW K2",
                      self.merge(self.base, self.boot("K", "defaults", "2027-01-11T08:00:00Z", "c", kernel="K2"), code=1))
        self.assertIn("the forms differ: BASE full, NEW short",
                      self.merge(self.base, self.boot("S", "defaults", "2027-01-12T08:00:00Z", "c", form="short"), code=1))
        none = json.load(open(self.new))
        none["environment"]["parts"], none["defaults"] = None, None
        json.dump(none, open(os.path.join(self.d, "none.json"), "w"))
        self.assertIn("NEW ran no part", self.merge(self.base, os.path.join(self.d, "none.json"), code=1))

    def test_committed_summary_reproduces_results_md(self):
        # tests/bench/RESULTS.md is the page of tests/bench/summary.json, byte for byte
        for png in glob.glob(os.path.join(HERE, "*.png")):
            shutil.copy(png, self.d)
        md = os.path.join(self.d, "RESULTS.md")
        out = self.render("table", os.path.join(HERE, "summary.json"), "-o", md, "--notes", os.path.join(HERE, "plot-notes.txt"))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(open(md, "rb").read(), open(os.path.join(HERE, "RESULTS.md"), "rb").read())

