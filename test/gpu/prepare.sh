#!/usr/bin/env bash
# Builds, here, everything test/gpu/run.sh runs on a GPU machine, into one
# directory that travels there (at most 64 MiB): the CUDA test binaries, the
# test models compiled with --target=cuda, their batches, and PyTorch's
# reference losses and gradients computed here on the CPU. slapoc, MLIR and
# LibTorch never run there.
#
#   test/gpu/prepare.sh [BUILD_DIR] [SUITE_DIR]     (default build/, build/gpu-suite)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
suite=${2:-$build/gpu-suite}
python=/usr/bin/python3
export PYTHONPATH=$root/third_party/.pydeps
e2e=$root/test/e2e
slapoc=$build/tools/slapoc/slapoc

for binary in test/runtime/slapo-conformance-tests test/runtime/slapo-nccl-tests \
    tools/slapo-merge/slapo-merge; do
  if [ ! -x "$build/$binary" ]; then
    echo "prepare.sh: $build/$binary is missing: build with the CUDA backend" >&2
    exit 1
  fi
done

rm -rf "$suite"
mkdir -p "$suite/bin" "$suite/cases"
cp "$build/test/runtime/slapo-conformance-tests" "$build/test/runtime/slapo-nccl-tests" \
  "$build/tools/slapo-merge/slapo-merge" "$suite/bin/"
cp "$e2e/compare.py" "$e2e/check_merged.py" "$e2e/torch_train.py" "$suite/bin/"
strip "$suite"/bin/slapo-*
# The conformance test's CPU reference kernels need oneDNN (and what it
# loads), which GPU machines do not install: they travel in lib/.
mkdir -p "$suite/lib"
ldd "$suite/bin/slapo-conformance-tests" |
  awk '/libdnnl|libOpenCL|libgomp/ { print $3 }' | xargs -I{} cp -L {} "$suite/lib/"

# model [--train] NAME MODEL INPUTS...: exports test/models' MODEL (in
# training mode with --train: dropout active) and writes 5 steps of batches
# for the given --input specs.
model() {
  local export_flags=()
  if [ "$1" = --train ]; then
    export_flags=(--train)
    shift
  fi
  local name=$1 kind=$2
  shift 2
  local dir=$suite/cases/$name
  mkdir -p "$dir"
  $python "$root/test/models/export.py" --model "$kind" --mode script "${export_flags[@]}" \
    --out "$dir/model.pt" > /dev/null
  local specs=()
  for spec in "$@"; do specs+=(--input "$spec"); done
  $python "$e2e/make_batches.py" "$dir/model.pt" "${specs[@]}" --vocab 128 --steps 5 \
    --seed 2 -o "$dir/batches.safetensors"
}

# reference NAME TORCH_TRAIN_FLAGS...: PyTorch's 5 steps on the CPU, with
# step 1's gradients.
reference() {
  local dir=$suite/cases/$1
  shift
  $python "$e2e/torch_train.py" "$dir/model.pt" --batches "$dir/batches.safetensors" \
    --steps 5 --out-json "$dir/ref.json" --save-grads "$dir/ref-grads.safetensors" "$@"
}

# program NAME OUT SLAPOC_FLAGS...: compiles the case's model for the GPU
# into cases/NAME/OUT.
program() {
  local dir=$suite/cases/$1 out=$2
  shift 2
  "$slapoc" "$dir/model.pt" --target=cuda "$@" -o "$dir/$out" > "$dir/$out.compile.log"
  strip "$dir/$out"/rank*/train
  rm -f "$dir/$out"/rank*/step.cu
}

adamw=(--optimizer adamw --lr 0.003 --weight-decay 0.1 --grad-clip 1.0
  --lr-schedule warmup_cosine --warmup-steps 2)
gpt2_inputs=('input_ids=i64[8,32]' 'labels=i64[8,32]')

