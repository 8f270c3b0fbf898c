#!/usr/bin/env python3
"""bench/report.py on a hand-written results file: ratios, met / not met, commands, the QUICK banner."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402


def gpt(impl, model, world, stage, dtype, tps, step_s, **kw):
    r = {"bench": "gpt_train", "impl": impl, "model": model, "layers": 4, "embd": 192, "heads": 6, "vocab": 16384,
         "ctx": 256, "params": 4974720, "world": world, "stage": stage, "dtype": dtype, "batch": 8 // world,
         "tokens_per_s": tps, "step_s": step_s, "peak_mib": 100.0, "peak_rss_mib": 200.0,
         "cmd": f"{impl} {model} n{world} s{stage} {dtype}"}
    r.update(kw)
    return r


ROWS = [
    {"bench": "meta", "cpu": "Test CPU", "cores": 2, "isa": ["avx512_bf16"], "commit": "abc123", "quick": True},
    gpt("zerotrain", "gpt_5m", 1, 0, "f32", 3000.0, 1.0),
    gpt("pytorch", "gpt_5m", 1, 0, "f32", 1000.0, 3.0, variant="single", blas="openblas"),  # 3.0x: met
    gpt("zerotrain", "gpt_5m", 1, 0, "bf16", 1500.0, 1.0),
    gpt("pytorch", "gpt_5m", 1, 0, "bf16", 1000.0, 1.5, variant="single"),  # 1.5x: not met
    gpt("zerotrain", "gpt_5m", 2, 0, "f32", 2000.0, 1.00),
    gpt("zerotrain", "gpt_5m", 2, 1, "f32", 2000.0, 1.04),
    gpt("zerotrain", "gpt_5m", 2, 2, "f32", 2000.0, 1.10),  # 1.10x stage 0: stages 1-2 not met
    gpt("zerotrain", "gpt_5m", 2, 3, "f32", 2000.0, 1.20, comm_hidden_fraction=0.9),
    {"op": "reduce_scatter", "backend": "mpi", "bytes": 16 << 20, "busbw_GBps": 3.5, "impl": "zerotrain", "cmd": "c"},
    {"op": "all_gather", "backend": "mpi", "bytes": 16 << 20, "busbw_GBps": 2.5, "impl": "zerotrain", "cmd": "c"},
    {"op": "all_gather", "backend": "mpi", "bytes": 1 << 20, "busbw_GBps": 0.5, "impl": "zerotrain", "cmd": "c"},
    {"op": "all_gather", "backend": "gloo", "bytes": 16 << 20, "busbw_GBps": 1.0, "impl": "pytorch", "cmd": "g"},
    {"op": "matmul", "shape": "2x3@3x4", "dtype": "f32", "path": "f32", "gflops": 20.0, "impl": "zerotrain",
     "cmd": "m"},
    {"op": "matmul", "shape": "2x3@3x4", "dtype": "f32", "gflops": 10.0, "impl": "pytorch", "blas": "openblas",
     "cmd": "pm"},
    {"op": "bias_gelu_backward", "rows": 1024, "C": 3072, "dtype": "bf16", "threads": 2, "fused_ms": 1.5,
     "unfused_ms": 2.0, "speedup": 1.33, "fused_gbps": 12.6, "impl": "zerotrain", "cmd": "k"},
    {"bench": "offload", "op": "disk", "dtype": "f32", "n": 1 << 24, "direct": True, "write_gbps": 1.0,
     "read_gbps": 2.0, "ceiling_elems_per_s": 50e6, "stream_elems_per_s": 60e6, "impl": "zerotrain", "cmd": "o"},
    {"bench": "offload", "op": "adam_memory", "dtype": "f32", "n": 1 << 24, "elems_per_s": 400e6,
     "impl": "zerotrain", "cmd": "o"},
    {"bench": "offload", "op": "adam_offload", "dtype": "f32", "n": 1 << 24, "direct": True,
     "swapped_bytes_per_elem": 8, "elems_per_s": 30e6, "of_ceiling": 0.6, "step_s": 0.56, "compute_s": 0.3,
     "io_wait_s": 0.1, "impl": "zerotrain", "cmd": "o"},
    {"bench": "offload", "op": "adam_torch", "dtype": "f32", "n": 1 << 24, "elems_per_s": 60e6, "impl": "pytorch",
     "cmd": "t"},
]


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.r = report.Report([dict(r) for r in ROWS])
        self.text = self.r.render()
        self.targets = {t[0]: t for t in self.r.targets}

    def target(self, prefix):
        return next(t for name, t in self.targets.items() if name.startswith(prefix))

    def test_gpt_ratios_decide_met(self):
        self.assertIs(self.target("GPT ~5M, N=1, fp32")[2], True)
        self.assertIn("3.00x", self.target("GPT ~5M, N=1, fp32")[1])
        self.assertIs(self.target("GPT ~5M, N=1, bf16")[2], False)

    def test_missing_figures_are_not_measured(self):
        self.assertEqual(self.target("GPT-2 124M shape, N=2, fp32")[1], "not measured")
        self.assertIsNone(self.target("GPT-2 124M shape, N=2, fp32")[2])

    def test_stage_step_time_ratios(self):
        self.assertIs(self.target("N=2, same global batch: stage 1 and 2")[2], False)
        self.assertIn("s2 1.10x", self.target("N=2, same global batch: stage 1 and 2")[1])
        self.assertIs(self.target("N=2, same global batch: stage 3")[2], True)

    def test_collectives_need_both_ops_at_16_mib_and_above(self):
        t = self.target("Collectives N=2 (mpi)")
        self.assertIs(t[2], False)  # all-gather 2.5 GB/s at 16 MiB; the 1 MiB figure does not count
        self.assertNotIn("1 MiB", t[1])

    def test_overlap_is_reported_only_from_stage_2_rows(self):
        self.assertTrue(self.target("Overlap")[1].startswith("not measured"))
        self.assertEqual(self.r.targets[-1][0], self.target("Overlap")[0])

    def test_overlap_takes_each_models_best_configuration(self):
        rows = [dict(r) for r in ROWS] + [
            gpt("zerotrain", "gpt_5m", 2, 2, "f32", 2000.0, 1.0, comm_hidden_fraction=0.1),
            gpt("zerotrain", "gpt_5m", 2, 2, "f32", 2000.0, 0.5, comm_hidden_fraction=0.9, sparse_gradients=True)]
        r = report.Report(rows)
        text = r.render()
        t = next(t for t in r.targets if t[0].startswith("Overlap"))
        self.assertIs(t[2], True)
        self.assertIn("gpt_5m f32 10%; gpt_5m+sparse f32 90%", t[1])
        self.assertIn("| 2+sparse | f32 |", text)
        # The sparse row is no stage-2 step-time figure.
        self.assertNotIn("0.50x", next(t for t in r.targets if t[0].startswith("N=2, same global batch: stage 1"))[1])
        rows[-1]["comm_hidden_fraction"] = 0.5
        r = report.Report(rows)
        r.render()
        self.assertIs(next(t for t in r.targets if t[0].startswith("Overlap"))[2], False)

    def test_every_row_names_its_command(self):
        self.assertIn("`zerotrain gpt_5m n1 s0 f32`", self.text)
        self.assertIn("`pytorch gpt_5m n1 s0 f32`", self.text)
        self.assertIn("| 2x3@3x4 | f32 | f32 | 20.0 | blas/openblas | 10.0 | 2.00x | [1] [2] |", self.text)

    def test_bias_gelu_rows_show_fused_against_unfused(self):
        self.assertIn("| 1024x3072 | bf16 | 1.500 | 2.000 | 1.33x | 12.6 | [3] |", self.text)

    def test_offload_rows_set_the_update_beside_the_disk_and_in_memory_adam(self):
        self.assertIn("| f32 | 16,777,216 | 8 | yes | 1.00 | 2.00 | 50.0 | 60.0 | 30.0 | 0.56 (0.30, 0.10) | 60% | "
                      "400.0 | 60.0 | 0.07x | 0.50x | [1] [2] |", self.text)
        t = self.target("Optimizer offload")
        self.assertIs(t[2], False)
        self.assertIn("f32 16M 60%", t[1])
        self.assertIn("Below 80% of the ceiling: " + report.reason_for(t[0]), self.text)

    def test_header_says_quick_and_names_the_machine(self):
        self.assertIn("QUICK run", self.text)
        self.assertIn("Test CPU, 2 cores, ISA: avx512_bf16", self.text)
        self.assertIn("abc123", self.text)
        self.assertNotIn("QUICK run", report.Report([dict(r, quick=False) if r.get("bench") == "meta" else r
                                                     for r in ROWS]).render())

    def test_load_skips_non_json_lines(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"report_test_{os.getpid()}.jsonl")
        with open(path, "w") as f:
            f.write("noise\n" + json.dumps(ROWS[1]) + "\n\n")
        try:
            self.assertEqual(report.load(path), [ROWS[1]])
        finally:
            os.remove(path)

    def test_the_scale_block_of_the_previous_file_is_kept_and_nothing_else(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"report_test_{os.getpid()}.md")
        block = report.SCALE_BEGIN + "\n## Scale\n| a |\n" + report.SCALE_END
        with open(path, "w") as f:
            f.write("# Benchmarks\nold figures\n" + block + "\ntrailing\n")
        try:
            self.assertEqual(report.kept_sections(path), "\n" + block + "\n")
            with open(path, "w") as f:
                f.write("# Benchmarks\n" + report.SCALE_END + report.SCALE_BEGIN)  # out of order: nothing
            self.assertEqual(report.kept_sections(path), "")
        finally:
            os.remove(path)
        self.assertEqual(report.kept_sections(path), "")  # no previous file

    def test_every_kept_block_is_carried_in_its_order(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"report_test_{os.getpid()}.md")
        blocks = [b + f"\n## {i}\n" + e for i, (b, e) in enumerate(report.KEPT_BLOCKS)]
        with open(path, "w") as f:
            f.write("# Benchmarks\n" + "\nbetween\n".join(reversed(blocks)) + "\n")
        try:
            self.assertEqual(report.kept_sections(path), "".join("\n" + b + "\n" for b in blocks))
        finally:
            os.remove(path)


if __name__ == "__main__":
    unittest.main()
