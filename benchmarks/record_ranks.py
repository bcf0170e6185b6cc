"""Two-GPU recordings for the rank analysis (helpers/facts/ranks.py): what made traces/ranks/h200x2-*.

Run on a machine with two GPUs, one process per GPU:

    for m in ddp straggler manual; do torchrun --nproc_per_node 2 benchmarks/record_ranks.py $m OUTDIR/$m; done

Each rank writes OUTDIR/MODE/rank<N>.json.gz (its rank is also in the trace's
distributedInfo). The model: 8 bf16 Linear(4096, 4096) layers, batch 4096;
11 warm-up steps (past DDP's first ten iterations, where its reducer times buckets with
CUDA events it waits on), then the profiler's schedule (wait 1, warmup 1, active 3), the GPU synchronized before the first active
step (else kernels the CPU launched ahead, in the unrecorded steps, run inside the recording without their launch).

* ddp: DistributedDataParallel, the same work on both ranks; DDP all-reduces
  each gradient bucket during the backward pass.
* straggler: the same, but rank 1 runs 20 extra 4096x4096 matrix products at
  the start of each step, so the others wait for it.
* manual: no DDP: after the whole backward pass, one all-reduce per parameter,
  so nothing is left to overlap them with.

The code below is what ran (it was sent to the machine as it is, compactly), except that the traces
now under traces/ranks/h200x2-* were taken after 5 warm-up steps, inside those ten iterations: the
next recording on two GPUs replaces them.
"""
import os,sys,torch,torch.distributed as dist
from torch.profiler import profile,ProfilerActivity as A,schedule
dist.init_process_group("nccl");r=dist.get_rank();torch.cuda.set_device(r)
mode,out=sys.argv[1],sys.argv[2]
torch.manual_seed(0)
m=torch.nn.Sequential(*[torch.nn.Linear(4096,4096) for _ in range(8)]).cuda().to(torch.bfloat16)
net=m if mode=="manual" else torch.nn.parallel.DistributedDataParallel(m,device_ids=[r])
opt=torch.optim.SGD(net.parameters(),lr=1e-6)
x=torch.randn(4096,4096,device="cuda",dtype=torch.bfloat16);w=x.clone()
def step():
    if mode=="straggler" and r==1:
        y=w
        for _ in range(20):y=y@w
    net(x).float().square().mean().backward()
    if mode=="manual":
        for p in m.parameters():dist.all_reduce(p.grad)
    opt.step();opt.zero_grad()
for _ in range(11):step()
torch.cuda.synchronize();dist.barrier()
with profile(activities=[A.CPU,A.CUDA],schedule=schedule(wait=1,warmup=1,active=3)) as p:
    for i in range(5):
        step()
        if i==1:torch.cuda.synchronize()  # the unrecorded steps' kernels end before the recording starts
        p.step()
torch.cuda.synchronize()
p.export_chrome_trace(f"/tmp/t{r}.json")
os.makedirs(out,exist_ok=True);os.system(f"gzip -c /tmp/t{r}.json > {out}/rank{r}.json.gz")
dist.destroy_process_group()
