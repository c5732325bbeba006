"""deprecations_in_source: what a module's source deprecates, read with ast (no import, any torch release)."""

from __future__ import annotations

import textwrap

import pytest

from fsdp_skill.apidoc.deprecation import (
    argument_deprecations_in_source,
    deprecations_in_source,
    replacement_in,
    subjects,
)


def _scan(source: str, module: str = "pkg.mod", **kwargs: bool) -> dict[str, tuple[str | None, str]]:
    found = deprecations_in_source(textwrap.dedent(source), module, **kwargs)
    return {name: (dep.replacement, dep.message) for name, dep in found.items()}


def test_a_deprecated_decorator_marks_the_function_and_never_the_replacement_it_names() -> None:
    found = _scan('''
        from typing_extensions import deprecated

        class FSDPModule:
            def set_gradient_divide_factor(self, factor): ...

            @deprecated("Use `set_gradient_divide_factor` instead", category=FutureWarning)
            def set_reduce_scatter_divide_factor(self, factor): ...
    ''')
    assert found == {
        "pkg.mod.FSDPModule.set_reduce_scatter_divide_factor": (
            "set_gradient_divide_factor", "Use `set_gradient_divide_factor` instead"),
    }


def test_a_sibling_the_message_says_is_deprecated_is_marked_with_where_it_is_stated() -> None:
    found = _scan('''
        import warnings

        class FSDP:
            def state_dict_type(self): ...
            def get_state_dict(self): ...

            def set_state_dict_type(self):
                warnings.warn(
                    "FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated. "
                    "Please use APIs, get_state_dict() and set_state_dict().",
                    FutureWarning,
                )
    ''')
    assert set(found) == {"pkg.mod.FSDP.set_state_dict_type", "pkg.mod.FSDP.state_dict_type"}
    assert found["pkg.mod.FSDP.set_state_dict_type"][0] == "get_state_dict"
    assert found["pkg.mod.FSDP.state_dict_type"][1].startswith(
        "Stated in the deprecation warning of FSDP.set_state_dict_type: FSDP.state_dict_type()")


def test_a_warning_anywhere_in_the_body_counts_when_it_names_the_function() -> None:
    found = _scan('''
        import warnings
        import torch

        def all_gather_tensor(x):
            if not torch.compiler.is_compiling():
                warnings.warn(
                    "`pkg.mod.all_gather_tensor` is deprecated. Please use `pkg.mod.all_gather_single` instead.",
                    FutureWarning,
                    stacklevel=2,
                )
            return all_gather_single(x)

        def all_gather_single(x):
            return x
    ''')
    assert found == {"pkg.mod.all_gather_tensor": (
        "pkg.mod.all_gather_single",
        "`pkg.mod.all_gather_tensor` is deprecated. Please use `pkg.mod.all_gather_single` instead.")}


def test_a_conditional_warning_about_an_argument_deprecates_nothing() -> None:
    assert _scan('''
        import warnings

        def rekey(optim_input=None):
            if optim_input is not None:
                warnings.warn("The `optim_input` argument is deprecated", FutureWarning)
            for _ in range(3):
                warnings.warn("ranks + tag as group identifier has been deprecated", FutureWarning)
    ''') == {}


def test_a_deprecated_argument_is_not_the_sibling_property_of_the_same_name() -> None:
    assert _scan('''
        import warnings

        class DistributedDataParallel:
            def __init__(self, module, broadcast_buffers=None):
                if broadcast_buffers is not None:
                    warnings.warn("`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead.",
                                  FutureWarning)

            @property
            def broadcast_buffers(self): ...
    ''') == {}


def test_only_future_and_deprecation_warnings_that_say_deprecated_count() -> None:
    assert _scan('''
        import warnings
        from typing_extensions import deprecated

        def a():
            warnings.warn("This API will be deprecated soon.")

        def b():
            warnings.warn("the default will change", FutureWarning)

        @deprecated("quiet", category=None)
        def c(): ...
    ''') == {}


