"""
name: dcp-resume
min_torch: 2.8
title: Resume training from a DCP checkpoint in a new process (model, optimizer, LR scheduler, step, sampler, RNG), at the same or another world size
world_size: 2
requires:
tags: fsdp2, dcp, torch.distributed.checkpoint, resume, get_state_dict, set_state_dict, lr_scheduler, DistributedSampler, rng state, fault tolerance, reshard, world size
mutant: no-scheduler-state: `self.scheduler.load_state_dict(state["scheduler"])` -> `pass`
mutant: no-sampler-epoch: `self.step, self.epoch, self.consumed = progress["step"], progress["epoch"], progress["consumed"]` -> `self.step, self.consumed = progress["step"], progress["consumed"]`
mutant: no-rng-state: `self.set_rng_state(state["rng"][key])` -> `pass`
mutant: rng-key-of-every-rank: `del state["rng"][key]  # nothing saved for this rank` -> `pass` => RuntimeError
mutant: per-rank-batch-kept: `batch_size=GLOBAL_BATCH // dist.get_world_size()` -> `batch_size=GLOBAL_BATCH // 2`

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
  (`rng.rank<N>`): dropout masks continue where they were. Give the DataLoader its own
  `generator`: each new iterator draws a seed from the global RNG otherwise, and the
  resumed run starts its iterators at other steps.

Another world size. DCP reshards on load: a checkpoint written by 2 ranks loads into 4
(or 1). What changes:
- per-rank RNG keys: a rank the checkpoint has no `rng.rank<N>` for must leave that key
  out of what it asks `dcp.load` for, or the load raises CheckpointException (a missing
  key). Which keys exist: `dcp.FileSystemReader(path).read_metadata().state_dict_metadata`.
  Such a rank starts a fresh, deterministic stream (here seeded from rank and step): its
  dropout masks cannot match the old run's, because which rank draws the masks for which
  sample changed with the world size. Shared RNG (same on every rank) would carry over.
- keep the global batch: per-rank batch = global batch / world size. DistributedSampler
  gives rank r the samples r, r + W, r + 2W, ... of the same shuffled order, so every
  step's global batch is the same set of samples at any W that divides it.
- model, optimizer, scheduler, step and data position load unchanged.

The script trains 10 steps uninterrupted (the reference), then again 5 steps and saves;
each rank then starts a new Python process (new process group, freshly built model
with another seed) that loads the checkpoint and trains steps 5..9. Asserted: the resumed
losses equal the reference's, step for step, exactly. Then a 4-rank group (the 2 original
processes in a new process group with a fresh model, plus 2 new processes; on CUDA: as many
ranks as there are GPUs, or 1) loads the same checkpoint. Asserted there: the
loaded model and optimizer state equal, bit for bit, the state saved at step 5 (compared as
full state dicts), the scheduler's LR and the step are restored, and steps 5..9 train on
exactly the reference's global batches (the sample indices are compared).

torch 2.13 APIs used: `torch.distributed.checkpoint.save/load` (the `checkpoint_id` form),
`torch.distributed.checkpoint.state_dict.get_state_dict/set_state_dict`, `FileSystemReader.
read_metadata()`.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/dcp_resume.py
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# 32 samples, 8 per global step: 4 steps per epoch, so the checkpoint at step 5 is inside epoch 1.
DIM, SAMPLES, GLOBAL_BATCH, TOTAL, STOP = 16, 32, 8, 10, 5
RESHARD_RANKS = 4  # the other world size the checkpoint is loaded at (gloo on CPU)


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
        dataset = TensorDataset(x, x.sum(-1).sin(), torch.arange(SAMPLES))  # + each sample's index
        self.sampler = DistributedSampler(dataset, shuffle=True, seed=0, drop_last=True)
        # Its own generator: each new DataLoader iterator otherwise draws a seed from the global RNG,
        # and a resumed run creates its iterators at other steps than the uninterrupted one.
        # The per-rank batch keeps the global batch whatever the world size.
        self.loader = DataLoader(dataset, batch_size=GLOBAL_BATCH // dist.get_world_size(), sampler=self.sampler,
                                 generator=torch.Generator())
        self.step, self.epoch, self.consumed = 0, 0, 0
        self.global_batches: list[list[int]] = []  # the sample indices every step trained on, over all ranks
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
            x, y, index = next(batches)
            everyone = [torch.empty_like(index) for _ in range(dist.get_world_size())]
            dist.all_gather(everyone, index)
            self.global_batches.append(sorted(torch.cat(everyone).tolist()))
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
        # Keys in the checkpoint, flattened: "rng.rank0", "progress.step", ... A rank the saving run did not
        # have (a larger world size now) has no RNG state there; asking for it raises CheckpointException.
        saved_keys = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
        key = f"rank{self.rank}"
        if f"rng.{key}" not in saved_keys:
            del state["rng"][key]  # nothing saved for this rank
        dcp.load(state, checkpoint_id=path)
        set_state_dict(self.model, self.optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.scheduler.load_state_dict(state["scheduler"])
        progress = state["progress"]
        self.step, self.epoch, self.consumed = progress["step"], progress["epoch"], progress["consumed"]
        if key in state["rng"]:
            self.set_rng_state(state["rng"][key])
        else:
            torch.manual_seed(1000 + self.rank + 7919 * self.step)  # a new rank: a fresh, deterministic stream

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


def full_state(trainer: Trainer) -> tuple[dict, dict]:
    """Model and optimizer as full (unsharded) state dicts on rank 0's CPU; other ranks get empty ones."""
    return get_state_dict(trainer.model, trainer.optim,
                          options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def assert_same_tree(saved: object, loaded: object, where: str) -> None:
    if isinstance(saved, dict):
        assert isinstance(loaded, dict) and saved.keys() == loaded.keys(), (where, saved, loaded)
        for k in saved:
            assert_same_tree(saved[k], loaded[k], f"{where}.{k}")
    elif isinstance(saved, (list, tuple)):
        assert isinstance(loaded, (list, tuple)) and len(saved) == len(loaded), where
        for i, (a, b) in enumerate(zip(saved, loaded)):
            assert_same_tree(a, b, f"{where}.{i}")
    elif isinstance(saved, torch.Tensor):
        assert torch.equal(saved, loaded), f"{where} differs after loading at another world size"
    else:
        assert saved == loaded, (where, saved, loaded)


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


def resume_resharded(path: str, expected_batches: list[list[int]], exit_after: bool = True) -> None:
    """Runs in each process of a group of another size: load, compare the state, train on the same data."""
    device = init_distributed()
    trainer = Trainer(device, seed=12345)
    trainer.load(path)
    assert trainer.step == STOP and trainer.scheduler.get_last_lr() == [1e-2 * 0.5]
    model_sd, optim_sd = full_state(trainer)  # collectives: every rank calls it
    if dist.get_rank() == 0:
        saved_model, saved_optim = torch.load(path + "-full.pt", weights_only=True)
        assert_same_tree(saved_model, model_sd, "model")
        assert_same_tree(saved_optim, optim_sd, "optim")
    losses = trainer.train(TOTAL)
    assert trainer.global_batches == expected_batches, (trainer.global_batches, expected_batches)
    assert all(loss == loss and loss < 10 for loss in losses), losses  # finite: training goes on
    if dist.get_rank() == 0:
        print(f"loaded at {dist.get_world_size()} ranks: model and optimizer state equal the saved state, LR and "
              f"step restored, steps {STOP}..{TOTAL - 1} train on the reference's global batches", flush=True)
    if exit_after:
        leave()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    # torchrun tells its ranks to use its agent's store; the new group makes its own on the new port.
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    return env


def main() -> None:
    if "RESUME_FROM" in os.environ:
        return resume(os.environ["RESUME_FROM"], json.loads(os.environ["EXPECTED_LOSSES"]))
    if "RESHARD_FROM" in os.environ:
        return resume_resharded(os.environ["RESHARD_FROM"], json.loads(os.environ["EXPECTED_BATCHES"]))
    device = init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    uninterrupted = Trainer(device, seed=0)
    reference = uninterrupted.train(TOTAL)

    interrupted = Trainer(device, seed=0)
    first = interrupted.train(STOP)
    assert first == reference[:STOP]
    shared = [tempfile.mkdtemp(prefix="dcp-resume-") if rank == 0 else "", free_port(), free_port()]
    dist.broadcast_object_list(shared, src=0)
    path = os.path.join(shared[0], "step5")
    interrupted.save(path)
    full = full_state(interrupted)  # what a load at another world size must reproduce
    if rank == 0:
        torch.save(full, path + "-full.pt")
    dist.barrier()
    dist.destroy_process_group()

    script = os.path.abspath(__file__)
    env = child_env(RESUME_FROM=path, MASTER_PORT=str(shared[1]), EXPECTED_LOSSES=json.dumps(reference[STOP:]))
    code = subprocess.run([sys.executable, script], env=env, timeout=300, check=False).returncode
    if rank == 0 and code == 0:
        print(f"loss {reference[0]:.4f} -> {reference[-1]:.4f} over {TOTAL} steps, interrupted at {STOP}", flush=True)

    if code == 0:
        # The group of the other size: these processes are its first ranks (a new process group, a fresh
        # Trainer: nothing carries over but the checkpoint), and each starts new processes for the rest.
        gpus = torch.cuda.device_count() if device.type == "cuda" else 0
        ranks = RESHARD_RANKS if device.type == "cpu" else (gpus if gpus != world else 1)
        reshard = dict(RESHARD_FROM=path, MASTER_PORT=str(shared[2]), WORLD_SIZE=str(ranks),
                       LOCAL_WORLD_SIZE=str(ranks), EXPECTED_BATCHES=json.dumps(uninterrupted.global_batches[STOP:]))
        children = [
            subprocess.Popen([sys.executable, script], env=child_env(**reshard, RANK=str(r), LOCAL_RANK=str(r)))
            for r in range(rank + world, ranks, world)
        ]
        if rank < ranks:
            os.environ.update(reshard, RANK=str(rank), LOCAL_RANK=str(rank))
            os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
            try:
                resume_resharded(path, uninterrupted.global_batches[STOP:], exit_after=False)
            except Exception as exc:  # still wait for the children below, then fail
                print(f"rank {rank} in the {ranks}-rank group: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                code = 1
        for child in children:
            try:
                code = max(code, child.wait(timeout=300))
            except subprocess.TimeoutExpired:
                child.kill()
                code = 1
    if rank == 0:
        shutil.rmtree(shared[0], ignore_errors=True)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