model gpt2 gpt2 "${gpt2_inputs[@]}"
reference gpt2 "${adamw[@]}"
gpt2_flags=(--input 'input_ids=i64[8,32]' --input 'labels=i64[8,32]')
program gpt2 fp32 "${gpt2_flags[@]}" --schedule "$e2e/Inputs/adamw.sched"
program gpt2 bf16 "${gpt2_flags[@]}" --schedule "$e2e/Inputs/bf16.sched"
# bf16 with replace("flash_attention"): the attention in bf16 (as autocast
# runs scaled_dot_product_attention), which runs as cuDNN's fused attention.
{
  cat "$e2e/Inputs/bf16.sched"
  echo 'sch["transformer.h.*.attn"].replace("flash_attention")'
} > "$suite/cases/gpt2/flash-bf16.sched"
program gpt2 flash-bf16 "${gpt2_flags[@]}" --schedule "$suite/cases/gpt2/flash-bf16.sched"
# bf16 with replace("cross_entropy"): the LM head's kernel multiplies bf16
# hidden rows and weight, its logits, loss and gradients f32.
{
  cat "$e2e/Inputs/bf16.sched"
  echo 'sch["lm_head"].replace("cross_entropy")'
} > "$suite/cases/gpt2/ce-bf16.sched"
program gpt2 ce-bf16 "${gpt2_flags[@]}" --schedule "$suite/cases/gpt2/ce-bf16.sched"
program gpt2 dp2 "${gpt2_flags[@]}" --schedule "$e2e/Inputs/adamw-dp2.sched"
# Two pipeline stages, 1F1B over 2 microbatches (on one GPU the stages'
# messages and the tied embedding's all-reduce go through MPI).
sed 's/microbatches=1)/microbatches=2)/' "$e2e/Inputs/adamw-pp2.sched" \
  > "$suite/cases/gpt2/pp2.sched"
grep -q 'microbatches=2' "$suite/cases/gpt2/pp2.sched"
program gpt2 pp2 "${gpt2_flags[@]}" --schedule "$suite/cases/gpt2/pp2.sched"
# Every elementwise chain a generated kernel (train(fusion="auto")).
sed 's/warmup_steps=2)/warmup_steps=2, fusion="auto")/' "$e2e/Inputs/adamw.sched" \
  > "$suite/cases/gpt2/fused.sched"
grep -q 'fusion="auto"' "$suite/cases/gpt2/fused.sched"
program gpt2 fused "${gpt2_flags[@]}" --schedule "$suite/cases/gpt2/fused.sched"
# tp=2 with the shipped Megatron-style schedule, adamw.sched's optimizer.
sed 's/^train(.*/train(optimizer="adamw", lr=0.003, weight_decay=0.1, grad_clip=1.0, lr_schedule="warmup_cosine", warmup_steps=2)/' \
  "$root/schedules/gpt2.sched" > "$suite/cases/gpt2/tp2.sched"
grep -q 'lr_schedule="warmup_cosine"' "$suite/cases/gpt2/tp2.sched"
program gpt2 tp2 --schedule "$suite/cases/gpt2/tp2.sched"

# GPT-2 in training mode (attention dropout, p=0.1), one kernel per op, with
# and without replace("flash_attention"): the kernel draws the masks of the
# dropout it replaces, so the two train alike up to rounding.
model --train gpt2-dropout gpt2 "${gpt2_inputs[@]}"
dropout=$suite/cases/gpt2-dropout
sed 's/warmup_steps=2)/warmup_steps=2, fusion="none")/' "$e2e/Inputs/adamw.sched" \
  > "$dropout/none.sched"
grep -q 'fusion="none"' "$dropout/none.sched"
{
  cat "$dropout/none.sched"
  echo 'sch["transformer.h.*.attn"].replace("flash_attention")'
} > "$dropout/flash.sched"
program gpt2-dropout none "${gpt2_flags[@]}" --schedule "$dropout/none.sched"
program gpt2-dropout flash "${gpt2_flags[@]}" --schedule "$dropout/flash.sched"

