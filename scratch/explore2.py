import sys, time, json, warnings
warnings.filterwarnings("ignore")
import torch
from helpers.runs.slow_loop import slow_loop, FIXES, NoisyBatches
from helpers.facts import measure
for work in (int(a) for a in sys.argv[1:]):
    ds = NoisyBatches(1024, 1024, work); ds[0]
    t=time.perf_counter(); [ds[i] for i in range(20)]; c=(time.perf_counter()-t)/20*1e3
    configs = {"base": (), "tf32": ("tf32",), "loader": ("loader",), "four": FIXES[:4], "five": FIXES}
    calls = {k: slow_loop(fx, work=work).build("cuda", "bf16") for k, fx in configs.items()}
    m = measure.interleave(calls, device="cuda", rounds=6, max_per_block=3, host=False, wall=True, settle=8, where="h200")
    print(f"work {work}: batch {c:.2f} ms | " + " | ".join(f"{k} {s.median/1e3:.2f} [{s.quartiles[0]/1e3:.2f}-{s.quartiles[1]/1e3:.2f}]" for k, s in m.wall.items()), flush=True)
    del calls
