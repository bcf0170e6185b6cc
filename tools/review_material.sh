#!/bin/bash
# diagnose's words, for an independent review (docs/reviews/README.md): its output on every external trace, the
# folders, the exam and the reference traces it reads, the calibration and the cheat sheet, into DIR.
#     tools/review_material.sh .cache/review-diag-X     # then: preflight 11 16 17 and ../shared/review/dump.py into DIR/nb
set -u
D=$(realpath -m "$1"); mkdir -p "$D/out"
ROOT=$(cd "$(dirname "$0")/.." && pwd); cd "$ROOT"
PY=.venv/bin/python
X=../shared/external-traces
for f in $X/*.json $X/*.json.gz; do n=$(basename $f); n=${n%.gz}; n=${n%.json}; $PY -m helpers diagnose $f > $D/out/ext_$n.txt 2>&1; done
for w in $X/param_dlrm_8rank/worker0* $X/param_dlrm_8rank/worker1*; do n=$(basename $w | cut -d_ -f1); $PY -m helpers diagnose $w > $D/out/ext_$n.txt 2>&1; done
for d in $X/param_dlrm_8rank $X/hta_trace_filter traces/ranks/h200x2-* traces/exam/nvidia-h200/exam-9; do $PY -m helpers diagnose $d > $D/out/folder_$(basename $d).txt 2>&1; done
for f in traces/exam/nvidia-h200/exam-*.json; do $PY -m helpers diagnose $f > $D/out/exam_$(basename $f .json).txt 2>&1; done
$PY -m helpers diagnose $X/hta_trace_filter/sampled_rank-0.json.gz > $D/out/ext_sampled_rank-0.txt 2>&1
cd traces/reference/nvidia-h200
for f in loop*.json train-*.json input-*.json attn-*.json block8x256x512_bf16_warm_eager.json 4096_bf16_warm_*.json 64_bf16_warm_*.json mlp*eager*.json *compile*.json; do
  case $f in *timing*|compare_*) continue;; esac
  [ -f "$f" ] || continue
  (cd ../../.. && $PY -m helpers diagnose traces/reference/nvidia-h200/$f > $D/out/ref_${f%.json}.txt 2>&1)
done
cd "$ROOT"
$PY benchmarks/diagnose_calibration.py > $D/calibration.txt 2>&1
cp docs/cheat-sheet.md $D/cheat-sheet.md
echo done
