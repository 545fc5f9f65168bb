#!/usr/bin/env bash
# The dense calibration of far MQAR (configs/study/recall/far_mqar.yaml: L = 256, kv = 8, a gap
# of 96): dense at 3, 4 and 5 layers, three seeds each, on one core; the study runs at the
# smallest depth at which every seed reaches 0.9. Run from a worktree pinned at one commit;
# each run lands in $ROOT/<name>/dense/version_0 with $ROOT/<name>.log (the /usr/bin/time
# line), and harvest_calibration.py records it. Usage: calibrate-far-mqar.sh ROOT [NAME ...]
# (NAME: far_L<layers>_s<seed>; default: every depth, the shallowest first).
set -euo pipefail
root=${1:?usage: calibrate-far-mqar.sh ROOT [NAME ...]}; shift
core=${CORE:-1}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(far_L3_s0 far_L3_s1 far_L3_s2 far_L4_s0 far_L4_s1 far_L4_s2
  far_L5_s0 far_L5_s1 far_L5_s2)
for name in "${names[@]}"; do
  [[ $name =~ ^far_L([0-9]+)_s([0-9]+)$ ]] || { echo "not a run name: $name"; exit 2; }
  layers=${BASH_REMATCH[1]} seed=${BASH_REMATCH[2]}
  [ -f "$root/$name/dense/version_0/recall.json" ] && { echo "done: $name"; continue; }
  rm -rf "${root:?}/$name"
  echo "=== $name ($(date -u +%T))"
  /usr/bin/time -f "$name wall %e s, cpu %U+%S s" taskset -c "$core" env OMP_NUM_THREADS=1 \
    python -m lit_sparse fit --config configs/dense.yaml --config configs/study/recall/far_mqar.yaml \
    --model.arch.n_layers "$layers" --seed_everything "$seed" --data.init_args.seed "$seed" \
    --trainer.enable_progress_bar false --trainer.logger.init_args.save_dir "$root/$name" \
    > "$root/$name.log" 2>&1 || echo "FAILED: $name"
  tail -1 "$root/$name.log"
done
