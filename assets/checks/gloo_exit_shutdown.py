"""
name: gloo-exit-shutdown
claim: os._exit(0) skips atexit handlers and loses what logging handlers and piped stdout still buffer; a shutdown that destroys the process group, calls logging.shutdown() and flushes stdout/stderr before os._exit(0) keeps them, and after FSDP2 and DDP training on gloo every rank exits 0.
backs: pitfalls
world_size: 2
mutant: sys-exit-runs-atexit: `"bare": "os._exit(0)"` -> `"bare": "sys.exit(0)"`
mutant: shutdown-without-flush: `"shutdown": "shutdown()"` -> `"shutdown": "os._exit(0)"`

Why leave with os._exit at all: on gloo, interpreter teardown after a clean FSDP2 or DDP run
sometimes aborts ("terminate called without an active exception") and turns a passing run's
exit status non-zero. It is intermittent (seen on torch 2.13.0 in some runs, not in others), so
it is not asserted here. What is asserted is the price of os._exit and the shutdown that pays it
(`_dist.shutdown`, the same steps as the patterns' `shutdown()`): rank 0 runs two one-rank gloo
jobs whose stdout is a pipe without PYTHONUNBUFFERED (block-buffered, as under most launchers), each printing a line, logging
a record through a `logging.handlers.MemoryHandler` (it holds records until flushed) and
registering an atexit handler:
- leaving with a bare `os._exit(0)`: the printed line and the log record are lost, the atexit
  handler never runs, the exit status is 0;
- leaving with `shutdown()` (destroy_process_group, logging.shutdown(), flush, os._exit(0)): the
  line and the record arrive; atexit handlers still do not run (do their work before).
Then both ranks train FSDP2 and DDP and leave through `shutdown()`; the runner requires exit
status 0 from every rank.
"""

import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import Stack, batches, init, say, shutdown
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

CHILD = """
import atexit, logging, logging.handlers, os, sys
sys.path.insert(0, {checks!r})
import torch.distributed as dist
from _dist import shutdown
dist.init_process_group("gloo", init_method="file://" + {store!r}, rank=0, world_size=1)
atexit.register(lambda: open({mark!r}, "w").write("atexit ran"))
log = logging.getLogger("train")
log.setLevel(logging.INFO)
log.addHandler(logging.handlers.MemoryHandler(capacity=100, target=logging.FileHandler({log!r})))
log.info("step 3 loss 0.25")
print("trained 3 steps")
{exit}
"""
CHILDREN = {"bare": "os._exit(0)", "shutdown": "shutdown()"}


def leave(how: str, scratch: str) -> dict[str, object]:
    """Run a one-rank gloo job that leaves with `how`; what survived its exit."""
    paths = {k: os.path.join(scratch, f"{how}.{k}") for k in ("store", "mark", "log", "py")}
    with open(paths["py"], "w", encoding="utf-8") as handle:
        handle.write(CHILD.format(checks=os.path.dirname(os.path.abspath(__file__)), store=paths["store"],
                                  mark=paths["mark"], log=paths["log"], exit=CHILDREN[how]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe: block-buffered stdout
    run = subprocess.run([sys.executable, paths["py"]], env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    logged = open(paths["log"], encoding="utf-8").read() if os.path.exists(paths["log"]) else ""
    return {"status": run.returncode, "printed": "trained 3 steps" in run.stdout, "logged": "step 3 loss" in logged,
            "atexit": os.path.exists(paths["mark"]), "stderr": run.stderr[-500:]}


init()
if dist.get_rank() == 0:
    with tempfile.TemporaryDirectory() as scratch:
        bare, clean = leave("bare", scratch), leave("shutdown", scratch)
    expected = {"status": 0, "printed": False, "logged": False, "atexit": False}
    assert {k: bare[k] for k in expected} == expected, f"a bare os._exit(0) kept more than expected: {bare}"
    expected = {"status": 0, "printed": True, "logged": True, "atexit": False}
    assert {k: clean[k] for k in expected} == expected, f"shutdown() lost output or ran atexit: {clean}"
    say("bare os._exit(0): exit 0, printed line and log record lost, atexit skipped; shutdown(): both kept, "
        "atexit still skipped")

data = batches(dist.get_rank())
sharded = Stack()
fully_shard(sharded)
replicated = DDP(Stack())
for model in (sharded, replicated):
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x, y = next(data)
        nn.functional.mse_loss(model(x), y).backward()
        optim.step()
        optim.zero_grad()
say("trained FSDP2 and DDP on gloo; leaving through shutdown(): every rank must exit 0")
shutdown()  # _dist.shutdown: destroy_process_group, logging.shutdown, flush, os._exit(0) on gloo
