"""Bad input where it enters: hypothesis mutations of the real YAML files, through every
loader (scenarios, whole and streamed; strategies; the capacity target).

A mutation takes a shipped file (scenarios/*.yaml, reference/policy/builtin/*.yaml,
capacity/example-target.yaml), changes its data (a value replaced by a wrong type, a huge
number, a hostile or over-long string, a deep nesting; a key deleted or added) and then
its text (a line repeated, which repeats a key; bytes that are not UTF-8; an alias bomb;
a cut), writes it and loads it. Every outcome must be a valid document or the loader's
error naming the file, a line and a field for each problem: never another exception,
never a hang (a deadline per example), never a memory blow-up (the explicit cases below
measure the peak).

`MEMH_FUZZ_EXAMPLES` sets the examples per loader (default 150). What the inputs produced
is printed per loader (`pytest -s tests/test_fuzz_loaders.py`).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memharness.capacity.target import load_target
from memharness.scenarios.loader import load_scenario
from memharness.scenarios.stream import stream_scenario
from reference.policy.loading import load_strategy_file
from reference.validation import MAX_TEXT_CHARS
from reference.yamldoc import MAX_ALIAS_EXPANSION, MAX_DEPTH, YamlDocError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("MEMH_FUZZ_EXAMPLES", "150"))

REAL_FILES: dict[str, list[Path]] = {
    "scenario": sorted((ROOT / "scenarios").glob("*.yaml")),
    "scenario-stream": sorted((ROOT / "scenarios").glob("*.yaml")),
    "strategy": sorted((ROOT / "reference/policy/builtin").glob("*.yaml")),
    "target": [ROOT / "capacity/example-target.yaml"],
}

LOADERS: dict[str, Callable[[Path], object]] = {
    "scenario": load_scenario,
    "scenario-stream": lambda path: stream_scenario(path, lambda user: None),
    "strategy": load_strategy_file,
    "target": load_target,
}


def alias_bomb(levels: int = 9, fan: int = 10) -> str:
    """Billion laughs: `levels` anchors, each a list of `fan` aliases of the one before."""
    lines = [f"lol0: &lol0 [{', '.join(['lol'] * fan)}]"]
    for i in range(1, levels):
        lines.append(f"lol{i}: &lol{i} [{', '.join([f'*lol{i - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


HOSTILE_STRINGS = [
    "",
    "*",
    "user:*",
    "[a-z]?",
    "$and",
    "$in",
    '{"$ne": null}',
    "'; DROP TABLE memh_facts; --",
    '"quoted"',
    "\\",
    "\x00",
    "a\x00b",
    "\x01\x7f",
    "\u2028",
    "2024-13-45",
    "1e999",
    "NaN",
    "~",
    "x" * (MAX_TEXT_CHARS + 1),
    "忘记我的地址" * 50,
]

hostile_text = st.text(
    alphabet=st.one_of(st.sampled_from(list("*?[]$'\";:%{}\\\n\t\x00")), st.characters()),
    max_size=40,
)
hostile_value: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**30, -(10**30), 2**63, 10**200, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(HOSTILE_STRINGS),
    hostile_text,
    st.lists(hostile_text, max_size=3),
    st.dictionaries(hostile_text, hostile_text, max_size=3),
    st.sampled_from([deep(MAX_DEPTH // 2), deep(MAX_DEPTH + 5)]),
)

#: Raw-text changes after the data is dumped: (name, function of the text and a position).
TEXT_MUTATIONS: dict[str, Callable[[bytes, int], bytes]] = {
    "repeat a line": lambda b, i: _repeat_line(b, i),
    "invalid UTF-8": lambda b, i: b[:i] + b"\xff\xc3(" + b[i:],
    "encoded surrogate": lambda b, i: b[:i] + b"\xed\xa0\x80" + b[i:],
    "NUL byte": lambda b, i: b[:i] + b"\x00" + b[i:],
    "cut": lambda b, i: b[:i],
    "alias bomb": lambda b, i: alias_bomb().encode() + b,
    "stray alias": lambda b, i: b[:i] + b" *nowhere " + b[i:],
    "python tag": lambda b, i: b"evil: !!python/object/apply:os.system ['true']\n" + b,
    "flow garbage": lambda b, i: b[:i] + b"{[: ,]}" + b[i:],
}


def _repeat_line(text: bytes, at: int) -> bytes:
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    i = at % len(lines)
    return b"".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])


@functools.cache
def _data(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@functools.cache
def _paths(path: Path) -> list[tuple[Any, ...]]:
    return list(_walk(_data(path), ()))


def _walk(value: Any, prefix: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, (*prefix, index))


def _mutate(data: Any, path: tuple[Any, ...], op: str, value: Any, key: str) -> Any:
    data = copy.deepcopy(data)
    if not path:
        return value if op == "replace" else data
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "replace":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif op == "add" and isinstance(parent[last], dict):
        parent[last][key] = value
    elif op == "wrap":
        parent[last] = {"nested": [parent[last]]}
    return data


def _dump(data: Any) -> bytes:
    try:
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode("utf-8")
    except (yaml.YAMLError, UnicodeEncodeError):  # e.g. a surrogate: JSON escapes it
        return json.dumps(data).encode("ascii")


def outcome(loader: str, path: Path) -> str:
    """Load `path`; 'ok', or the first problem's field kind. Any other exception fails."""
    try:
        LOADERS[loader](path)
    except YamlDocError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == str(path), problem
            assert isinstance(problem.line, int) and problem.line >= 1, problem
            assert problem.field, problem
            assert problem.message, problem
        assert str(exc).startswith(f"{path}:{exc.problems[0].line}: ")
        first = exc.problems[0].field
        return first if first.startswith("(") else "field error"
    return "ok"


