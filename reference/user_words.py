"""Pydantic's validation errors in the user's words, for files a person writes.

`describe_error` rewrites the messages that speak pydantic:

- an unknown key: `unknown key 'by_typ' (did you mean 'by_type'?)`, suggested from the
  fields (and aliases) of the model at that place in the document;
- a value outside a fixed set: the set, and the closest member when one is close (or
  the member a word for it names: chit-chat is `conversation`);
- a name that does not match its pattern: what the pattern allows, in words;
- a field of seconds (`*_s`) that is not a number: that it holds seconds.

Other messages pass through (without pydantic's "Value error, " prefix).
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Tag
from pydantic_core import ErrorDetails

from reference.suggest import closest, did_you_mean

__all__ = [
    "EVENT_PATTERN",
    "NAME_PATTERN",
    "PATTERN_WORDS",
    "describe_error",
    "describe_errors",
    "model_at",
]

#: The pattern of a strategy's (or any configuration's) name.
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
#: The pattern of a business event's name.
EVENT_PATTERN = r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$"

#: What each pattern the models use allows, said in words.
PATTERN_WORDS = {
    NAME_PATTERN: "lowercase letters, digits and _, starting with a letter, at most 40 characters",
    EVENT_PATTERN: ("letters, digits and _ . : -, starting with a letter, at most 64 characters"),
}

_SET_ERRORS = {"enum", "literal_error"}
#: Words a person uses for a member of a fixed set that spelling does not find.
_SYNONYMS = {
    "chit_chat": "conversation",
    "chitchat": "conversation",
    "small_talk": "conversation",
    "smalltalk": "conversation",
}
_NUMBER_ERRORS = {"float_parsing", "float_type", "int_parsing", "int_type"}


def describe_error(err: ErrorDetails, model: type[BaseModel] | None = None) -> str:
    """The message of one pydantic error, said for a person; `model` is the model that
    was validated (its fields are the suggestions for an unknown key)."""
    kind, loc, value = err["type"], err["loc"], err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        meant = _meant_key(err, model)
        return f"unknown key {key!r}" + (f" (did you mean {meant!r}?)" if meant else "")
    if kind in _SET_ERRORS and isinstance(value, str) and "expected" in ctx:
        allowed = re.findall(r"'([^']*)'", str(ctx["expected"]))
        synonym = _SYNONYMS.get(value.lower().replace("-", "_").replace(" ", "_"))
        hint = (
            f" (chit-chat is {synonym!r})" if synonym in allowed else did_you_mean(value, allowed)
        )
        return f"{value!r} is not one of {ctx['expected']}{hint}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        words = PATTERN_WORDS.get(pattern, f"text matching the pattern {pattern}")
        return f"{_shown(value)} is not allowed: use {words}"
    if kind in _NUMBER_ERRORS and loc and str(loc[-1]).endswith("_s"):
        return f"must be a number of seconds, got {_shown(value)}"
    return err["msg"].removeprefix("Value error, ")


def describe_errors(
    errors: list[ErrorDetails], model: type[BaseModel] | None = None
) -> list[tuple[tuple[int | str, ...], str]]:
    """Each error's location and `describe_error` message; a required field reported
    missing is left out when an unknown key beside it is a typo of it (`sesion`)."""
    typos = set()
    for err in errors:
        meant = _meant_key(err, model)
        if meant is not None:
            typos.add((*err["loc"][:-1], meant))
    return [
        (tuple(err["loc"]), describe_error(err, model))
        for err in errors
        if not (err["type"] == "missing" and tuple(err["loc"]) in typos)
    ]


def _meant_key(err: ErrorDetails, model: type[BaseModel] | None) -> str | None:
    """For an unknown key, the field of its model it is closest to, if any."""
    if err["type"] != "extra_forbidden" or not err["loc"] or model is None:
        return None
    inner = model_at(model, tuple(err["loc"][:-1]))
    return closest(str(err["loc"][-1]), _field_names(inner)) if inner is not None else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field_names(model: type[BaseModel]) -> list[str]:
    names = []
    for name, info in model.model_fields.items():
        names.append(name)
        if info.alias:
            names.append(info.alias)
    return names


def model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that validates the value at `loc` (a pydantic error location,
    union tags included) under `model`, or None when the types do not lead to one."""
    current: Any = model
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    models = [t for _, t in _options(current) if isinstance(t, type) and issubclass(t, BaseModel)]
    return models[0] if len(models) == 1 else None


def _step(annotation: Any, part: int | str) -> Any:
    """The type one level below `annotation` along `part` (a key, an index or a tag)."""
    options = _options(annotation)
    for tag, option in options:
        if tag is not None and tag == part:
            return option
    for _, option in options:
        origin = get_origin(option)
        if isinstance(option, type) and issubclass(option, BaseModel) and isinstance(part, str):
            for name, info in option.model_fields.items():
                if part in (name, info.alias):
                    return info.annotation
        elif origin in (list, tuple, set, frozenset) and isinstance(part, int):
            return get_args(option)[0]
        elif origin is dict and isinstance(part, str):
            return get_args(option)[1]
    return None


def _options(annotation: Any) -> list[tuple[str | None, Any]]:
    """The members of a (possibly annotated, possibly optional) union, each with the tag
    pydantic puts in error locations for it (`Tag("say")`), else None."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *meta = get_args(annotation)
        tags = [m.tag for m in meta if isinstance(m, Tag)]
        if tags:
            return [(tags[0], o) for _, o in _options(inner)]
        return _options(inner)
    if origin in (Union, types.UnionType):
        return [opt for arg in get_args(annotation) for opt in _options(arg)]
    return [] if annotation is type(None) else [(None, annotation)]
