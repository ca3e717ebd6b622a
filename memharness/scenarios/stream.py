"""Reading a scenario one user at a time, for files too large to hold (100,000 users).

libyaml parses the events; each user's mapping is composed to nodes, validated with its
lines, handed to the caller and dropped. Memory stays flat with the number of users;
errors are the same `file:line: field: message` as `load_scenario`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from memharness.scenarios.loader import ScenarioError, _without_tags
from memharness.scenarios.model import Adversarial, Loc, Scenario, User, check_user
from reference.yamldoc import (
    MAX_DEPTH,
    Problem,
    check_nodes,
    construct,
    dotted,
    line_of,
    yaml_problem,
)

__all__ = ["ScenarioInfo", "stream_scenario"]

# libyaml's parser when PyYAML was built with it (it is here), else the pure-Python one.
_Parser: Any = getattr(getattr(yaml, "cyaml", None), "CParser", yaml.parser.Parser)


class _EventLoader(_Parser, Composer, SafeConstructor, Resolver):
    """libyaml's event parser with PyYAML's composer, to compose one sub-tree at a time."""

    def __init__(self, stream: Any) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


@dataclass
class ScenarioInfo:
    """Everything in a streamed scenario but its users: those went to the callback."""

    name: str
    description: str = ""
    seed: int | None = None
    users: int = 0
    adversarial: list[Adversarial] = field(default_factory=list)


def stream_scenario(path: str | Path, on_user: Callable[[User], None]) -> ScenarioInfo:
    """Validate the scenario file at `path`, calling `on_user` with each user in order."""
    source = str(path)
    try:
        with open(path, "rb") as stream:
            return _Reader(source, on_user).read(_EventLoader(stream))
    except OSError as exc:
        raise ScenarioError([Problem(source, None, "(file)", f"cannot be read: {exc}")]) from None
    except yaml.YAMLError as exc:
        text = None
        if isinstance(exc, yaml.reader.ReaderError):  # its position is in the file's text
            text = Path(path).read_bytes().decode("utf-8", errors="replace")
        raise ScenarioError([yaml_problem(exc, source, text)]) from None


def _compose(loader: _EventLoader, source: str) -> yaml.Node:
    """The next node of the event stream (a key, a value or a list item)."""
    try:
        node = loader.compose_node(None, None)  # type: ignore[arg-type]
    except RecursionError:  # PyYAML's composer recurses once per level of nesting
        line = loader.peek_event().start_mark.line + 1
        message = f"nested deeper than {MAX_DEPTH} levels"
        raise ScenarioError([Problem(source, line, "(yaml)", message)]) from None
    if node is None:
        raise yaml.YAMLError("unexpected end of the document")
    return node


class _Reader:
    def __init__(self, source: str, on_user: Callable[[User], None]) -> None:
        self.source = source
        self.on_user = on_user
        self.facts: dict[str, frozenset[str]] = {}
        self.top_line = 1  # the line of the document's mapping, for problems of the whole

    def fail(self, node: yaml.Node | None, loc: Loc, messages: list[tuple[Loc, str]]) -> NoReturn:
        raise ScenarioError(
            [
                Problem(
                    self.source,
                    line_of(node, sub[len(loc) :]) if node is not None else self.top_line,
                    dotted(sub),
                    message,
                )
                for sub, message in messages
            ]
        )

    def read(self, loader: _EventLoader) -> ScenarioInfo:
        loader.get_event()  # stream start
        if loader.check_event(yaml.StreamEndEvent):
            self.fail(None, (), [(("(document)",), "is empty")])
        loader.get_event()  # document start
        if not loader.check_event(yaml.MappingStartEvent):
            line = loader.peek_event().start_mark.line + 1
            raise ScenarioError([Problem(self.source, line, "(document)", "must be a mapping")])
        top = loader.get_event()
        self.top_line = top.start_mark.line + 1
        header: dict[str, Any] = {}
        seen: dict[str, int] = {}
        while not loader.check_event(yaml.MappingEndEvent):
            key_node = _compose(loader, self.source)
            key, line = str(key_node.value), key_node.start_mark.line + 1
            if key in seen:
                message = f"duplicate key (first at line {seen[key]})"
                raise ScenarioError([Problem(self.source, line, key, message)])
            seen[key] = line
            if key == "users" and loader.check_event(yaml.SequenceStartEvent):
                loader.get_event()
                while not loader.check_event(yaml.SequenceEndEvent):
                    self.user(loader, _compose(loader, self.source), len(self.facts))
                loader.get_event()
                header["users"] = [None]  # placeholder: users were validated one by one
            else:
                value = _compose(loader, self.source)
                check_nodes(value, (key,), self.source, error=ScenarioError)
                header[key] = (construct(loader, value, self.source, error=ScenarioError), value)
        return self.finish(header, top)

    def user(self, loader: _EventLoader, node: yaml.Node, index: int) -> None:
        loc: Loc = ("users", index)
        check_nodes(node, loc, self.source, error=ScenarioError)
        data = construct(loader, node, self.source, error=ScenarioError)
        try:
            user = User.model_validate(data)
        except ValidationError as exc:
            errors = [(_without_tags((*loc, *e["loc"])), e["msg"]) for e in exc.errors()]
            self.fail(node, loc, [(sub, m.removeprefix("Value error, ")) for sub, m in errors])
        problems: list[tuple[Loc, str]] = []
        facts = check_user(user, loc, problems)
        if user.id in self.facts:
            problems.insert(0, ((*loc, "id"), f"duplicate user id {user.id!r}"))
        if problems:
            self.fail(node, loc, problems)
        self.facts[user.id] = frozenset(facts)
        self.on_user(user)

    def finish(self, header: dict[str, Any], top: Any) -> ScenarioInfo:
        data = {
            key: value[0] if isinstance(value, tuple) else value for key, value in header.items()
        }
        try:
            # Validate the fields besides users through the full model, on an empty user list
            # stand-in: users were checked already, so only their presence matters here.
            shell = {**data, "users": [{"id": "_"}]} if "users" in data else data
            scenario = Scenario.model_validate(shell)
        except ValidationError as exc:
            found = []
            for err in exc.errors():
                key = err["loc"][0] if err["loc"] else "(document)"
                entry = header.get(str(key))
                node = entry[1] if isinstance(entry, tuple) else None
                line = (
                    line_of(node, err["loc"][1:]) if node is not None else top.start_mark.line + 1
                )
                found.append(Problem(self.source, line, dotted(err["loc"]), err["msg"]))
            raise ScenarioError(found) from None
        users = header.get("users")
        if isinstance(users, tuple) and not isinstance(users[0], list):  # not a sequence
            self.fail(users[1], ("users",), [(("users",), "Input should be a valid list")])
        if "users" in data and not self.facts:
            self.fail(None, (), [(("users",), "List should have at least 1 item")])
        node = header["adversarial"][1] if "adversarial" in header else None
        problems: list[tuple[Loc, str]] = []
        for a, question in enumerate(scenario.adversarial):
            known = self.facts.get(question.user)
            if known is None:
                problems.append((("adversarial", a, "user"), f"unknown user {question.user!r}"))
                continue
            problems.extend(
                (("adversarial", a, "evidence", e), f"unknown fact {fact!r}")
                for e, fact in enumerate(question.evidence)
                if fact not in known
            )
        if problems:
            self.fail(node, ("adversarial",), problems)
        return ScenarioInfo(
            name=scenario.name,
            description=scenario.description,
            seed=scenario.seed,
            users=len(self.facts),
            adversarial=list(scenario.adversarial),
        )
