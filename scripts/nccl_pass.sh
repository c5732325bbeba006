#!/usr/bin/env bash
# The NCCL pass: on a machine with CUDA GPUs, run what the CPU report (references/verification.json)
# ran on gloo, on nccl instead, and write one JSON report per part into OUTPUT_DIR:
#   environment.json  torch, CUDA, NCCL, the GPUs
#   claims.json       the claim checks marked `requires: cuda` (the others state gloo/CPU behaviour), then
#                     their mutants (`--mutants`: each check with its claim made false must fail: killed)
#   patterns.json     every pattern of assets/patterns/
#   examples.json     the docstring examples and the reference pages' code blocks
#   probe.json        whether NCCL takes two ranks on one GPU (it decides what a one-GPU machine can run)
# Anything stated for more ranks than there are GPUs runs at one rank per GPU (`--max-ranks`): its row
# says so, and its documented outputs are not compared. Patterns and examples run side by side (two
# process groups of their own on the same GPUs) to halve the wall time; each part has its own timeout.
# Then, in a checkout, `PYTHONPATH=server python3 -m fsdp_skill.verify.nccl_report OUTPUT_DIR` folds the parts
# into references/verification-nccl.json and .md (the MCP server shows those rows beside the gloo ones).
# Usage: scripts/nccl_pass.sh OUTPUT_DIR   (needs only torch; PYTHON picks the interpreter)
set -u
out=${1:?usage: scripts/nccl_pass.sh OUTPUT_DIR}
py=${PYTHON:-python3}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
log="$out/pass.log"

gpus=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)')
if [ "${gpus:-0}" -lt 1 ]; then
  echo "nccl_pass: no CUDA GPU is visible to $py (torch.cuda.is_available() is False): run it on a GPU machine" >&2
  exit 2
fi
"$py" scripts/nccl_probe.py environment >"$out/environment.json" 2>>"$log"
run=("$py" scripts/verify_examples.py --backend nccl --max-ranks "$gpus")
started=$(date +%s)

echo "== claims that need CUDA" >>"$log"
# 3 checks and their 6 mutants, each a torchrun start: 600 s leaves room for a slow first CUDA init.
timeout -k 10 600 "${run[@]}" --only-claims --mutants --id claim:device-id-eager-init \
  --id claim:nccl-needs-cuda-tensors --id claim:expandable-segments --json "$out/claims.json" >>"$log" 2>&1
echo "claims: exit $? after $(($(date +%s) - started)) s" >>"$log"

timeout -k 10 300 "${run[@]}" --only-patterns --json "$out/patterns.json" >"$out/patterns.log" 2>&1 &
patterns=$!
timeout -k 10 300 "${run[@]}" --no-patterns --no-claims --json "$out/examples.json" >"$out/examples.log" 2>&1 &
examples=$!
wait "$patterns"; echo "patterns: exit $? after $(($(date +%s) - started)) s" >>"$log"
wait "$examples"; echo "examples: exit $? after $(($(date +%s) - started)) s" >>"$log"

echo "== two ranks on one GPU" >>"$log"
timeout -k 10 75 "$py" scripts/nccl_probe.py two-ranks-one-gpu >"$out/probe.json" 2>>"$log"
echo "probe: exit $? after $(($(date +%s) - started)) s" >>"$log"
