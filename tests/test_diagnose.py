"""The cheat-sheet rules on the curriculum's scenarios, and on traces nobody here wrote."""

from __future__ import annotations

import json
import subprocess
import sys


from conftest import ROOT
from helpers.advice.diagnose import diagnose
from helpers.advice.findings import Severity
from helpers.reader.trace import read_trace


def rules(h200, tag):
    return {f.rule: f for f in diagnose(read_trace(h200 / f"{tag}.json"))}


def test_overhead_bound_at_64(h200):
    found = rules(h200, "64_bf16_cold_eager")
    f = found["cpu-bound"]
    assert f.severity == Severity.ISSUE and f.notebook == "02"
    assert f.evidence[0].startswith("in all the GPU waited for the CPU") and "the GPU ran work" in f.evidence[1]
    # two kernels a step: nothing to fuse, and notebook 08 times the compiled call slower than eager here
    assert f.gain is None and any("2 pieces of GPU work" in e and "no gain is sized" in e for e in f.evidence)
    assert "gpu-bound" not in found


def test_overhead_bound_with_many_launches_is_sized():
    """A transformer block launches dozens of kernels a step: halving the CPU's work between them is the basis."""
    from conftest import H200

    f = {x.rule: x for x in diagnose(read_trace(H200 / "block8x256x512_bf16_warm_eager.json"))}
    f = f.get("cpu-bound") or f["tiny-kernels"]
    assert f.gain is not None and f.gain.speedup > 1.2 and "halved" in f.gain.basis
    assert not any("no gain is sized" in e for e in f.evidence)


def test_compute_bound_at_4096_is_only_a_note(h200):
    got = diagnose(read_trace(h200 / "4096_bf16_warm_eager.json"))
    assert got[0].rule == "gpu-bound" and got[0].severity == Severity.NOTE and got[0].gain is None
    gaps = {f.rule: f for f in got}["cpu-bound"]  # what is left between the GEMMs: a note, not the step's pace
    assert gaps.severity == Severity.NOTE and gaps.title.startswith("Gaps between GPU work")
    assert any(e.startswith("not counted: ") and "before the first GPU work" in e for e in gaps.evidence)


def test_cold_first_step_without_warmup(h200):
    f = rules(h200, "64_bf16_cold_eager_s0-0-3")["cold-start"]
    assert "ProfilerStep#0" in f.evidence[0]
    assert any("cudaMalloc" in e for e in f.evidence)  # the set-up calls are named


def test_addmm_bias_copy_under_compile(h200):
    f = rules(h200, "4096_bf16_warm_compile")["addmm-bias-copy"]
    assert "32.0 MiB" in f.evidence[0] and "aten::addmm" in f.evidence[0]
    assert "addmm-bias-copy" not in rules(h200, "4096_bf16_warm_eager")


def test_buffer_request_with_wait_0(h200):
    assert "profiler-buffer" in rules(h200, "64_bf16_cold_eager_s0-0-3")
    assert "profiler-buffer" not in rules(h200, "64_bf16_cold_eager")


def test_compile_tax_on_tiny_work(h200):
    assert "compile-tax" in rules(h200, "64_bf16_warm_compile")
    assert "compile-tax" not in rules(h200, "4096_bf16_warm_compile")


def test_issues_come_first(h200):
    found = diagnose(read_trace(h200 / "64_bf16_warm_compile.json"))
    sev = [f.severity for f in found]
    assert sev == sorted(sev, key=lambda s: s != Severity.ISSUE)