model bert bert 'input_ids=i64[2,16]' 'attention_mask=i64[2,16]:2' 'labels=i64[2,16]'
reference bert "${adamw[@]}"
program bert fp32 --input 'input_ids=i64[2,16]' --input 'attention_mask=i64[2,16]' \
  --input 'labels=i64[2,16]' --schedule "$e2e/Inputs/adamw.sched"

model llama llama 'input_ids=i64[2,16]' 'labels=i64[2,16]'
reference llama "${adamw[@]}"
program llama fp32 --input 'input_ids=i64[2,16]' --input 'labels=i64[2,16]' \
  --schedule "$e2e/Inputs/adamw.sched"
# bf16 on one rank with the shipped kernels: grouped-query flash attention
# (cuDNN's: 4 query heads on 2 key/value heads) and the rotary embedding
# writing the attention's bf16 query and key and reading its bf16 gradients.
{
  cat "$e2e/Inputs/bf16.sched"
  echo 'sch["model.layers.*.self_attn"].replace("flash_attention")'
  echo 'sch["model.layers.*.*_layernorm"].replace("fused_rmsnorm")'
  echo 'sch["model.norm"].replace("fused_rmsnorm")'
} > "$suite/cases/llama/flash-bf16.sched"
program llama flash-bf16 --input 'input_ids=i64[2,16]' --input 'labels=i64[2,16]' \
  --schedule "$suite/cases/llama/flash-bf16.sched"

# shipped SCHEDULE CASE: the shipped schedule (tp=2 and its replace() kernels:
# flash attention, fused RMSNorm) with the case's inputs and adamw.sched's
# optimizer, into cases/CASE/shipped.sched.
shipped() {
  local to=$suite/cases/$2/shipped.sched
  sed -e 's/i64\[8, 32\]/i64[2, 16]/' \
    -e '/^train(/,/)$/c train(optimizer="adamw", lr=0.003, weight_decay=0.1, grad_clip=1.0, lr_schedule="warmup_cosine", warmup_steps=2)' \
    "$root/schedules/$1" > "$to"
  grep -q 'warmup_steps=2)' "$to"
  grep -q 'i64\[2, 16\]' "$to"
  grep -q '\.replace(' "$to"
}
shipped bert.sched bert
program bert shipped --schedule "$suite/cases/bert/shipped.sched"
shipped llama.sched llama
program llama shipped --schedule "$suite/cases/llama/shipped.sched"

# The WideResNet in training mode (cuDNN convolutions, batch_norm's batch
# statistics and running-statistics buffers), 8 images of 32x32 a step, SGD
# as wideresnet.test trains it: in fp32 and in bf16.
wrn=$suite/cases/wideresnet
mkdir -p "$wrn"
$python "$root/test/models/export.py" --model wideresnet --mode trace --train \
  --out "$wrn/model.pt" > /dev/null
$python "$e2e/make_batches.py" "$wrn/model.pt" --input 'x=f32[8,3,32,32]' \
  --input 'labels=i64[8]:10' --steps 5 --seed 4 -o "$wrn/batches.safetensors"
reference wideresnet --optimizer sgd --lr 0.1 --momentum 0.9 --weight-decay 5e-4
sed 's/dp=2/dp=1/' "$root/schedules/wideresnet.sched" > "$wrn/fp32.sched"
sed 's/train(/train(precision="bf16", /' "$wrn/fp32.sched" > "$wrn/bf16.sched"
program wideresnet fp32 --schedule "$wrn/fp32.sched"
program wideresnet bf16 --schedule "$wrn/bf16.sched"

cp "$root/test/gpu/run.sh" "$suite/"
# Compressed, the suite travels in a few MiB: xz -9's 64 MiB window spans
# several programs, which share most of their code (half the size of -3's).
tar -C "$(dirname "$suite")" -cf - "$(basename "$suite")" | xz -T2 -9 > "$suite.tar.xz"
echo "prepare.sh: $suite ($(du -sh "$suite" | cut -f1)), $suite.tar.xz ($(du -sh "$suite.tar.xz" | cut -f1))"
