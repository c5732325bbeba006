"""Inline reStructuredText (and MyST role) markup → CommonMark inline text.

Sphinx cross-reference roles have no target offline, so they become code spans showing what the
rendered docs show (`:func:`~torch.distributed.all_reduce`` → `` `all_reduce()` ``); hyperlinks
become markdown links; `:math:` becomes `$…$`. One left-to-right regex scan: at each position the
earliest construct wins, so a role spelled inside a code span stays literal. An inline literal ends
at the first "``" it can (lazily), so a one-character literal does not swallow the next one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Python-domain roles: rendered as code; functions and methods get "()" like Sphinx's
# add_function_parentheses default.
_PY_ROLES = {"func", "meth", "class", "attr", "mod", "obj", "data", "exc", "const", "any", "type", "property"}
_CALLABLE_ROLES = {"func", "meth"}
_CODE_ROLES = {
    "code", "literal", "envvar", "file", "samp", "command", "program", "option", "kbd", "makevar",
    "regexp", "mimetype", "manpage", "dfn", "token", "keyword", "cpp:func", "cpp:class", "c:func",
}
_TEXT_ROLES = {"ref", "doc", "term", "numref", "abbr", "title-reference", "title", "t", "sup", "sub",
               "superscript", "subscript", "hidden", "pep", "rfc", "download", "guilabel", "menuselection"}
_DROPPED_ROLES = {"octicon", "fa", "bdg", "bdg-primary", "bdg-secondary", "bdg-info", "bdg-success",
                  "bdg-warning", "bdg-danger", "index"}

# Every role the converter renders on purpose (others are kept as code); a domain prefix (py:, std:) is allowed.
KNOWN_ROLES = frozenset(_PY_ROLES | _CODE_ROLES | _TEXT_ROLES | _DROPPED_ROLES | {"math", "emphasis", "em", "strong"})

_INLINE = re.compile(
    r"""
    (?P<literal>``(?P<literal_body>\S(?:.*?\S)??)``(?!`))
    | (?P<role>(?::(?P<role_name>[A-Za-z][\w:+.-]*):|\{(?P<myst_name>[A-Za-z][\w:+.-]*)\})
        `(?P<role_body>(?:[^`\\]|\\.)+)`)
    | (?P<link>`(?P<link_body>(?:[^`\\]|\\.)+)`(?P<link_tail>__?)(?![\w]))
    | (?P<interp>`(?P<interp_body>(?:[^`\\]|\\.)+)`(?::(?P<suffix_role>[A-Za-z][\w:+.-]*):)?)
    | (?P<footnote>\[(?P<footnote_label>\#?[\w-]*|\*)\]_(?![\w]))
    | (?P<subst>(?<![\w|])\|(?P<subst_name>[A-Za-z][\w -]*?)\|(?P<subst_tail>__?)?(?![\w|]))
    | (?P<escape>\\(?P<escaped>[\s\S]))
    """,
    re.VERBOSE,
)
_TITLE_TARGET = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)


def code_span(text: str) -> str:
    """A CommonMark code span holding text verbatim, whatever backticks it contains."""
    text = " ".join(text.split("\n"))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _split_title(body: str) -> tuple[str | None, str]:
    """`title <target>` → (title, target); a bare target → (None, target)."""
    match = _TITLE_TARGET.match(body.strip())
    if match and match.group("title"):
        return match.group("title").strip(), match.group("target").strip()
    if match:
        return None, match.group("target").strip()
    return None, body.strip()


def _py_role_text(role: str, body: str) -> str:
    title, target = _split_title(body)
    if title is not None:
        return code_span(_unescape(title))
    target = _unescape(target).lstrip("!")
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    target = target.lstrip(".")
    if role.split(":")[-1] in _CALLABLE_ROLES and not target.endswith(")"):
        target += "()"
    return code_span(target)


def _role(name: str, body: str, substitutions: dict[str, str]) -> str:
    role = name.lower()
    short = role.split(":", 1)[1] if role.startswith(("py:", "std:")) else role
    if short in _PY_ROLES:
        return _py_role_text(short, body)
    if short == "math":
        return f"${body.strip()}$"  # LaTeX: backslashes are commands, not RST escapes
    if short in _CODE_ROLES:
        return code_span(_unescape(body))
    if short in ("emphasis", "em"):
        return f"*{convert(body, substitutions)}*"
    if short == "strong":
        return f"**{convert(body, substitutions)}**"
    if short in _DROPPED_ROLES:
        return ""
    if short in _TEXT_ROLES:
        title, target = _split_title(body)
        if short == "pep":
            return f"PEP {target}"
        if short == "rfc":
            return f"RFC {target}"
        if short == "abbr":
            return _unescape(body)
        if title is not None:
            return convert(title, substitutions)
        target = _unescape(target).lstrip("~!")
        if short in ("ref", "doc"):
            # Sphinx would show the target's title, which is not known here: humanize the label.
            return re.sub(r"[_-]+", " ", target.rstrip("/").rsplit("/", 1)[-1]).strip()
        return target
    # Unknown role: keep its text, as code since most project roles name identifiers.
    title, target = _split_title(body)
    return code_span(_unescape(title if title is not None else target))


def _link(body: str, targets: dict[str, str], resolve_uri: Callable[[str], str] | None) -> str:
    title, target = _split_title(body)
    target = _ZERO_WIDTH.sub("", target)  # upstream pasted "\u200bhttps://..." once
    if title is not None or re.match(r"^[a-z][\w+.-]*://|^mailto:", target):
        text = title if title is not None else target
        url = target
        if url.endswith("_") and url[:-1] in targets:  # `text <name_>`_ points at a named target
            url = targets[url[:-1]]
        return f"[{_link_text(text)}]({_link_url(url, resolve_uri)})"
    # `name`_ : a reference to a named target defined elsewhere in the document.
    named_url = targets.get(target.lower()) or targets.get(target)
    text = _unescape(target)
    return f"[{_link_text(text)}]({_link_url(named_url, resolve_uri)})" if named_url else text


def _link_text(text: str) -> str:
    return _unescape(text).replace("[", "\\[").replace("]", "\\]")


def _link_url(url: str, resolve_uri: Callable[[str], str] | None = None) -> str:
    """The URL to emit: whitespace from line wrapping removed; a relative one ("../x/y.html", which
    means a page of the docs site and is broken in references/) made absolute by resolve_uri."""
    url = _ZERO_WIDTH.sub("", "".join(url.split()))
    if resolve_uri is not None and not re.match(r"^[a-zA-Z][\w+.-]*:|^#", url):
        url = resolve_uri(url)
    return f"<{url}>" if re.search(r"[\s()<>]", url) else url


_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


_HTML_LIKE = re.compile(r"<(?=[A-Za-z/!?])(?![a-z][\w+.-]*://[^>\s]*>)")


def convert(text: str, substitutions: dict[str, str] | None = None, targets: dict[str, str] | None = None,
            *, escape_html: bool = False, resolve_uri: Callable[[str], str] | None = None) -> str:
    """Convert the inline markup of one paragraph (or table cell); newlines are kept.

    escape_html: RST prose has no raw HTML, so `<host>` is text; escaping its `<` keeps a
    CommonMark renderer from swallowing it as a tag. resolve_uri: maps a relative link target
    to the absolute URL to emit (default: kept as written).
    """
    substitutions = substitutions or {}
    targets = targets or {}
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        plain = text[pos : match.start()]
        out.append(_HTML_LIKE.sub(r"\\<", plain) if escape_html else plain)
        pos = match.end()
        if match.group("literal") is not None:
            out.append(code_span(match.group("literal_body")))
        elif match.group("role") is not None:
            name = match.group("role_name") or match.group("myst_name")
            out.append(_role(name, match.group("role_body"), substitutions))
        elif match.group("link") is not None:
            out.append(_link(match.group("link_body"), targets, resolve_uri))
        elif match.group("interp") is not None:
            suffix = match.group("suffix_role")
            body = match.group("interp_body")
            out.append(_role(suffix, body, substitutions) if suffix else code_span(_unescape(body)))
        elif match.group("footnote") is not None:
            out.append(f"[{match.group('footnote_label').lstrip('#') or '*'}]")
        elif match.group("subst") is not None:
            # Unknown substitutions are page decorations (|edit| is a pencil icon): drop them.
            out.append(substitutions.get(match.group("subst_name"), ""))
        else:
            escaped = match.group("escaped")
            # RST's escaped whitespace joins words ("``x``\ s"); other escapes keep their
            # backslash, which means the same thing in CommonMark.
            out.append(
                "" if escaped.isspace() and escaped != "\n" else f"\\{escaped}" if escaped in "*_`[]<>#|\\" else escaped
            )
    tail = text[pos:]
    out.append(_HTML_LIKE.sub(r"\\<", tail) if escape_html else tail)
    result = "".join(out)
    return re.sub(r"[ \t]+\n", "\n", result)


def inline_to_markdown(text: str) -> str:
    """Public entry: inline RST/MyST roles, literals and links of `text` as CommonMark."""
    return convert(text)
