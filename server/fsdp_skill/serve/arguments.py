"""Tool arguments of the wrong type, told in one short line per argument.

The SDK reports them as pydantic's own text: "1 validation error for search_docsArguments\\nlimit\\n
Input should be a valid integer, unable to parse string as an integer [type=int_parsing,
input_value='five', input_type=str]\\n For further information visit https://errors.pydantic.dev/…".
A model reads the argument and the type it wants from the tool's input schema and gets
"search_docs: limit must be an integer, got the string 'five'" instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fsdp_skill.core.quoting import quote

__all__ = ["argument_errors"]

# JSON Schema types as a sentence says them.
_EXPECTED = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
             "array": "a list", "object": "an object"}
# How long a wrong value may be quoted: it only has to be recognisable.
_SHOWN = 40


def argument_errors(tool: str, arguments: dict[str, Any], error: ValidationError, schema: dict[str, Any]) -> str:
    """One line: each of `arguments` that failed `schema` (the tool's input schema), what it must be, and
    what it was."""
    properties = schema.get("properties") or {}
    problems: list[str] = []
    for detail in error.errors(include_url=False):
        location = detail.get("loc") or ()
        name = str(location[0]) if location else ""
        if name not in properties:
            continue
        wanted = expected(properties[name])
        if detail.get("type") == "missing":
            problem = f"{name} is required: pass {wanted}"
        else:
            problem = f"{name} must be {wanted}, got {given(arguments.get(name))}"
        if problem not in problems:
            problems.append(problem)
    if not problems:  # not about one argument (the SDK checks the arguments' shape before us)
        first = error.errors(include_url=False)[0]["msg"] if error.errors() else "invalid arguments"
        return f"{tool}: the arguments do not match its input schema ({first})"
    return f"{tool}: " + "; ".join(problems)


def expected(schema: dict[str, Any]) -> str:
    """What one property's schema allows: 'an integer', "one of 'gloo', 'nccl'", 'a string (or null, …)'."""
    options = schema.get("anyOf") or [schema]
    kinds: list[str] = []
    nullable = False
    for option in options:
        if option.get("type") == "null":
            nullable = True
        elif "enum" in option:
            kinds.append("one of " + ", ".join(repr(value) for value in option["enum"]))
        else:
            kinds.append(_EXPECTED.get(str(option.get("type")), "a value of its schema's type"))
    text = " or ".join(kinds) or "a value"
    return f"{text} (or null, or leave it out)" if nullable else text


def given(value: Any) -> str:
    """The wrong value, short: "the string 'five'", 'the number 2.5', 'a list', 'null'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {quote(value, _SHOWN)}"
    if isinstance(value, int | float):
        return f"the number {quote(value, _SHOWN)}"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"

