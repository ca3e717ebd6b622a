"""A scenario in the writer's form is read without YAML to the very data YAML builds, and
anything YAML would read otherwise, or refuse, goes to the YAML reading (with its lines)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memharness.scenarios import DOMAINS, generate_scenario
from memharness.scenarios.loader import (
    ScenarioError,
    load_scenario,
    parse_scenario,
    write_header,
    write_user,
)
from memharness.scenarios.written_form import read_written_form
from reference.yamldoc import YamlDocError, check_nodes

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"

STEP = {"at": "2024-03-01T09:00:00Z", "session": "s1", "say": "I like tea."}


def _text(steps: list[Any], **header: Any) -> str:
    out = io.StringIO()
    write_header(out, name=header.get("name", "t"), seed=header.get("seed"))
    write_user(out, "u1", steps, pii_complete=True)
    return out.getvalue()


def _yaml_reading(text: str) -> Any:
    """What the YAML path builds, or the exception it refuses the text with."""
    try:
        loader = yaml.CSafeLoader(text)
        try:
            node = loader.get_single_node()
            check_nodes(node, (), None)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except (yaml.YAMLError, YamlDocError, ValueError, OverflowError, RecursionError) as exc:
        return exc


@pytest.mark.parametrize("domain", DOMAINS)
def test_generated_files_read_as_yaml_reads_them(domain: str) -> None:
    out = io.StringIO()
    generate_scenario(out, domain=domain, users=30, seed=3, zh_share=0.5)
    text = out.getvalue()
    data = read_written_form(text)
    assert data is not None
    assert data == yaml.load(text, Loader=yaml.CSafeLoader)


def test_hand_written_files_go_to_yaml() -> None:
    for path in sorted(SCENARIOS.glob("*.yaml")):
        assert read_written_form(path.read_text(encoding="utf-8")) is None, path


@pytest.mark.parametrize(
    "line",
    [
        '{"at": 1, "at": 2}',  # a repeated key: YAML's path refuses it at its line
        '{"at": 1e+16}',  # YAML 1.1 reads a float without a dot as a string
        '{"at": 1e-05}',
        '{"at": NaN}',
        '{"say": "a\\u0000b"}',  # NUL: refused
        '{"say": "\\ud83d\\ude00"}',  # YAML keeps the two surrogates apart: refused
        '{"at": ' + "9" * 101 + "}",  # past MAX_INT_DIGITS
        '{"at":1}',  # not JSON's own spacing
        '{"say": "a\x85b"}',  # NEL: a line break to YAML
        '{"k' + "x" * 1100 + '": 1}',  # a key longer than YAML takes
        "[" * 40 + "]" * 40,  # deep
    ],
)
def test_what_yaml_reads_otherwise_goes_to_yaml(line: str) -> None:
    text = _text([]).replace("    timeline:\n", f"    timeline:\n      - {line}\n")
    assert read_written_form(text) is None


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("\n", "\r\n"),
        lambda t: "# a comment\n" + t,
        lambda t: t + "# a comment\n",
        lambda t: t.replace("users:\n", "users:\nname: again\n"),
        lambda t: "name: x\n" + t,
        lambda t: "\ufeff" + t,
        lambda t: t.replace("  - id:", "  -  id:"),
        lambda t: t + "---\n",
    ],
)
def test_other_lines_go_to_yaml(edit: Any) -> None:
    text = _text([STEP])
    assert read_written_form(text) is not None
    assert read_written_form(edit(text)) is None


def test_empty_blocks_are_null_as_in_yaml() -> None:
    text = _text([])
    assert read_written_form(text) == yaml.safe_load(text)
    assert read_written_form('name: "x"\nusers:\n') == {"name": "x", "users": None}


def test_a_written_file_that_does_not_validate_gets_its_lines(tmp_path: Path) -> None:
    steps = [STEP, {**STEP, "probe": "tea?", "needed": ["f9"], "say": None}]
    del steps[1]["say"]
    path = tmp_path / "bad.yaml"
    path.write_text(_text(steps), encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value) == f"{path}:8: users[0].timeline[1].needed[0]: unknown fact 'f9'"


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**120), max_value=10**120)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.dictionaries(st.text(max_size=8), _json, max_size=4), max_size=3))
def test_any_written_values_read_as_yaml_reads_them_or_go_to_yaml(
    steps: list[dict[str, Any]],
) -> None:
    text = _text(steps)
    data = read_written_form(text)
    if data is None:
        return
    expected = _yaml_reading(text)
    assert not isinstance(expected, Exception), expected
    # NaN is never read here, so == compares everything
    assert json.dumps(data, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert data == expected


def test_the_fast_reading_is_the_scenario_yaml_gives() -> None:
    out = io.StringIO()
    generate_scenario(out, domain="ecommerce", users=20, seed=5)
    text = out.getvalue()
    fast = parse_scenario(text)
    data = yaml.load(text, Loader=yaml.CSafeLoader)
    assert fast.model_dump() == type(fast).model_validate(data).model_dump()