def test_cli(h200):
    out = subprocess.run([sys.executable, "-m", "helpers", "diagnose", str(h200 / "64_bf16_cold_eager_s0-0-3.json"),
                          "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0
    assert {"cpu-bound", "cold-start", "profiler-buffer"} <= {f["rule"] for f in json.loads(out.stdout)}
    text = subprocess.run([sys.executable, "-m", "helpers", "diagnose", str(h200 / "64_bf16_cold_eager.json")],
                          capture_output=True, text=True, cwd=ROOT).stdout
    assert text.startswith("Look first at: CPU-bound") and "[issue] CPU-bound" in text and "try:" in text


def test_occupancy_queries_in_the_first_step_only(h200):
    f = rules(h200, "64_bf16_cold_eager_s0-0-3")["occupancy-queries"]
    assert "aten::mm" in f.evidence[0] and "in 1 of 3 recorded steps" in f.evidence[1]
    assert "set" in f.next  # set-up, not a cost every call
    assert "occupancy-queries" not in rules(h200, "4096_bf16_warm_eager")


def test_the_launch_call_is_not_a_rule(h200):
    # Triton kernels go through cuLaunchKernel and flash attention through cudaLaunchKernel: no finding rests on it
    for tag in ("mlp64x128x768x3072_bf16_warm_compile", "attn-sdpa-flash1024_bf16_warm_eager"):
        found = diagnose(read_trace(h200 / f"{tag}.json"))
        assert not any("driver" in f.title.lower() or "heavy" in f.title.lower() for f in found)
        assert "heavy-kernels" not in {f.rule for f in found}


def test_closing_sync_reads_what_the_gpu_did(h200):
    busy = rules(h200, "4096_bf16_warm_eager").get("profiler-flush")
    assert busy is not None and "busy" in busy.next  # the GPU worked through most of the final synchronize
    idle = [f for f in diagnose(read_trace(h200 / "64_bf16_cold_eager.json")) if f.rule == "profiler-flush"]
    assert all("idle" in f.next for f in idle)


def _compiled_cpu_trace(tmp_path, break_graph: bool):
    """A real trace of a compiled function on this CPU: a recompile, or a graph break."""
    import torch

    def fn(x, w, b):
        y = torch.matmul(x, w)
        if break_graph:
            torch._dynamo.graph_break()
        return torch.add(y, b)

    torch._dynamo.reset()
    cfn = torch.compile(fn, backend="aot_eager")
    small, other = [torch.randn(16, 16) for _ in range(3)], [torch.randn(24, 24) for _ in range(3)]
    cfn(*small)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        cfn(*small)
        if not break_graph:
            cfn(*other)
    path = tmp_path / "compiled.json"
    prof.export_chrome_trace(str(path))
    return read_trace(path)


def test_recompile_is_read_from_the_region_names(tmp_path):
    found = {f.rule: f for f in diagnose(_compiled_cpu_trace(tmp_path, break_graph=False))}
    assert "recompiles" in found and "0/1" in found["recompiles"].evidence[0]
    assert found["recompiles"].severity == Severity.ISSUE


def test_graph_break_is_not_called_a_recompile(tmp_path):
    found = {f.rule for f in diagnose(_compiled_cpu_trace(tmp_path, break_graph=True))}
    assert "graph-breaks" in found and "recompiles" not in found


def test_hidden_sync_sizes_each_cause_alone(h200):
    """A fix may remove some of the waits only (no loss.item() leaves the copies' waits): each cause's own gain,
    the causes together the finding's (their savings add: no time is counted twice)."""
    f = rules(h200, "loop_bf16_warm_eager")["hidden-sync"]
    parts = {(p.cause, p.annotation): p for p in f.parts}
    item = next(p for p in f.parts if p.cause == "aten::_local_scalar_dense")
    assert ("aten::_to_copy", "to_device") in parts and ("aten::_to_copy", "loss") in parts
    assert item.gain.speedup < min(parts["aten::_to_copy", "to_device"].gain.speedup,
                                   parts["aten::_to_copy", "loss"].gain.speedup)
    together = 1 / (1 - sum(1 - 1 / p.gain.speedup for p in f.parts))
    assert abs(together - f.gain.speedup) < 0.01 * f.gain.speedup
    assert [set(p) for p in f.to_json()["parts"]] == [{"cause", "annotation", "expected_speedup",
                                                       "expected_speedup_range"}] * len(f.parts)


def test_waits_inside_a_librarys_exchange_are_the_librarys():
    """DLRM's rank 0: most waits sit in TorchRec's all-to-all awaitables: not called a user's copy, their blocks not
    taken to shrink, and the advice says the library's pipelined loop runs already (its labels are in the trace)."""
    from conftest import EXTERNAL, diagnosed, ext

    ext("param_dlrm_8rank")
    path = next((EXTERNAL / "param_dlrm_8rank").glob("worker0*"))
    f = {x.rule: x for x in diagnosed(str(path))}["hidden-sync"]
    lib = [e for e in f.evidence if "AllToAllAwaitable" in e or "sparse_data_dist" in e]
    assert lib and all("a distributed library's own exchange" in e and "usually a copy" not in e for e in lib)
    assert not any("record_function block" in e and "shorten these blocks" in e for e in f.evidence)
    assert "show its pipelined training loop running already" in f.next and "train_pipelines.py" in f.next


def test_no_gpu_pace_high_end_where_the_dataloader_fills_the_step(h200):
    """exam-2's GPU is busy a few percent of a window the DataLoader fills: no profiler makes the GPU set the pace,
    so the unfused optimizer's note says little and nothing of 'the GPU may set the pace'."""
    from conftest import ROOT

    found = {x.rule: x for x in diagnose(read_trace(ROOT / "traces" / "exam" / "nvidia-h200" / "exam-2.json"))}
    f = found["unfused-optimizer"]
    assert "may set the pace" not in f.gain.words() and f.gain.high < 1.05


def test_fp32_gemm_evidence_quotes_what_its_example_name_holds(h200):
    from conftest import ROOT

    found = {x.rule: x for x in diagnose(read_trace(ROOT / "traces" / "exam" / "nvidia-h200" / "exam-2.json"))}
    line = found["fp32-gemm"].evidence[0]
    example = line.split("e.g. ", 1)[1]
    marker = example.rsplit(": ", 1)[1]
    quoted = marker.split("'")[1]
    assert quoted in example.rsplit(": ", 1)[0].lower()
