"""Query text → FTS5 terms: identifier splitting, aliases, stop words, safe quoting.

Shared by the index build (which stores identifier parts in their own columns) and by search (which
expands the user's words the same way), so both sides always agree on what a "part" is.

Why a bag of quoted terms: users ask in prose ("why does my allreduce hang with NCCL?"), so an AND of
their words would usually match nothing. We OR the content words and let bm25 reward documents that
contain more of them. Every term is a lowercase run of [a-z0-9_] wrapped in double quotes, so no FTS5
syntax typed by the user (quotes, `*`, `NOT`, `NEAR`, `(`, `:`) can reach the MATCH expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fsdp_skill.core.errors import UserError

MAX_QUERY_CHARS = 1000

# Words and dotted paths as users write them: `dist.all_reduce`, `MixedPrecisionPolicy`, `fsdp2`.
_WORD = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")
# One camelCase hump, an acronym run (before a hump or at the end), or digits.
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

# Question words and filler that carry no topic; identifier parts are never dropped (the `all` of
# `all_reduce` matters), only standalone prose words.
STOP_WORDS = frozenset(
    """
    a an and are as at be been being but by can could did do does doing done for from get gets getting
    had has have having he her here how i if in into is it its just me might must my need needs no not
    of on or our out over please really she should so some such than that the their them then there
    these they this those through to too up us use used uses using very via was we were what whats when
    where whether which while who whom why will with without would you your yours near
    want wants trying try tried work works working correct correctly right way ways instead also
    someone something anything thing things like able make makes made let lets tell show shows
    many much
    don doesn didn isn aren wasn weren won wouldn shouldn couldn hasn haven hadn t s ll ve re
    """.split()
)

# Abbreviations users type for things the docs spell out. Keys are lowercase words; values are extra
# words/identifiers added to the query (the original word is kept too).
TERM_ALIASES: dict[str, tuple[str, ...]] = {
    "fsdp": ("FullyShardedDataParallel", "fully_shard"),
    "fsdp1": ("FullyShardedDataParallel",),
    "fsdp2": ("fully_shard", "FSDPModule"),
    "dcp": ("torch.distributed.checkpoint",),
    "hsdp": ("hybrid", "HYBRID_SHARD", "replicate"),
    "ddp": ("DistributedDataParallel",),
    "tp": ("tensor", "parallel", "parallelize_module"),
    "sp": ("sequence", "parallel", "SequenceParallel"),
    "pg": ("process", "group"),
    "zero": ("ZeroRedundancyOptimizer",),
    "zero1": ("ZeroRedundancyOptimizer",),
    "zero2": ("SHARD_GRAD_OP",),
    "zero3": ("FULL_SHARD", "fully_shard"),
    "allreduce": ("all_reduce",),
    "allgather": ("all_gather",),
    "reducescatter": ("reduce_scatter",),
    "alltoall": ("all_to_all",),
    "oom": ("memory",),
    "ckpt": ("checkpoint",),
    "mp": ("mixed", "precision"),
    "bf16": ("bfloat16",),
    "fp16": ("float16",),
    "rdzv": ("rendezvous",),
}

# How people say it → how the docs say it. Each entry holds across distributed-training docs in
# general (it is a thesaurus, not a list of answers). Values are added to the query as whole words.
USER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "collect": ("gather",),
    "whole": ("full",),
    "entire": ("full",),
    "unsharded": ("full", "unshard"),
    "sum": ("reduce",),
    "average": ("avg", "reduce"),
    "background": ("async", "asynchronous"),
    "asynchronously": ("async",),
    "nonblocking": ("async", "isend", "irecv"),
    "stuck": ("hang",),
    "hanging": ("hang",),
    "freeze": ("hang",),
    "picklable": ("object", "pickle"),
    "checkpointable": ("stateful", "checkpoint"),
    "pdb": ("breakpoint",),
    "debugger": ("breakpoint",),
    "machine": ("node",),
    "machines": ("nodes",),
    "weights": ("parameters",),
    "params": ("parameters",),
    "param": ("parameter",),
    "grads": ("gradients",),
    "grad": ("gradient",),
    "init": ("initialize", "initialization"),
    "initialise": ("initialize",),
    "teardown": ("destroy_process_group", "shutdown"),
    "cleanup": ("destroy_process_group", "shutdown"),
    "communicator": ("process", "group"),
    "subset": ("group", "subgroups"),
    "subgroup": ("group",),
    "convert": ("translate",),
    "uneven": ("join",),
    "microbatch": ("accumulation",),
    "microbatches": ("accumulation",),
    "half": ("float16",),
    "parameters": ("params",),
    "parameter": ("param",),
    "port": ("migration",),
    "porting": ("migration",),
    "migrate": ("migration",),
    "migrating": ("migration",),
}

# Phrases rewritten before splitting into words: (pattern, words to add).
PHRASE_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:how many|number of) (?:processes|ranks|workers|gpus)\b", re.I), "get_world_size"),
    (re.compile(r"\bnon[- ]blocking\b", re.I), "nonblocking"),
    (re.compile(r"\btim(?:e|es|ed|ing)[- ]?out\b", re.I), "timeout"),
    (
        re.compile(r"\bdifferent (?:numbers?|amounts?) of (?:batches|inputs|samples|steps|data)\b", re.I),
        "uneven inputs",
    ),
    (re.compile(r"\b(?:wait (?:until|for) (?:all|every)|same point)\b", re.I), "barrier synchronize"),
    (re.compile(r"\bmicro[- ]batch(es)?\b", re.I), "microbatch"),
    # The *_object collectives take "picklable" objects; users say Python/arbitrary objects.
    (re.compile(r"\b(?:python|arbitrary) objects?\b", re.I), "picklable"),
)

# Abbreviations whose expansion only helps when the abbreviation is (nearly) the whole query; in a
# longer question the scope lift does that job without flooding the query with common words.
TOPIC_ABBREVIATIONS = frozenset({"fsdp", "fsdp1", "fsdp2", "ddp", "dcp", "hsdp", "tp", "sp"})

# Spelled-out topics that scope like their abbreviation.
PHRASE_SCOPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\btensor[- ]parallel(?:ism)?\b", re.I), "tp"),
    (re.compile(r"\bdistributed checkpoint(?:ing)?\b", re.I), "dcp"),
)

# `all-gather`, `reduce-scatter`, `meta-device`: the hyphenated spelling of an identifier.
_HYPHENATED = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+\b")

# Abbreviations that name one API entry; a query containing them boosts that entry like its own name.
SYMBOL_ALIASES: dict[str, str] = {
    "fsdp": "torch.distributed.fsdp.FullyShardedDataParallel",
    "fsdp1": "torch.distributed.fsdp.FullyShardedDataParallel",
    "fsdp2": "torch.distributed.fsdp.fully_shard",
    "dcp": "torch.distributed.checkpoint",
    "ddp": "torch.nn.parallel.DistributedDataParallel",
    "zero": "torch.distributed.optim.ZeroRedundancyOptimizer",
}

# An abbreviation in a longer question names the *topic*, not the answer ("offload params in FSDP2"
# wants CPUOffloadPolicy): documents in that topic's reference files or under its API prefixes get a
# mild lift instead. Keys are lowercase words; values: (reference files, qualified-name prefixes).
SCOPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "fsdp2": (
        ("fsdp2.md",),
        (
            "torch.distributed.fsdp.fully_shard",
            "torch.distributed.fsdp.FSDPModule",
            "torch.distributed.fsdp.MixedPrecisionPolicy",
            "torch.distributed.fsdp.CPUOffloadPolicy",
            "torch.distributed.fsdp.OffloadPolicy",
            "torch.distributed.fsdp.register_fsdp_forward_method",
            "torch.distributed.fsdp.UnshardHandle",
        ),
    ),
    "fsdp1": (
        ("fsdp1.md",),
        (
            "torch.distributed.fsdp.FullyShardedDataParallel",
            "torch.distributed.fsdp.ShardingStrategy",
            "torch.distributed.fsdp.MixedPrecision",
            "torch.distributed.fsdp.CPUOffload",
            "torch.distributed.fsdp.BackwardPrefetch",
            "torch.distributed.fsdp.StateDictType",
            "torch.distributed.fsdp.FullStateDictConfig",
        ),
    ),
    "fsdp": (("fsdp2.md", "fsdp1.md"), ("torch.distributed.fsdp.",)),
    "dcp": (("checkpoint.md",), ("torch.distributed.checkpoint",)),
    "ddp": (("ddp-and-join.md",), ("torch.nn.parallel.DistributedDataParallel", "torch.distributed.algorithms")),
    "hsdp": (("device-mesh.md", "fsdp2.md"), ("torch.distributed.device_mesh",)),
    "tp": (("tensor-parallel.md",), ("torch.distributed.tensor.parallel",)),
    "dtensor": (("dtensor.md",), ("torch.distributed.tensor",)),
    "torchrun": (("elastic.md",), ("torch.distributed.run", "torch.distributed.elastic")),
    "zero": (("ddp-and-join.md",), ("torch.distributed.optim.ZeroRedundancyOptimizer",)),
}

# `dist.X` / `c10d.X` are how code imports torch.distributed; rewrite to the documented path.
PREFIX_ALIASES: dict[str, str] = {
    "dist.": "torch.distributed.",
    "c10d.": "torch.distributed.",
    "dcp.": "torch.distributed.checkpoint.",
    "fsdp.": "torch.distributed.fsdp.",
    "nn.": "torch.nn.",
}

# "ZeRO" is also the English "zero"; only the paper's capitalisation (ZeRO, ZeRO-3) is the alias.
_ZERO_STAGE = re.compile(r"\bZeRO(?:[- ]?(\d))?\b")


def is_identifier(word: str) -> bool:
    """True for code-like words: snake_case, dotted paths, CamelCase, SCREAMING_CASE, DTensor."""
    if "_" in word or "." in word:
        return True
    # An uppercase letter after the first character (MixedPrecisionPolicy, DTensor, FSDPModule).
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


def identifier_parts(word: str) -> list[str]:
    """Lowercase parts of an identifier plus its glued form: all_reduce → all, reduce, allreduce.

    Dots separate path components; each component is split on `_` and camelCase humps. The glued
    form lets `allreduce` (how people type it) meet `all_reduce` (how the API spells it).
    """
    out: list[str] = []
    for component in word.split("."):
        if not is_identifier(component):
            continue
        humps = [m.group(0).lower() for piece in component.split("_") for m in _HUMP.finditer(piece)]
        out.extend(humps)
        if len(humps) > 1:
            out.append("".join(humps))
    return out


def body_identifier_parts(text: str) -> str:
    """The identifier parts of every code-like word in a text, space-joined (for the *_parts columns)."""
    parts: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group(0)
        if is_identifier(word):
            parts.extend(identifier_parts(word))
    return " ".join(parts)


def resolve_prefix(word: str) -> str:
    """`dist.all_reduce` → `torch.distributed.all_reduce`; other words unchanged."""
    lower = word.lower()
    for prefix, full in PREFIX_ALIASES.items():
        if lower.startswith(prefix) and len(word) > len(prefix):
            return full + word[len(prefix) :]
    return word


@dataclass
class ParsedQuery:
    """A user query reduced to what search needs."""

    text: str
    words: list[str] = field(default_factory=list)  # content words as typed (prefixes resolved)
    terms: list[str] = field(default_factory=list)  # lowercase FTS terms, deduplicated, in order
    symbol_words: list[str] = field(default_factory=list)  # words that may name an API entry
    alias_symbols: list[str] = field(default_factory=list)  # qualified names named by abbreviations
    highlight: list[str] = field(default_factory=list)  # lowercase strings to look for in snippets
    scopes: list[str] = field(default_factory=list)  # SCOPES keys the query's abbreviations name
    content_words: int = 0  # words left after stop words: how specific the query is
    glued: list[str] = field(default_factory=list)  # adjacent prose words joined: "distributetensor"
    # Lowercase words the user wrote as prose (no identifiers, no hyphenated compounds), with their
    # synonyms: what "the question spells an API name in words" is checked against.
    prose: list[str] = field(default_factory=list)

    def match_expression(self) -> str:
        """The FTS5 MATCH string: every term quoted, OR-ed. Terms are [a-z0-9_] only."""
        return " OR ".join(f'"{term}"' for term in self.terms)


class QueryError(UserError, ValueError):
    """The query cannot be searched; the message says how to fix it."""


def parse_query(text: str) -> ParsedQuery:
    """Split, expand and quote a user query. Raises QueryError for empty or oversized input."""
    if not text or not text.strip():
        raise QueryError("the query is empty: pass a few words or an API name, e.g. 'fully_shard mixed precision'")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(text)} characters; the limit is {MAX_QUERY_CHARS}: "
            "shorten it to the key words or API names"
        )
    parsed = ParsedQuery(text=text)
    terms: dict[str, None] = {}  # an ordered set

    def add_term(term: str) -> None:
        term = term.lower()
        if term and term not in terms:
            terms[term] = None

    def add_word(word: str, from_alias: bool = False) -> None:
        word = resolve_prefix(word)
        if from_alias:
            # Expansions add their whole tokens only: the parts of FullyShardedDataParallel (fully,
            # sharded, data, parallel) would match half the corpus and drown the user's own words.
            for component in word.split("."):
                add_term(component)
            return
        if is_identifier(word):
            for component in word.split("."):
                add_term(component)
            for part in identifier_parts(word):
                add_term(part)
        else:
            add_term(word)
        parsed.symbol_words.append(word)
        parsed.highlight.append(word.rsplit(".", 1)[-1].lower())

    for stage in _ZERO_STAGE.finditer(text):
        parsed.scopes.append("zero")
        parsed.alias_symbols.append(SYMBOL_ALIASES["zero"])
        for extra in TERM_ALIASES.get(f"zero{stage.group(1) or ''}", TERM_ALIASES["zero"]):
            add_word(extra, from_alias=True)

    rewritten = text
    for pattern, extra in PHRASE_REWRITES:
        if pattern.search(rewritten):
            rewritten += " " + extra
    for pattern, scope in PHRASE_SCOPES:
        if pattern.search(text):
            parsed.scopes.append(scope)
    hyphenated = [m.group(0).replace("-", "_") for m in _HYPHENATED.finditer(text)]
    words = [w for w in (m.group(0).strip("._") for m in _WORD.finditer(rewritten)) if w]
    content = [w for w in words if w.lower() not in STOP_WORDS or is_identifier(w)]
    # A query of nothing but common words ("how do I") is still searched, for what it is worth.
    parsed.content_words = len(content or words)
    # Neighbouring words glued together, for matching API names typed as prose ("distribute tensor").
    plain = [w.lower() for w in content if not is_identifier(w)]
    parsed.glued = [a + b for a, b in zip(plain, plain[1:])] + [
        a + b + c for a, b, c in zip(plain, plain[1:], plain[2:])
    ]
    prose: dict[str, None] = {}
    for match in _WORD.finditer(_HYPHENATED.sub(" ", rewritten)):
        word = match.group(0).strip("._").lower()
        if word and word not in STOP_WORDS and not is_identifier(match.group(0)):
            prose.setdefault(word, None)
            for extra in USER_SYNONYMS.get(word, ()):
                if not is_identifier(extra):
                    prose.setdefault(extra.lower(), None)
    parsed.prose = list(prose)
    for compound in hyphenated:
        # "all-gather" is usually the operation in prose, not a pointer to the API: a term, no boost.
        add_word(compound, from_alias=True)
    for raw in content or words:
        lower = raw.lower()
        if lower == "zero" and raw != "zero" and _ZERO_STAGE.fullmatch(raw):
            continue  # handled above, with its stage
        parsed.words.append(resolve_prefix(raw))
        add_word(raw)
        if lower in TERM_ALIASES and lower != "zero":
            if lower not in TOPIC_ABBREVIATIONS or parsed.content_words <= 2:
                for extra in TERM_ALIASES[lower]:
                    add_word(extra, from_alias=True)
        for extra in USER_SYNONYMS.get(lower, ()):
            add_word(extra, from_alias=True)
        if lower in SYMBOL_ALIASES and lower != "zero":
            parsed.alias_symbols.append(SYMBOL_ALIASES[lower])
        if lower in SCOPES and lower != "zero":
            parsed.scopes.append(lower)

    if not terms:
        raise QueryError(
            f"the query {text[:80]!r} has no searchable words, only punctuation: "
            "add a topic word or an API name"
        )
    parsed.terms = list(terms)
    return parsed
