"""What a parsed doctest example needs to run: world size, device and extra requirements.

Pure stdlib, like doctests.py (the verify runner may reuse it from a plain clone).

World size rule: an example needs the smallest world in which every statement of it can run, so its
world size is the largest lower bound any piece of evidence gives:

- an output tagged `# Rank N` needs N + 1 ranks;
- a stated size: "world_size=4", "world_size of 3", "world size is 2", "2 ranks", "--nproc-per-node 8",
  "8 CUDA devices", "4 GPUs";
- a literal device mesh: `init_device_mesh("cuda", (2, 4))` / `mesh_shape=(2, 4)` needs the product
  of the shape (8); `DeviceMesh("cuda", [[0, 1, 2, 3], [4, 5, 6, 7]])` or `torch.arange(8)` needs its
  largest rank + 1 (8);
- literal ranks: `new_group(ranks=[0, 3])`, `new_subgroups_by_enumeration([[0, 2], [1, 3]])`,
  `src=`/`dst=` of a point-to-point or rooted collective, each need their largest rank + 1.

One example may build meshes of different sizes (init_device_mesh's own example builds an 8-rank 1-D
mesh and a 16-rank 2-D one). The largest still wins and is enough: torch only requires a mesh to be
no bigger than the world (`DeviceMesh` raises "Mesh should not be bigger than default world size"),
so the 8-rank mesh is built from ranks 0-7 of the 16-rank world. Sizes above MAX_WORLD_SIZE are taken
as noise (a tensor shape, a year) rather than as ranks.
"""

from __future__ import annotations

import ast
import io
import math
import re
import sys
import tokenize
import warnings
from collections.abc import Iterable

MAX_WORLD_SIZE = 64

_STATED_SIZE = [
    re.compile(r"\b(\d+)\s+ranks\b", re.IGNORECASE),
    # "world_size=4", "world_size: 4", "world_size == 2", "world_size of 3", "world size is 2", "world size 8"
    re.compile(r"\bworld[_ ]size\s*(?:==|=|:|\bof\b|\bis\b)?\s*(\d+)\b", re.IGNORECASE),
    re.compile(r"\bnproc[-_]per[-_]node[= ](\d+)\b"),
    # "Assume 8 CUDA devices per machine", "on 4 GPUs": one rank per device is how the docs run them
    # (new_subgroups' example sums ranks 0-7). Not "N processes": a subgroup's size is said that way.
    re.compile(r"\b(\d+)\s+(?:cuda\s+devices|gpus)\b", re.IGNORECASE),
]
_RANK_KEYWORDS = {"src", "dst", "group_src", "group_dst", "ranks", "ranks_per_subgroup_list"}
# Calls whose first positional argument is a rank list.
_RANKS_FIRST = {"new_group", "new_subgroups_by_enumeration"}
_CUDA = re.compile(r"\bcuda\b|\.cuda\(|\bnccl\b", re.IGNORECASE)
_REQUIRES = re.compile(r"#\s*xdoctest:?\s*\+REQUIRES\((?P<what>[^)]*)\)", re.IGNORECASE)
_KNOWN_REQUIREMENTS = {"numpy": "numpy", "np": "numpy", "torchvision": "torchvision", "transformers": "transformers"}
# xdoctest's platform requirements (`+REQUIRES(LINUX)`): an operating system, not a package to install.
_PLATFORMS = {"linux": "platform:linux", "win32": "platform:win32", "darwin": "platform:darwin"}


def parse_pieces(sources: Iterable[str]) -> list[ast.Module]:
    """ASTs of the code: all of it if it parses, else each piece that does (upstream has typos)."""
    pieces = list(sources)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes etc. in upstream code are not our concern
        try:
            return [ast.parse("\n".join(pieces))]
        except SyntaxError:
            trees = []
            for piece in pieces:
                try:
                    trees.append(ast.parse(piece))
                except SyntaxError:
                    continue
            return trees


def _ints(node: ast.AST) -> list[int]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is int]