def test_a_helpers_fstring_is_filled_in_from_each_callers_arguments_and_the_helper_is_not_marked() -> None:
    found = _scan('''
        import warnings

        def _deprecated(name, suggestion):
            warnings.warn(
                f"torch.distributed.nn.functional.{name} is deprecated, "
                f"use {suggestion} instead.",
                category=FutureWarning,
                stacklevel=3,
            )

        def all_reduce(tensor):
            if is_compiling():
                raise RuntimeError("no")
            _deprecated("all_reduce", "torch.distributed._functional_collectives.all_reduce")
            return tensor

        def gather(tensor):
            return tensor
    ''', module="torch.distributed.nn.functional")
    assert found == {"torch.distributed.nn.functional.all_reduce": (
        "torch.distributed._functional_collectives.all_reduce",
        "torch.distributed.nn.functional.all_reduce is deprecated, "
        "use torch.distributed._functional_collectives.all_reduce instead.")}


def test_a_static_warning_helper_called_through_the_class_marks_each_caller() -> None:
    found = _scan('''
        import warnings

        class FullyShardedDataParallel:
            @staticmethod
            def _warn_legacy_optim_state_dict(curr: str, new: str, *, stacklevel: int = 1):
                warnings.warn(
                    f"``FullyShardedDataParallel.{curr}``is being deprecated and is "
                    f"replaced by ``FullyShardedDataParallel.{new}``. ",
                    FutureWarning,
                    stacklevel=stacklevel + 1,
                )

            @staticmethod
            def full_optim_state_dict(model, optim):
                FullyShardedDataParallel._warn_legacy_optim_state_dict(
                    "full_optim_state_dict", "optim_state_dict", stacklevel=2)

            def shard_full_optim_state_dict(self):
                self._warn_legacy_optim_state_dict("shard_full_optim_state_dict", new="optim_state_dict_to_load")
    ''')
    assert found == {
        "pkg.mod.FullyShardedDataParallel.full_optim_state_dict": (
            "FullyShardedDataParallel.optim_state_dict",
            "`FullyShardedDataParallel.full_optim_state_dict`is being deprecated and is replaced by "
            "`FullyShardedDataParallel.optim_state_dict`."),
        "pkg.mod.FullyShardedDataParallel.shard_full_optim_state_dict": (
            "FullyShardedDataParallel.optim_state_dict_to_load",
            "`FullyShardedDataParallel.shard_full_optim_state_dict`is being deprecated and is replaced by "
            "`FullyShardedDataParallel.optim_state_dict_to_load`."),
    }


def test_an_enum_member_the_warnings_condition_tests_is_marked_under_its_import_path() -> None:
    found = _scan('''
        import warnings
        from ..api import ShardingStrategy

        def _init_core_state(state, sharding_strategy):
            if state.world_size == 1:
                sharding_strategy = ShardingStrategy.NO_SHARD
            elif sharding_strategy == ShardingStrategy.NO_SHARD:
                warnings.warn(
                    "The `NO_SHARD` sharding strategy is deprecated. If having issues, "
                    "please use `DistributedDataParallel` instead.",
                    FutureWarning,
                )
    ''', module="torch.distributed.fsdp.sub._init_utils")
    assert list(found) == ["torch.distributed.fsdp.api.ShardingStrategy.NO_SHARD"]
    replacement, message = found["torch.distributed.fsdp.api.ShardingStrategy.NO_SHARD"]
    assert replacement == "DistributedDataParallel"
    assert message.startswith(
        "Stated in the deprecation warning of torch.distributed.fsdp.sub._init_utils._init_core_state: The `NO_SHARD`")


def test_a_warning_at_import_deprecates_the_module_and_its_public_names() -> None:
    found = _scan('''
        import warnings
        from torch.distributed.checkpoint import load

        warnings.warn(
            "`pkg.old` will be deprecated, use `torch.distributed.checkpoint` instead", DeprecationWarning)

        def save(): ...
        def _private(): ...
        class Reader: ...
    ''', module="pkg.old", is_package=True)
    assert set(found) == {"pkg.old", "pkg.old.save", "pkg.old.Reader"}
    assert {replacement for replacement, _ in found.values()} == {"torch.distributed.checkpoint"}


