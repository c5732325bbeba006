#!/usr/bin/env bash
# name: torchrun-multi-node
# min_torch: 2.8
# title: torchrun launch template for several nodes (c10d rendezvous)
# world_size: 2
# requires:
# tags: torchrun, launch, multi-node, rendezvous, rdzv-backend, c10d, MASTER_ADDR, NCCL_SOCKET_IFNAME, elastic
# launch: NNODES=2 NPROC_PER_NODE=8 MASTER_ADDR=node0 MASTER_PORT=29500 bash assets/patterns/launch_torchrun_multi_node.sh
# mutant: a-node-missing: `--nnodes "$NNODES" \` -> `--nnodes "$((NNODES + 1))" \` => RendezvousTimeoutError
#
# Run the same command on every node. The c10d rendezvous on MASTER_ADDR:MASTER_PORT
# (any one node, reachable from all) assigns node ranks, so nodes may start in any
# order; --rdzv-id must be the same on every node and unique per job. World size is
# NNODES x NPROC_PER_NODE. Verified here with NNODES=1 on 127.0.0.1, which exercises
# the same rendezvous path as a real multi-node job.
#
# Usage (on each of 2 nodes):
#   NNODES=2 NPROC_PER_NODE=8 MASTER_ADDR=node0.example MASTER_PORT=29500 SCRIPT=train.py \
#     bash launch_torchrun_multi_node.sh [script args]
# If fewer nodes start than --nnodes says, the ones that did wait in the rendezvous up to the join
# timeout (JOIN_TIMEOUT, torchrun's default 600 s) and then fail with RendezvousTimeoutError: the
# a-node-missing mutant (its run sets JOIN_TIMEOUT=30).
# Elastic: NNODES=1:4 lets 1 to 4 nodes join; MAX_RESTARTS=3 restarts workers after a failure
# (the script must then resume from its latest checkpoint).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SCRIPT="${SCRIPT:-$here/fsdp2_training.py}"
: "${MASTER_ADDR:?set MASTER_ADDR to a host every node can reach (e.g. the first node)}"
MASTER_PORT="${MASTER_PORT:-29500}"
NNODES="${NNODES:-2}"
NPROC_PER_NODE="${NPROC_PER_NODE:-8}"
RDZV_ID="${RDZV_ID:-fsdp-$(date +%Y%m%d)}"
MAX_RESTARTS="${MAX_RESTARTS:-0}"
JOIN_TIMEOUT="${JOIN_TIMEOUT:-600}"  # seconds the nodes that came wait for the rest before failing

# NCCL over the right network: uncomment and adapt when nodes have several interfaces.
# export NCCL_SOCKET_IFNAME=eth0       # interface for bootstrap/socket traffic
# export NCCL_IB_HCA=mlx5              # InfiniBand adapters to use
# export NCCL_DEBUG=WARN               # INFO while debugging init or hangs
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # cores per node / ranks, for CPU-heavy work

exec torchrun \
    --nnodes "$NNODES" \
    --nproc-per-node "$NPROC_PER_NODE" \
    --rdzv-id "$RDZV_ID" \
    --rdzv-backend c10d \
    --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" \
    --rdzv-conf "join_timeout=$JOIN_TIMEOUT" \
    --max-restarts "$MAX_RESTARTS" \
    "$SCRIPT" "$@"
