"""The static reader of a release's API (apidoc.release_api): names, kinds, signatures and deprecations read
from source text with `ast`, and the committed facts of the pinned release against what introspecting the
installed torch (the pin) gives."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import types
import warnings
from typing import Any

import pytest

from fsdp_skill.apidoc.release_api import public_module, read_release
from fsdp_skill.upstream.releases import load_release_facts

PIN = "2.15.0"  # the torch the tests install (Makefile)

PKG = "torch/distributed/"

C10D = '''
import warnings
from typing import Optional
from typing_extensions import deprecated
try:
    from torch._C._distributed_c10d import ProcessGroupNCCL
except ImportError:
    _NCCL_AVAILABLE = False
from torch._C._distributed_c10d import Store

__all__ = ["all_gather_into_tensor", "all_gather_single", "new_group", "ProcessGroupNCCL", "Store"]
__all__ += ["Work"]

_MSG = "`new_group` is deprecated, use `new_subgroups` instead."

class Work:
    """A handle.

    Longer text.
    """
    def wait(self, timeout=None):
        """Wait for it."""

@deprecated("`torch.distributed.all_gather_into_tensor` is deprecated. Please use "
            "`torch.distributed.all_gather_single` instead.", category=FutureWarning)
def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Gather tensors."""

def all_gather_single(output_tensor, input_tensor, /, group=None, *, async_op=False, **kwargs):
    pass

def new_group(ranks=None, timeout=None):
    warnings.warn(_MSG, FutureWarning)

def helper_not_exported():
    pass
'''

INIT = '''
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .typing_only import Hidden
from .distributed_c10d import *
from .distributed_c10d import helper_not_exported as _private
from . import fsdp
'''

FSDP = '''
"""FSDP.

More.
"""
from dataclasses import dataclass, field
from ._impl import fully_shard, FSDPModule, Policy
__all__ = ["fully_shard", "FSDPModule", "Policy", "Child"]

@dataclass
class Child(Policy):
    extra: int = 1
    cache: dict = field(init=False, default_factory=dict)
'''

IMPL = '''
from dataclasses import dataclass
import warnings

def _deprecated(name, suggestion):
    warnings.warn(f"{name} is deprecated, use {suggestion} instead.", category=FutureWarning)

def fully_shard(module, *, mesh=None, reshard_after_forward=True):
    """Apply FSDP."""
    _deprecated("fully_shard", "torch.distributed.fsdp.fully_shard2")

class FSDPModule:
    def reshard(self):
        """Reshard."""
    @property
    def mesh(self):
        return None
    @staticmethod
    def build(a, b=2):
        pass
    def _private(self):
        pass
    def unshard(self, async_op=False):
        if async_op:
            warnings.warn("async_op is deprecated", FutureWarning)

@dataclass
class Policy:
    param_dtype: object = None
    reduce_dtype: object = None
