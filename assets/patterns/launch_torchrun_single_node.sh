#!/usr/bin/env bash
# name: torchrun-single-node
# min_torch: 2.8
# title: torchrun launch template for one node (--standalone)
# world_size: 2
# requires:
# tags: torchrun, launch, standalone, nproc-per-node, single node, OMP_NUM_THREADS, LOCAL_RANK
# mutant: nnodes-not-one: `--nnodes 1 \` -> `--nnodes 2 \` => RendezvousTimeoutError
#
# One machine, one process per GPU (or N CPU processes with gloo). `--standalone`
# starts a local rendezvous on a free port, so no MASTER_ADDR/MASTER_PORT is needed.
# torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in each
# worker; the script only calls init_process_group() and picks cuda:LOCAL_RANK.
#
# Keep --nnodes 1: with --nnodes 2 this one node waits in the rendezvous for a second that never
# comes, up to the join timeout (JOIN_TIMEOUT, torchrun's default 600 s), and then fails with
# RendezvousTimeoutError: the nnodes-not-one mutant (its run sets JOIN_TIMEOUT=30).
#
# Usage: NPROC_PER_NODE=8 SCRIPT=train.py bash launch_torchrun_single_node.sh [script args]
# Defaults: one rank per visible GPU (2 on a CPU-only machine), the fsdp2-training pattern.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SCRIPT="${SCRIPT:-$here/fsdp2_training.py}"
if [[ -z "${NPROC_PER_NODE:-}" ]]; then
    # Count GPUs without importing torch; CUDA_VISIBLE_DEVICES limits what the job may use.
    NPROC_PER_NODE=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
    [[ "$NPROC_PER_NODE" -gt 0 ]] || NPROC_PER_NODE=2
fi
# Unset, torchrun prints a warning and uses 1: set it to (cores per node / ranks) for CPU-heavy work.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
JOIN_TIMEOUT="${JOIN_TIMEOUT:-600}"  # seconds a rendezvous waits for its nodes before failing

exec torchrun \
    --standalone \
    --rdzv-conf "join_timeout=$JOIN_TIMEOUT" \
    --nnodes 1 \
    --nproc-per-node "$NPROC_PER_NODE" \
    "$SCRIPT" "$@"
