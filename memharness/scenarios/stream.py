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

from memharness.scenarios.checks import (
    check_adversarial,
    check_user,
    check_user_data,
    pii_findings,
)
from memharness.scenarios.loader import ScenarioError, _without_tags
from memharness.scenarios.model import Adversarial, Loc, Scenario, User
from reference.user_words import describe_errors
from reference.yamldoc import (
    MAX_DEPTH,
    Problem,
    check_nodes,
    construct,
    dotted,
    in_line_order,
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
    #: What does not stop a replay but a reader should know (`checks.pii_findings`).
    warnings: list[Problem] = field(default_factory=list)


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


#: How many problems a streamed file may gather before reading stops.
MAX_PROBLEMS = 100


class _Reader:
    """Reads the document, gathering every problem (up to `MAX_PROBLEMS`), and raises
    them together at the end; a user with problems is not handed to the callback."""

    def __init__(self, source: str, on_user: Callable[[User], None]) -> None:
        self.source = source
        self.on_user = on_user
        self.facts: dict[str, frozenset[str]] = {}
        self.users = 0
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.top_line = 1  # the line of the document's mapping, for problems of the whole

    def note(self, node: yaml.Node | None, loc: Loc, messages: list[tuple[Loc, str]]) -> None:
        """Add `messages` (each at a location under `loc`, where `node` is)."""
        self.problems += [
            Problem(
                self.source,
                line_of(node, sub[len(loc) :]) if node is not None else self.top_line,
                dotted(sub),
                message,
            )
            for sub, message in messages
        ]
        if len(self.problems) >= MAX_PROBLEMS:
            self.raise_problems()

    def fail(self, node: yaml.Node | None, loc: Loc, messages: list[tuple[Loc, str]]) -> NoReturn:
        self.note(node, loc, messages)
        self.raise_problems()

    def raise_problems(self) -> NoReturn:
        raise ScenarioError(in_line_order(self.problems))

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
        self.users += 1
        check_nodes(node, loc, self.source, error=ScenarioError)
        data = construct(loader, node, self.source, error=ScenarioError)
        problems: list[tuple[Loc, str]] = []
        try:
            user: User | None = User.model_validate(data)
        except ValidationError as exc:
            user = None
            problems += [
                (_without_tags((*loc, *sub)), message)
                for sub, message in describe_errors(exc.errors(), User)
            ]
        user_id = (
            user.id if user is not None else data.get("id") if isinstance(data, dict) else None
        )
        if isinstance(user_id, str) and user_id in self.facts:
            problems.append(((*loc, "id"), f"duplicate user id {user_id!r}"))
        if user is not None:
            facts = check_user(user, loc, problems)
        elif isinstance(data, dict):
            facts = check_user_data(data, loc, problems)
        else:
            facts = set()
        if isinstance(user_id, str):
            self.facts[user_id] = frozenset(facts)
        if problems:
            self.note(node, loc, problems)
        elif user is not None:
            self.warnings += [
                Problem(self.source, line_of(node, sub[len(loc) :]), dotted(sub), message)
                for sub, message in pii_findings(user, loc)
            ]
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
            for err_loc, message in describe_errors(exc.errors(), Scenario):
                key = err_loc[0] if err_loc else "(document)"
                entry = header.get(str(key))
                node = entry[1] if isinstance(entry, tuple) else None
                line = line_of(node, err_loc[1:]) if node is not None else top.start_mark.line + 1
                self.problems.append(Problem(self.source, line, dotted(err_loc), message))
            self.raise_problems()
        users = header.get("users")
        if isinstance(users, tuple) and not isinstance(users[0], list):  # not a sequence
            self.fail(users[1], ("users",), [(("users",), "Input should be a valid list")])
        if "users" in data and not self.users:
            self.fail(None, (), [(("users",), "List should have at least 1 item")])
        node = header["adversarial"][1] if "adversarial" in header else None
        problems: list[tuple[Loc, str]] = []
        check_adversarial(enumerate(scenario.adversarial), self.facts, problems)
        self.note(node, ("adversarial",), problems)
        if self.problems:
            self.raise_problems()
        return ScenarioInfo(
            name=scenario.name,
            description=scenario.description,
            seed=scenario.seed,
            users=self.users,
            adversarial=list(scenario.adversarial),
            warnings=self.warnings,
        )
