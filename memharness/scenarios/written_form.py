"""One line of a written scenario (`dump_line`), and reading a scenario in the exact form
the writer writes (`read_written_form`), without YAML.

A generated scenario is one JSON text per line under a few fixed block keys (see
`loader.py`, "writing"). Composing it to YAML nodes costs most of a load (13 CPU s for
8,000 users, against a fraction of a second for `json.loads` on its lines), so a file in
that form is read line by line here. It gives the data only when the YAML reading would
give the same data and `reference.yamldoc.check_nodes` nothing to refuse; for anything
else it gives None and the caller reads the file as YAML, which also gives every error
its line. What returns None:

- a line that is not one of the writer's (a comment, another indentation, another key,
  a key repeated, CR line ends);
- a JSON text that `dump_line` would not write the same way: so keys are not repeated
  and the spacing is JSON's own; a key YAML would not take (over 1,000 characters);
- a number YAML reads otherwise (`1e+16`, which YAML 1.1 reads as a string; `NaN`), or
  an integer of more than `MAX_INT_DIGITS` digits;
- a character YAML refuses or reads as a line break (NEL), an escaped NUL or surrogate;
- a line with so many brackets it could nest past `MAX_DEPTH`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from reference.yamldoc import MAX_DEPTH, MAX_INT_DIGITS

__all__ = ["dump_line", "read_written_form"]

# PyYAML refuses these characters raw; JSON leaves them raw with ensure_ascii=False.
_UNPRINTABLE = re.compile("[\x7f-\x84\x86-\x9f\ufffe\uffff\u2028\u2029]")


def dump_line(value: Any) -> str:
    """`value` as one line of YAML flow style (JSON syntax, UTF-8 kept readable)."""
    text = json.dumps(value, ensure_ascii=False)
    if _UNPRINTABLE.search(text):
        text = _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


class _NotWritten(Exception):
    """The text is not in the writer's form (or YAML would read it otherwise)."""


def _yaml_pattern(tag: str) -> re.Pattern[str]:
    # PyYAML's own implicit resolver for `tag`, so that a JSON number is taken only
    # when YAML resolves its text to the same type.
    for found, pattern in yaml.resolver.Resolver.yaml_implicit_resolvers["1"]:
        if found == tag:
            return pattern
    raise LookupError(tag)


_YAML_FLOAT = _yaml_pattern("tag:yaml.org,2002:float")
#: What YAML's reader refuses, and what it may read as a line break within a string.
_REFUSED = re.compile(yaml.reader.Reader.NON_PRINTABLE.pattern + "|[\x85\u2028\u2029]")
#: Escapes whose character `check_nodes` refuses (NUL, surrogates).
_REFUSED_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
#: Most brackets a line may hold: a step sits 4 levels deep.
_MAX_BRACKETS = MAX_DEPTH // 2
#: Longest key YAML takes in a flow mapping is 1,024 characters, quotes and all.
_MAX_KEY_CHARS = 1000


def _float(text: str) -> float:
    if not _YAML_FLOAT.match(text):
        raise _NotWritten
    return float(text)


def _int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise _NotWritten
    return int(text)


def _constant(text: str) -> Any:
    raise _NotWritten  # NaN, Infinity: YAML spells them .nan, .inf


def _short_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if any(len(dump_line(key)) > _MAX_KEY_CHARS for key, _ in pairs):
        raise _NotWritten
    return dict(pairs)


_DECODER = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_constant)
#: For a line long enough to hold a key YAML would not take.
_LONG_LINE_DECODER = json.JSONDecoder(
    parse_float=_float, parse_int=_int, parse_constant=_constant, object_pairs_hook=_short_keys
)


def _value(text: str) -> Any:
    """The JSON text `text` as `dump_line` writes it."""
    if text.count("{") + text.count("[") > _MAX_BRACKETS:
        raise _NotWritten
    decoder = _DECODER if len(text) <= _MAX_KEY_CHARS else _LONG_LINE_DECODER
    try:
        value = decoder.decode(text)
    except (ValueError, RecursionError):
        raise _NotWritten from None
    if dump_line(value) != text:
        raise _NotWritten
    return value


_HEADER = re.compile(r"(name|description|seed): (.+)")


def read_written_form(text: str) -> dict[str, Any] | None:
    """The plain data of a scenario text in the writer's form, as YAML would build it;
    None when the text is not in that form (read it as YAML then)."""
    if _REFUSED.search(text) or _REFUSED_ESCAPE.search(text):
        return None
    try:
        return _read(text.split("\n"))
    except _NotWritten:
        return None


def _read(lines: list[str]) -> dict[str, Any]:
    if lines and lines[-1] == "":
        lines.pop()
    data: dict[str, Any] = {}
    i = 0
    while i < len(lines) and (header := _HEADER.fullmatch(lines[i])):
        key = header.group(1)
        if key in data:
            raise _NotWritten
        data[key] = _value(header.group(2))
        i += 1
    if i == len(lines) or lines[i] != "users:":
        raise _NotWritten
    users: list[dict[str, Any]] = []
    i += 1
    while i < len(lines) and lines[i].startswith("  - id: "):
        user: dict[str, Any] = {"id": _value(lines[i][8:])}
        i += 1
        if i < len(lines) and lines[i] == "    pii_complete: true":
            user["pii_complete"] = True
            i += 1
        if i == len(lines) or lines[i] != "    timeline:":
            raise _NotWritten
        i += 1
        steps = []
        while i < len(lines) and lines[i].startswith("      - {"):
            steps.append(_value(lines[i][8:]))
            i += 1
        user["timeline"] = steps or None  # `timeline:` with nothing under it is null
        users.append(user)
    data["users"] = users or None
    if i < len(lines) and lines[i] == "adversarial:":
        i += 1
        questions = []
        while i < len(lines) and lines[i].startswith("  - {"):
            questions.append(_value(lines[i][4:]))
            i += 1
        data["adversarial"] = questions or None
    if i != len(lines):
        raise _NotWritten
    return data