@pytest.mark.parametrize("loader", list(LOADERS))
def test_mutated_real_files_end_in_a_located_error_or_load(
    loader: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    files = REAL_FILES[loader]
    assert files, f"no real files for {loader}"
    out = tmp_path_factory.mktemp(f"fuzz-{loader}") / "mutated.yaml"

    @settings(
        max_examples=EXAMPLES,
        deadline=timedelta(seconds=10),  # a hang fails the example
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(
        source=st.sampled_from(files),
        pick=st.integers(min_value=0),
        op=st.sampled_from(["replace", "delete", "add", "wrap", "none"]),
        value=hostile_value,
        key=hostile_text,
        text_ops=st.lists(
            st.tuples(st.sampled_from(list(TEXT_MUTATIONS)), st.integers(min_value=0)),
            max_size=2,
        ),
    )
    def fuzz(
        source: Path,
        pick: int,
        op: str,
        value: Any,
        key: str,
        text_ops: list[tuple[str, int]],
    ) -> None:
        paths = _paths(source)
        path = paths[pick % len(paths)]
        if op == "delete" and not path:
            op = "none"
        text = _dump(_mutate(_data(source), path, op, value, key))
        for name, at in text_ops:
            text = TEXT_MUTATIONS[name](text, at % (len(text) + 1))
        out.write_bytes(text)
        produced[outcome(loader, out)] += 1

    produced: Counter[str] = Counter()
    fuzz()
    print(f"\nfuzz[{loader}]: {sum(produced.values())} inputs: {dict(produced.most_common())}")


def test_the_real_files_load() -> None:
    """The mutations start from valid files: each loads as it is."""
    for loader, files in REAL_FILES.items():
        for path in files:
            assert outcome(loader, path) == "ok", path


# ---------------------------------------------------------------- the worst cases, measured
def _measured(loader: str, path: Path) -> tuple[str, float, float]:
    """The outcome, the seconds and the peak MB (Python allocations) of loading `path`."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = outcome(loader, path)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return result, time.perf_counter() - started, peak / 1e6


# Where each loader's files have a text field and a nested one, to put the worst cases.
_TEXT_FIELD = {
    "scenario": ("users", 0, "timeline", 0, "say"),
    "scenario-stream": ("users", 0, "timeline", 0, "say"),
    "strategy": ("description",),
    "target": ("strategy",),
}


def _worst_cases() -> dict[str, Callable[[Any], bytes]]:
    def at_text(data: Any, loader: str, value: Any) -> bytes:
        return _dump(_mutate(data, _TEXT_FIELD[loader], "replace", value, ""))

    return {
        "alias bomb at the top": lambda args: alias_bomb().encode() + _dump(args[0]),
        "alias bomb in a field": lambda args: alias_bomb().encode() + placed(args, b"*lol8"),
        "recursive alias": lambda args: b"loop: &loop [*loop]\n" + _dump(args[0]),
        "10 MB string": lambda args: at_text(args[0], args[1], "x" * 10_000_000),
        "1,000 levels of lists": lambda args: placed(args, b"[" * 1000 + b"]" * 1000),
        "100,000 levels of lists": lambda args: placed(args, b"[" * 100_000 + b"]" * 100_000),
        "integer of 5,000 digits": lambda args: placed(args, b"9" * 5000),
        "invalid date": lambda args: placed(args, b"2024-13-45"),
    }


def placed(args: tuple[Any, str], raw: bytes) -> bytes:
    """The file with `raw` YAML text in place of its text field's value."""
    data, loader = args
    return _dump(_mutate(data, _TEXT_FIELD[loader], "replace", "PLACE", "")).replace(b"PLACE", raw)


WORST = _worst_cases()


@pytest.mark.parametrize("case", list(WORST))
@pytest.mark.parametrize("loader", list(LOADERS))
def test_the_worst_inputs_fail_fast_and_small(loader: str, case: str, tmp_path: Path) -> None:
    source = REAL_FILES[loader][0]
    path = tmp_path / "worst.yaml"
    path.write_bytes(WORST[case]((_data(source), loader)))
    result, seconds, peak_mb = _measured(loader, path)
    print(f"\nworst[{loader}, {case}]: {result}, {seconds:.2f} s, peak {peak_mb:.1f} MB")
    assert result != "ok", f"{case} loaded"
    # Bounds with a wide margin over what was measured (`pytest -s` prints it), so a
    # shared machine does not fail them; a bomb expanding (10^9 nodes) or a quadratic
    # walk would be far beyond them.
    assert seconds < 20, f"{case}: {seconds:.1f} s"
    assert peak_mb < 120, f"{case}: {peak_mb:.0f} MB"


def test_a_bombs_error_names_the_alias_line(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb() + "name: x\n", encoding="utf-8")
    with pytest.raises(YamlDocError) as err:
        load_strategy_file(path)
    problem = err.value.problems[0]
    assert (problem.line, problem.field) == (5, "lol4[9]"), str(err.value)
    assert f"{MAX_ALIAS_EXPANSION:,}" in problem.message


def test_anchors_that_expand_a_little_still_load(tmp_path: Path) -> None:
    """Aliases are legal YAML: a target that reuses a node shape loads."""
    path = tmp_path / "target.yaml"
    path.write_text(
        "users: 1000\nturns_per_user_per_day: 20\n"
        "nodes:\n  default: &node {cores: 4, ram_gb: 16, disk_gb: 200}\n  ltm: *node\n",
        encoding="utf-8",
    )
    target = load_target(path)
    assert target.nodes["ltm"] == target.nodes["default"]


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"name: x\ndescription: caf\xe9\n")
    for loader in LOADERS:
        with pytest.raises(YamlDocError) as err:
            LOADERS[loader](path)
        assert err.value.problems[0].line == 2, (loader, str(err.value))