def _literal_shape(node: ast.AST | None) -> int | None:
    """Product of a tuple/list of int literals, e.g. (2, 4) -> 8."""
    if isinstance(node, (ast.Tuple, ast.List)) and node.elts and all(
        isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts
    ):
        return math.prod(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _mesh_ranks(node: ast.AST | None) -> int | None:
    """Ranks a literal mesh spans: nested lists of rank ids, or torch.arange(N)[.view(...)]."""
    if node is None:
        return None
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and _call_name(inner) == "arange" and inner.args:
            return _literal_int(inner.args[min(1, len(inner.args) - 1)])  # arange(stop) / arange(start, stop)
    if isinstance(node, (ast.List, ast.Tuple)):
        ranks = _ints(node)
        return max(ranks) + 1 if ranks else None
    return None


def _literal_int(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def code_world_sizes(trees: Iterable[ast.AST]) -> list[int]:
    """Ranks needed by each literal mesh, rank list or src/dst rank in the code."""
    found: list[int] = []
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            if name == "init_device_mesh":
                shape = _literal_shape(keywords.get("mesh_shape", node.args[1] if len(node.args) > 1 else None))
                if shape:
                    found.append(shape)
            elif "mesh_shape" in keywords and (shape := _literal_shape(keywords["mesh_shape"])):
                found.append(shape)
            if name == "DeviceMesh":
                ranks = _mesh_ranks(keywords.get("mesh", node.args[1] if len(node.args) > 1 else None))
                if ranks:
                    found.append(ranks)
            for key in sorted(_RANK_KEYWORDS & keywords.keys()):
                literal_ranks = _ints(keywords[key])
                # Only literal ranks: `dst=rank + 1` or `ranks=list(range(n))` say nothing about the size.
                if literal_ranks and not any(isinstance(n, ast.Name) for n in ast.walk(keywords[key])):
                    found.append(max(literal_ranks) + 1)
            if name in _RANKS_FIRST and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                listed = _ints(node.args[0])
                if listed:
                    found.append(max(listed) + 1)
    return found


def text_world_sizes(text: str) -> list[int]:
    """Sizes the example states in words or keyword arguments (comments included)."""
    return [int(m.group(1)) for pattern in _STATED_SIZE for m in pattern.finditer(text)]


def world_size(tagged_ranks: Iterable[int], text: str, trees: Iterable[ast.AST]) -> int:
    """The example's world size (see the module docstring for the rule)."""
    sizes = [1, *(rank + 1 for rank in tagged_ranks), *text_world_sizes(text)]
    sizes += code_world_sizes(trees)
    return max(size for size in sizes if 0 < size <= MAX_WORLD_SIZE)


def without_comments(code: str) -> str:
    """code minus its comments (a comment saying "assumes backend is not NCCL" is not a CUDA need)."""
    try:
        tokens = [tok for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type != tokenize.COMMENT]
        return tokenize.untokenize(tokens)
    except (tokenize.TokenError, SyntaxError):
        return "\n".join(re.sub(r"#[^'\"\n]*$", "", line) for line in code.split("\n"))


def device(code: str) -> str:
    return "cuda" if _CUDA.search(without_comments(code)) else "cpu"


def requirements(code: str, text: str, device_name: str, size: int) -> list[str]:
    needs: set[str] = set()
    if device_name == "cuda":
        needs.add("cuda")
        if size > 1 or re.search(r"cuda:[1-9]", code):
            needs.add("multi-gpu")
    for match in re.finditer(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", code, re.M):
        root = match.group(1)
        if root not in sys.stdlib_module_names and root != "torch":
            needs.add(_KNOWN_REQUIREMENTS.get(root, root))
    if re.search(r"\bnp\.", code):
        needs.add("numpy")
    if re.search(r"\brpc\.|torch\.distributed\.rpc|\bRRef\b", code):
        needs.add("rpc")
    for match in _REQUIRES.finditer(text):
        what = match.group("what").strip()
        if what.startswith("module:"):
            needs.add(_KNOWN_REQUIREMENTS.get(what[7:], what[7:]))
        elif "cuda" in what.lower() or "gpu" in what.lower():
            needs.add("cuda")
        elif what.lower() in _PLATFORMS:
            needs.add(_PLATFORMS[what.lower()])
        else:
            needs.add(what)
    return sorted(needs)