def test_a_module_level_name_the_message_names_is_marked() -> None:
    found = _scan('''
        from typing_extensions import deprecated

        class _reduce_op:
            @deprecated("`torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead",
                        category=FutureWarning)
            def __getattribute__(self, key): ...

        reduce_op = _reduce_op()
        ReduceOp = object
    ''', module="torch.distributed.distributed_c10d")
    assert found["torch.distributed.distributed_c10d.reduce_op"][0] == "torch.distributed.ReduceOp"
    assert "torch.distributed.distributed_c10d.ReduceOp" not in found


def test_a_warning_in_init_and_a_message_in_a_module_constant_deprecate_the_class() -> None:
    found = _scan('''
        import warnings
        from typing_extensions import deprecated as _deprecated
        MSG = "`Old` is deprecated, use `New` instead"

        class Old:
            def __init__(self):
                warnings.warn(MSG, FutureWarning)

        @_deprecated(MSG, category=FutureWarning)
        class Older: ...
    ''')
    assert found == {"pkg.mod.Old": ("New", "`Old` is deprecated, use `New` instead"),
                     "pkg.mod.Older": ("New", "`Old` is deprecated, use `New` instead")}


def test_a_source_that_does_not_parse_raises_syntax_error() -> None:
    with pytest.raises(SyntaxError):
        deprecations_in_source("def f(:\n  'deprecated'", "pkg.mod")


def test_message_subjects_exclude_the_replacement_clause() -> None:
    assert subjects("`a.b` is deprecated, use `a.c` instead") == ["a.b"]
    assert subjects("Use `set_gradient_divide_factor` instead") == []
    assert subjects("Please use `new_op` instead; `old_op` is deprecated.") == ["old_op"]
    assert replacement_in("FSDP.x() is deprecated. Please use APIs, get_state_dict() and ...") == "get_state_dict"
    assert replacement_in("The module torch.distributed.launch is deprecated\nand will be removed. Use torchrun.\n"
                          "Note that --use-env is set by default in torchrun.") == "torchrun"
    assert replacement_in("`x` is deprecated; stop using it. Use it.") is None
    assert replacement_in("will be deprecated. If you must use it, please revisit our documentation later") is None


def test_an_argument_the_function_warns_about_is_listed_with_the_warning_that_names_its_replacement() -> None:
    found = argument_deprecations_in_source(textwrap.dedent('''
        import warnings

        class DistributedDataParallel:
            def __init__(self, module, broadcast_buffers=None, forward_sync_buffers=None):
                if not isinstance(module, object):
                    raise ValueError(f"bad {module}")  # an f-string with a parameter: not a warning helper
                if broadcast_buffers is not None:
                    if forward_sync_buffers is not None:
                        warnings.warn("Both given. `broadcast_buffers` is deprecated and ignored.", FutureWarning)
                    else:
                        warnings.warn("`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead.",
                                      FutureWarning)

            @staticmethod
            def _warn_optim_input(optim_input):
                if optim_input is not None:
                    warnings.warn("The `optim_input` argument is deprecated", FutureWarning)

            @staticmethod
            def rekey(osd, optim_input=None):
                DistributedDataParallel._warn_optim_input(optim_input)
    '''), "pkg.ddp")
    assert {path: {arg: dep.replacement for arg, dep in args.items()} for path, args in found.items()} == {
        "pkg.ddp.DistributedDataParallel": {"broadcast_buffers": "forward_sync_buffers"},
        "pkg.ddp.DistributedDataParallel.rekey": {"optim_input": None},
    }
    assert deprecations_in_source(textwrap.dedent('''
        import warnings

        def save(state, path):
            if path is None:
                raise ValueError(f"no path for {state}")
            warnings.warn("`save` is deprecated, use `store` instead", FutureWarning)
    '''), "pkg.m")["pkg.m.save"].replacement == "store"  # f-strings outside warnings do not make a helper
