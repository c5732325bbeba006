"""
name: dcp-resume
title: Resume training from a DCP checkpoint in a new process (model, optimizer, LR scheduler, step, sampler, RNG)
world_size: 2
requires:
tags: fsdp2, dcp, torch.distributed.checkpoint, resume, get_state_dict, set_state_dict, lr_scheduler, DistributedSampler, rng state, fault tolerance

Everything a run needs to continue exactly where it stopped, saved with DCP and loaded
by *new processes* (as after a crash or a job requeue):
- model and optimizer: `get_state_dict(model, optim)` -> sharded DTensor state dicts,
  `set_state_dict(...)` after `dcp.load` into the fresh model's own state dicts;
- LR scheduler: `scheduler.state_dict()` (plain Python values, the same on every rank);
- the step, and the data position: epoch + batches consumed in it; on resume
  `sampler.set_epoch(epoch)` and skip the consumed batches (DistributedSampler's
  shuffle is a function of seed + epoch, so the order is reproduced);
- RNG: each rank's `torch.get_rng_state()`, and on a GPU `torch.cuda.get_rng_state(device)`
  too (dropout on CUDA tensors draws from the device's generator), under its own key
  (`rng.rank<N>`): dropout masks continue where they were. Keys that differ per rank are fine in DCP. Give the
  DataLoader its own `generator`: each new iterator draws a seed from the global RNG
  otherwise, and the resumed run starts its iterators at other steps.

The script trains 10 steps uninterrupted (the reference), then again 5 steps and saves;
each rank then starts a new Python process (new process group, freshly built model
with another seed) that loads the checkpoint and trains steps 5..9. Asserted: the resumed
losses equal the reference's, step for step, exactly.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/dcp_resume.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

DIM, SAMPLES, BATCH, TOTAL, STOP = 16, 64, 4, 10, 5


def init_distributed() -> torch.device:
    """nccl + cuda:LOCAL_RANK when CUDA is available, else gloo + cpu (DIST_BACKEND overrides)."""
    backend = os.environ.get("DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device


def leave(code: int = 0) -> None:
    """Destroy the process group; on gloo leave with os._exit (SKILL.md pitfall 18)."""
    gloo = dist.get_backend() == "gloo"
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    if gloo:
        os._exit(code)
    sys.exit(code)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * DIM, DIM)) for _ in range(2))
        self.head = nn.Linear(DIM, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return self.head(x).squeeze(-1)


class Trainer:
    """Model, optimizer, scheduler and data position of one rank: everything a resume restores."""

    def __init__(self, device: torch.device, seed: int) -> None:
        torch.manual_seed(seed)
        self.device, self.rank = device, dist.get_rank()
        self.model = Model().to(device)
        for block in self.model.blocks:
            fully_shard(block)
        fully_shard(self.model)
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optim, step_size=3, gamma=0.5)
        data = torch.Generator().manual_seed(7)
        x = torch.randn(SAMPLES, DIM, generator=data)
        dataset = TensorDataset(x, x.sum(-1).sin())
        self.sampler = DistributedSampler(dataset, shuffle=True, seed=0, drop_last=True)
        # Its own generator: each new DataLoader iterator otherwise draws a seed from the global RNG,
        # and a resumed run creates its iterators at other steps than the uninterrupted one.
        self.loader = DataLoader(dataset, batch_size=BATCH, sampler=self.sampler, generator=torch.Generator())
        self.step, self.epoch, self.consumed = 0, 0, 0
        torch.manual_seed(1000 + self.rank)  # per-rank dropout RNG from here on

    def batches(self):
        while True:
            self.sampler.set_epoch(self.epoch)
            for index, batch in enumerate(self.loader):
                if index < self.consumed:
                    continue  # already trained on before the checkpoint
                self.consumed = index + 1
                yield batch
            self.epoch, self.consumed = self.epoch + 1, 0

    def train(self, until: int) -> list[float]:
        losses = []
        batches = self.batches()
        while self.step < until:
            x, y = next(batches)
            loss = nn.functional.mse_loss(self.model(x.to(self.device)), y.to(self.device))
            loss.backward()
            self.optim.step()
            self.optim.zero_grad()
            self.scheduler.step()
            self.step += 1
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.AVG)
            losses.append(logged.item())
        return losses

    def state(self) -> dict[str, object]:
        model_sd, optim_sd = get_state_dict(self.model, self.optim)
        return {
            "model": model_sd, "optim": optim_sd, "scheduler": self.scheduler.state_dict(),
            "progress": {"step": self.step, "epoch": self.epoch, "consumed": self.consumed},
            "rng": {f"rank{self.rank}": self.rng_state()},
        }

    def save(self, path: str) -> None:
        dcp.save(self.state(), checkpoint_id=path)

    def load(self, path: str) -> None:
        state = self.state()  # the right shapes and shardings to load into
        dcp.load(state, checkpoint_id=path)
        set_state_dict(self.model, self.optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.scheduler.load_state_dict(state["scheduler"])
        progress = state["progress"]
        self.step, self.epoch, self.consumed = progress["step"], progress["epoch"], progress["consumed"]
        self.set_rng_state(state["rng"][f"rank{self.rank}"])

    def rng_state(self) -> torch.Tensor:
        """This rank's RNG: the CPU generator's state, and on a GPU the device generator's too (dropout on a
        CUDA tensor draws from the device's generator: the NCCL run of this pattern found its resumed losses
        differed while only the CPU state was saved)."""
        states = [torch.get_rng_state()]
        if self.device.type == "cuda":
            states.append(torch.cuda.get_rng_state(self.device))
        return torch.cat(states)

    def set_rng_state(self, saved: torch.Tensor) -> None:
        cpu_size = torch.get_rng_state().numel()
        torch.set_rng_state(saved[:cpu_size].clone())
        if self.device.type == "cuda":
            torch.cuda.set_rng_state(saved[cpu_size:].clone(), self.device)


def resume(path: str, expected: list[float]) -> None:
    """Runs in the new process of each rank: load, train to the end, compare with the reference."""
    device = init_distributed()
    trainer = Trainer(device, seed=12345)  # other initial weights: everything must come from the checkpoint
    trainer.load(path)
    assert trainer.step == STOP and trainer.scheduler.get_last_lr() == [1e-2 * 0.5]
    losses = trainer.train(TOTAL)
    assert losses == expected, f"resumed {losses} != uninterrupted {expected}"
    if dist.get_rank() == 0:
        print(f"resumed in a new process at step {STOP}: losses {losses[0]:.6f} ... {losses[-1]:.6f} equal the "
              f"uninterrupted run's exactly", flush=True)
    leave()


def main() -> None:
    if "RESUME_FROM" in os.environ:
        return resume(os.environ["RESUME_FROM"], json.loads(os.environ["EXPECTED_LOSSES"]))
    device = init_distributed()
    rank = dist.get_rank()
    reference = Trainer(device, seed=0).train(TOTAL)  # uninterrupted

    interrupted = Trainer(device, seed=0)
    first = interrupted.train(STOP)
    assert first == reference[:STOP]
    shared = [tempfile.mkdtemp(prefix="dcp-resume-") if rank == 0 else "", 0]
    if rank == 0:
        with socket.socket() as sock:  # a port for the new processes' process group
            sock.bind(("127.0.0.1", 0))
            shared[1] = sock.getsockname()[1]
    dist.broadcast_object_list(shared, src=0)
    interrupted.save(shared[0])
    dist.barrier()
    dist.destroy_process_group()

    env = {**os.environ, "RESUME_FROM": shared[0], "MASTER_PORT": str(shared[1]),
           "EXPECTED_LOSSES": json.dumps(reference[STOP:])}
    # torchrun tells its ranks to use its agent's store; the new group makes its own on the new port.
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    child = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, timeout=300, check=False)
    if rank == 0 and child.returncode == 0:
        print(f"loss {reference[0]:.4f} -> {reference[-1]:.4f} over {TOTAL} steps, interrupted at {STOP}", flush=True)
    sys.stdout.flush()
    os._exit(child.returncode)


if __name__ == "__main__":
    main()