'''


def synthetic() -> dict[str, Any]:
    return read_release({
        f"{PKG}__init__.py": INIT,
        f"{PKG}distributed_c10d.py": C10D,
        f"{PKG}fsdp/__init__.py": FSDP,
        f"{PKG}fsdp/_impl.py": IMPL,
        "torch/nn/other.py": "def not_read(): pass\n",
    })


def test_the_public_names_are_the_modules_all_or_its_public_bindings_and_star_imports() -> None:
    facts = synthetic()
    assert "torch.distributed.all_gather_single" in facts  # star import of distributed_c10d's __all__
    assert "torch.distributed.Work" in facts  # __all__ += [...]
    assert "torch.distributed.helper_not_exported" not in facts  # not in __all__
    assert "torch.distributed._private" not in facts and "torch.distributed.Hidden" not in facts
    assert "torch.distributed.Optional" not in facts  # typing imports are not re-exports
    assert facts["torch.distributed.fsdp"]["kind"] == "module"
    assert facts["torch.distributed.fsdp"]["doc"] == "FSDP."
    assert not any(name.startswith("torch.nn") for name in facts)
    assert facts["torch.distributed.Store"] == {"kind": "external", "origin": "torch._C._distributed_c10d:Store"}
    assert facts["torch.distributed.ProcessGroupNCCL"]["conditional"] is True


def test_signatures_keep_kinds_and_defaults_and_drop_self() -> None:
    facts = synthetic()
    assert facts["torch.distributed.all_gather_single"]["params"] == [
        ["output_tensor", "/", None], ["input_tensor", "/", None], ["group", "", "None"],
        ["async_op", "kw", "False"], ["kwargs", "**", None],
    ]
    assert facts["torch.distributed.Work.wait"]["params"] == [["timeout", "", "None"]]
    assert facts["torch.distributed.Work"]["doc"] == "A handle."
    assert facts["torch.distributed.fsdp.FSDPModule.build"]["kind"] == "staticmethod"
    assert facts["torch.distributed.fsdp.FSDPModule.build"]["params"][0] == ["a", "", None]
    assert facts["torch.distributed.fsdp.FSDPModule.mesh"]["kind"] == "property"
    assert "torch.distributed.fsdp.FSDPModule._private" not in facts


def test_dataclass_parameters_include_the_base_dataclass_fields_but_not_init_false_ones() -> None:
    params = synthetic()["torch.distributed.fsdp.Child"]["params"]
    assert [p[0] for p in params] == ["param_dtype", "reduce_dtype", "extra"]


def test_a_reexport_is_recorded_with_the_origin_where_the_object_is_defined() -> None:
    facts = synthetic()
    assert facts["torch.distributed.fsdp.fully_shard"]["origin"] == "torch.distributed.fsdp._impl:fully_shard"
    assert facts["torch.distributed.all_gather_single"]["origin"] == (
        facts["torch.distributed.distributed_c10d.all_gather_single"]["origin"])


def test_deprecations_come_from_decorators_warnings_and_warning_helpers_but_not_from_one_argument() -> None:
    facts = synthetic()
    assert facts["torch.distributed.all_gather_into_tensor"]["deprecated"] == [
        "`torch.distributed.all_gather_into_tensor` is deprecated. Please use `torch.distributed.all_gather_single` "
        "instead.", "torch.distributed.all_gather_single"]
    assert facts["torch.distributed.new_group"]["deprecated"][1] == "new_subgroups"  # message from a constant
    assert facts["torch.distributed.fsdp.fully_shard"]["deprecated"] == [
        "fully_shard is deprecated, use torch.distributed.fsdp.fully_shard2 instead.",
        "torch.distributed.fsdp.fully_shard2"]
    assert "deprecated" not in facts["torch.distributed.fsdp.FSDPModule.unshard"]  # only under `if async_op`
    assert "deprecated" not in facts["torch.distributed.all_gather_single"]


def test_private_modules_are_out_of_scope_except_the_ones_users_import() -> None:
    assert public_module("torch.distributed.fsdp")
    assert public_module("torch.distributed._composable.fsdp")
    assert public_module("torch.distributed._tensor")
    assert public_module("torch.utils.checkpoint")
    assert not public_module("torch.distributed.fsdp._fully_shard._fsdp_param")
    assert not public_module("torch.distributed._tensor.ops.math_ops")
    assert not public_module("torch.nn.parallel")


# --- the committed facts of the pin against the installed torch -----------------------------------------


def _imported(name: str) -> types.ModuleType | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - an optional dependency missing (etcd needs urllib3): not comparable
        return None


def _owner(name: str, modules: dict[str, types.ModuleType]) -> Any:
    parent = name.rpartition(".")[0]
    if parent in modules:
        return modules[parent]
    module, _, cls = parent.rpartition(".")
    found = getattr(modules[module], cls, None) if module in modules else None
    return found if isinstance(found, type) else None


def introspection_mismatches(facts: dict[str, Any]) -> tuple[list[str], int, int]:
    """(what the installed torch disagrees with, names compared, parameter lists compared)."""
    module_names = sorted(n for n, f in facts.items() if f["kind"] == "module" and f["origin"] == n)
    modules = {n: m for n in module_names if (m := _imported(n)) is not None}
    assert len(modules) >= len(module_names) - 3, "most of the modules read must import"
    problems: list[str] = []
    names = signatures = 0
    for name, fact in sorted(facts.items()):
        owner = _owner(name, modules)
        if fact["kind"] == "module" and name not in module_names:  # a sys.modules redirect (`_tensor.device_mesh`)
            names += 1
            if _imported(name) is None:
                problems.append(f"{name}: does not import")
            continue
        if owner is None or name in module_names:  # a module: compared by importing it, above
            continue
        names += 1
        short, kind = name.rpartition(".")[2], fact["kind"]
        try:
            obj = inspect.getattr_static(owner, short) if isinstance(owner, type) else getattr(owner, short)
        except AttributeError:
            if not fact.get("conditional"):  # ProcessGroupNCCL: only in builds with NCCL
                problems.append(f"{name}: missing")
            continue
        if isinstance(owner, type):
            wanted = {"staticmethod": staticmethod, "classmethod": classmethod}.get(kind)
            if wanted is not None and not isinstance(obj, wanted):
                problems.append(f"{name}: not a {kind}")
            if kind == "property" and not hasattr(obj, "__get__"):
                problems.append(f"{name}: not a property")
            obj = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
        elif kind == "class" and not isinstance(obj, type):
            problems.append(f"{name}: a {type(obj).__name__}, not a class")
        elif kind == "function" and (isinstance(obj, type) or not callable(obj)):
            problems.append(f"{name}: a {type(obj).__name__}, not a function")
        elif kind == "module" and not isinstance(obj, types.ModuleType):
            problems.append(f"{name}: a {type(obj).__name__}, not a module")
        if "params" not in fact:
            continue
        try:
            got = list(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            continue
        if kind in ("method", "classmethod") and got[:1] in (["self"], ["cls"]):
            got = got[1:]
        signatures += 1
        if got != [p[0] for p in fact["params"]]:
            problems.append(f"{name}: parameters {[p[0] for p in fact['params']]} read, {got} introspected")
    for name, module in modules.items():
        declared = getattr(module, "__all__", None)
        read = {n.rpartition(".")[2] for n in facts if n.rpartition(".")[0] == name}
        if isinstance(declared, (list, tuple)):
            unread = [n for n in declared if n not in read and hasattr(module, n)
                      and not isinstance(getattr(module, n, None), types.ModuleType)]
            if unread:
                problems.append(f"{name}.__all__ lists {sorted(unread)}, not read statically")
    return problems, names, signatures


@pytest.mark.torch
def test_the_pinned_facts_read_statically_agree_with_introspecting_the_installed_torch() -> None:
    version = importlib.metadata.version("torch")
    if version.split("+")[0] != PIN:
        pytest.skip(f"the installed torch is {version}; the comparison needs the pinned {PIN}")
    facts = load_release_facts(None)[PIN]
    problems, names, signatures = introspection_mismatches(facts)
    assert problems == []
    assert names > 1000 and signatures > 600  # the comparison covered the API, not a corner of it


@pytest.mark.torch
def test_the_introspection_comparison_catches_a_wrong_fact() -> None:
    facts = dict(load_release_facts(None)[PIN])
    gather = dict(facts["torch.distributed.all_gather_single"])
    gather["params"] = gather["params"][:-1]
    facts["torch.distributed.all_gather_single"] = gather
    facts["torch.distributed.fsdp.fully_shard"] = {**facts["torch.distributed.fsdp.fully_shard"], "kind": "class"}
    facts["torch.distributed.no_such_function"] = {"kind": "function", "origin": "x:y"}
    problems, _, _ = introspection_mismatches(facts)
    assert len(problems) == 3, problems


# --- a name exists where it resolves (issue 29 item 1) ---------------------------------------------------------

RESOLVING = {
    f"{PKG}__init__.py": "from .c10d import ProcessGroup, Work\nfrom .device_mesh import init_device_mesh\n",
    f"{PKG}c10d.py": "from torch._C._distributed_c10d import ProcessGroup, Work\n__all__ = ['ProcessGroup', 'Work']\n",
    "torch/_C/_distributed_c10d.pyi": (
        "from typing import overload\nclass Work:\n    def wait(self, timeout=...) -> bool: ...\n"
        "class ProcessGroup:\n    @overload\n    def size(self) -> int: ...\n    @overload\n"
        "    def size(self, x: int) -> int: ...\n    def _hidden(self): ...\n"),
    f"{PKG}device_mesh.py": "def init_device_mesh(device_type):\n    pass\n",
    f"{PKG}tensor/__init__.py": "from .device_mesh import init_device_mesh\n",
    f"{PKG}tensor/device_mesh.py": "from torch.distributed.device_mesh import init_device_mesh\n",
    f"{PKG}_tensor/__init__.py": (
        "import sys\nfrom importlib import import_module\nsubmodules = ['device_mesh']\n"
        "for submodule in submodules:\n    full = f'torch.distributed.tensor.{submodule}'\n"
        "    sys.modules[f'torch.distributed._tensor.{submodule}'] = import_module(full)\n"),
    f"{PKG}pipelining/__init__.py": "from .schedules import ScheduleZBV\n__all__ = ['ScheduleZBV']\n",
    f"{PKG}pipelining/schedules.py": (
        "class PipelineScheduleMulti:\n    def step(self, *args, target=None):\n        pass\n"
        "class ScheduleZBV(PipelineScheduleMulti):\n    def own(self):\n        pass\n"),
    f"{PKG}autograd/__init__.py": "from torch._C._distributed_autograd import backward, get_gradients\n"
                                  "__all__ = ['get_gradients']\n",
    f"{PKG}optim/__init__.py": (
        "import warnings\nfrom .zero import ZeroRedundancyOptimizer\n__all__ = ['ZeroRedundancyOptimizer']\n"
        "warnings.warn('`TorchScript` support for functional optimizers is deprecated and will be removed.', "
        "DeprecationWarning)\n"),
    f"{PKG}optim/zero.py": "class ZeroRedundancyOptimizer:\n    def step(self):\n        pass\n",
    f"{PKG}stage.py": (
        "from dataclasses import dataclass, field\n__all__ = ['Info', 'Policy']\n"
        "@dataclass(frozen=True, kw_only=True)\nclass Info:\n    stage_index: int\n"
        "@dataclass\nclass Policy:\n    dtype: object = None\n    fn: object = field(default=None, kw_only=True)\n"
        "    cast: bool = True\n"),
}


def test_inherited_members_cxx_stub_members_redirects_and_names_left_out_of_all_resolve() -> None:
    facts = read_release(RESOLVING)
    step = facts["torch.distributed.pipelining.ScheduleZBV.step"]
    assert step["origin"] == "torch.distributed.pipelining.schedules:PipelineScheduleMulti.step"
    assert [p[0] for p in step["params"]] == ["args", "target"]
    assert facts["torch.distributed.ProcessGroup.size"] == {
        "kind": "method", "doc": "", "origin": "torch._C._distributed_c10d:ProcessGroup.size"}
    assert "torch.distributed.Work.wait" in facts and "torch.distributed.ProcessGroup._hidden" not in facts
    assert facts["torch.distributed._tensor.device_mesh"]["origin"] == "torch.distributed.tensor.device_mesh"
    assert facts["torch.distributed._tensor.device_mesh.init_device_mesh"]["origin"] == \
        "torch.distributed.device_mesh:init_device_mesh"
    assert facts["torch.distributed.autograd.backward"]["hidden"] is True  # bound, not in __all__
    assert "hidden" not in facts["torch.distributed.autograd.get_gradients"]


def test_an_import_warning_about_something_else_deprecates_the_module_only() -> None:
    facts = read_release(RESOLVING)
    assert "TorchScript" in facts["torch.distributed.optim"]["deprecated"][0]
    assert "deprecated" not in facts["torch.distributed.optim.ZeroRedundancyOptimizer"]


def test_keyword_only_dataclass_fields_are_keyword_only_and_last() -> None:
    facts = read_release(RESOLVING)
    assert facts["torch.distributed.stage.Info"]["params"] == [["stage_index", "kw", None]]
    assert facts["torch.distributed.stage.Policy"]["params"] == [
        ["dtype", "", "None"], ["cast", "", "True"], ["fn", "kw", "field(default=None, kw_only=True)"]]
