"""ROCm traces that name no GPU: the roofline finds its data sheet by the device's compute version and units, and a
HIP allocation is labelled hip (issue 34's small faults: "no roofs" on an MI300X, "device type 6:0")."""

from __future__ import annotations

import json

from helpers.facts import hardware, memory, roofline
from helpers.reader.trace import read_trace

MI300X = {"id": 0, "name": "", "totalGlobalMem": 206141652992, "computeMajor": 9, "computeMinor": 4,
          "maxThreadsPerBlock": 1024, "warpSize": 64, "numSms": 304}


def _trace(tmp_path, device: dict):
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 60,
         "args": {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"],
                  "External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x1", "pid": 0, "tid": 0,
         "ts": 20, "dur": 200.0, "args": {"correlation": 7, "device": 0, "stream": 0}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "s": "t",
         "args": {"Device Type": 6, "Device Id": 0, "Bytes": 33554432, "Total Allocated": 33554432,
                  "Total Reserved": 33554432}},
    ]
    p = tmp_path / "rocm.json"
    p.write_text(json.dumps({"deviceProperties": [device], "traceEvents": ev}))
    return read_trace(p)


def test_an_unnamed_mi300x_gets_its_data_sheet(tmp_path):
    t = _trace(tmp_path, MI300X)
    assert hardware.identify(t.devices) == "AMD Instinct MI300X"
    r = roofline.roofline(t)
    assert r.peaks is not None and r.peaks.gpu.startswith("AMD Instinct MI300X (by its deviceProperties")
    assert r.peaks.bandwidth_tbs == 5.3 and r.peaks.compute_tflops[roofline.ROOF_16] == 1307.4
    (p,) = r.points  # the GEMM sized from the shapes the reader kept in its one pass
    assert p.flops == 2 * 4096 ** 3 and abs(p.achieved_tflops - 2 * 4096 ** 3 / 200e-6 / 1e12) < 1e-6


def test_a_named_gpu_or_an_unknown_one_is_not_guessed(tmp_path):
    assert hardware.identify([{**MI300X, "name": "AMD Instinct MI300X"}]) is None  # its name finds its row
    assert roofline.roofline(_trace(tmp_path, {**MI300X, "name": "AMD Instinct MI300X"})).peaks.bandwidth_tbs == 5.3
    assert hardware.identify([{**MI300X, "numSms": 228}]) is None  # no part with these units in the table
    assert roofline.roofline(_trace(tmp_path, {**MI300X, "numSms": 228})).peaks is None


def test_a_hip_allocation_is_labelled_hip(tmp_path):
    t = _trace(tmp_path, MI300X)
    assert memory.device_label(6, 0) == "hip:0"
    assert [p.device for p in memory.memory_peaks(t)] == ["hip:0"]
