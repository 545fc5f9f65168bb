#!/usr/bin/env bash
# The recall study's dense calibration on MQAR (64, 4): one fit per lever, one core, each to
# 512k training examples or an early stop at 0.99 held-out accuracy. Run from a worktree
# pinned at one commit; results land in $ROOT/<name>/dense/version_0 (recall.json and the
# TensorBoard events that hold the learning curve). Usage: calibrate.sh ROOT [NAME ...]
set -euo pipefail
root=${1:?usage: calibrate.sh ROOT [NAME ...]}; shift
core=${CORE:-1}
declare -A runs=(
  # name                 options after the base (2 layers, 1 head of 64, no MLP, batch 256, lr 3e-3)
  [L2_h1_ffn0]=""
  [L4_h1_ffn0]="--model.arch.n_layers 4"
  [L5_h1_ffn0]="--model.arch.n_layers 5"
  [L4_h4_ffn0]="--model.arch.n_layers 4 --model.arch.n_heads 4 --model.arch.n_kv_heads 4 --model.arch.head_dim 16"
  [L4_h1_swiglu]="--model.arch.n_layers 4 --model.arch.ffn_hidden null"
  [L4_h1_ffn0_lr1e-3]="--model.arch.n_layers 4 --model.lr 1e-3"
  [L4_h1_ffn0_lr1e-2]="--model.arch.n_layers 4 --model.lr 1e-2"
  [L4_h1_ffn0_b64]="--model.arch.n_layers 4 --data.init_args.batch_size 64 --trainer.max_steps 8000 --trainer.val_check_interval 400"
  [L4_h1_ffn0_b512]="--model.arch.n_layers 4 --data.init_args.batch_size 512 --trainer.max_steps 1000 --trainer.val_check_interval 50"
  [L4_h1_ffn0_nowarm_wd0]="--model.arch.n_layers 4 --model.warmup_steps 0 --model.weight_decay 0"
  [L4_h1_ffn0_V8192]="--model.arch.n_layers 4 --data.init_args.vocab_size 8192"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(L2_h1_ffn0 L4_h1_ffn0 L5_h1_ffn0 L4_h4_ffn0 L4_h1_swiglu
  L4_h1_ffn0_lr1e-3 L4_h1_ffn0_lr1e-2 L4_h1_ffn0_b64 L4_h1_ffn0_b512 L4_h1_ffn0_nowarm_wd0
  L4_h1_ffn0_V8192)
for name in "${names[@]}"; do
  [ -f "$root/$name/dense/version_0/recall.json" ] && { echo "done: $name"; continue; }
  rm -rf "$root/$name"
  echo "=== $name ($(date -u +%T))"
  # shellcheck disable=SC2086
  /usr/bin/time -f "$name wall %e s, cpu %U+%S s" taskset -c "$core" env OMP_NUM_THREADS=1 \
    python -m lit_sparse fit --config configs/dense.yaml --config configs/study/recall/mqar64.yaml \
    --config configs/study/recall/calibrate.yaml \
    --model.arch.n_layers 2 --model.arch.n_heads 1 --model.arch.n_kv_heads 1 \
    --model.arch.head_dim 64 --model.arch.ffn_hidden 0 --data.init_args.batch_size 256 \
    ${runs[$name]} --trainer.logger.init_args.save_dir "$root/$name" \
    > "$root/$name.log" 2>&1 || echo "FAILED: $name"
  tail -1 "$root/$name.log"
done
