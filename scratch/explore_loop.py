import sys, time, json, statistics, warnings
warnings.filterwarnings("ignore")
import torch
from helpers.runs.slow_loop import slow_loop, FIXES, NoisyBatches
from helpers import facts
from helpers.facts import measure, step_facts
from helpers.advice import diagnose
from helpers.runs.runner import run_live
from pathlib import Path
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
kw = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
ds = NoisyBatches(kw.get("batch",1024), kw.get("dim",1024), kw.get("work",60000))
t=time.perf_counter(); [ds[i] for i in range(10)]; print("batch cost ms", (time.perf_counter()-t)/10*1e3, flush=True)
torch.set_num_threads(1); t=time.perf_counter(); [ds[i] for i in range(10)]; print("batch cost 1 thread ms", (time.perf_counter()-t)/10*1e3, flush=True); torch.set_num_threads(16)
configs = {"base": ()}
for f in FIXES: configs["only " + f] = (f,)
for i in range(2, len(FIXES)+1): configs["+".join(FIXES[:i])] = FIXES[:i]
calls = {}
for k, fx in configs.items():
    calls[k] = slow_loop(fx, **kw).build("cuda", "bf16")
t=time.perf_counter()
m = measure.interleave(calls, device="cuda", rounds=6, max_per_block=3, host=False, wall=True, settle=8, where="h200")
print("interleave s", time.perf_counter()-t)
for k, s in m.wall.items():
    print(f"{k:40s} {s.median/1e3:8.2f} ms  iqr {s.quartiles[0]/1e3:.2f}-{s.quartiles[1]/1e3:.2f}")
for fx in [(), FIXES, ("loader","sync","constant","fused")]:
    t=time.perf_counter()
    table, path, secs = run_live(slow_loop(fx, **kw), "cuda", "bf16", warm=True, compile=False, compile_mode=None, schedule=__import__("helpers.runs.tags").tags.ARTICLE, out_dir=out)
    tr = __import__("helpers.reader.trace").trace.read_trace(path)
    s = facts.summarize(tr)
    print(path.name, "secs", secs, "busy", s.balance.gpu_busy_share, "step", facts.median_step_us(tr))
    print("gpu per step", [(n, sum(v.values())) for n, v in facts.gpu_work_per_step(tr)])
    for sy in step_facts.hidden_syncs(tr): print("  sync", sy.step, sy.calls, sy.op, sy.cause_op, sy.annotation, sy.dur_us, sy.gpu_idle_after_us)
    print("  ", diagnose.first_line(diagnose.diagnose(tr)))
    for f in diagnose.diagnose(tr): print("    ", f.rule, f.share, f.title)
