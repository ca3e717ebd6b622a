"""`fast_init` builds the same frozen records as the `__init__` that `dataclass` writes:
the same signature, the same fields from the same arguments, defaults and factories, the
same `__post_init__` and the same errors, and the records stay frozen."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

import reference.system  # noqa: F401 - imports every module whose records use fast_init
from reference.errors import InvalidInput
from reference.ltm.filters import LtmFilter
from reference.records import DATACLASS_INIT, fast_init
from reference.stm.filters import StmFilter

CLASSES = sorted(DATACLASS_INIT, key=lambda cls: cls.__qualname__)


def _built_by_dataclass(cls: type, *args: Any, **kwargs: Any) -> Any:
    record = object.__new__(cls)
    DATACLASS_INIT[cls](record, *args, **kwargs)
    return record


def _values(record: Any) -> list[Any]:
    return [getattr(record, f.name) for f in dataclasses.fields(record)]


def test_the_hot_records_have_a_fast_init() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"Fact", "MemoryRecord", "AuditEntry", "Hit", "LtmFilter", "StmFilter"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_same_signature_and_fields(cls: type) -> None:
    assert str(inspect.signature(cls.__init__)) == str(inspect.signature(DATACLASS_INIT[cls]))
    if hasattr(cls, "__post_init__"):
        return  # validating classes: below, with valid arguments
    required = {
        f.name: object()
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    fast, slow = cls(**required), _built_by_dataclass(cls, **required)
    assert _values(fast) == _values(slow)
    for f, value in zip(dataclasses.fields(cls), _values(fast), strict=True):
        if f.name in required:
            assert value is required[f.name]
        elif f.default_factory is not dataclasses.MISSING:  # a new one per record
            assert value is not getattr(cls(**required), f.name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fast, dataclasses.fields(cls)[0].name, 1)
    if required:  # the same error for a missing argument
        with pytest.raises(TypeError) as fast_error:
            cls()
        with pytest.raises(TypeError) as slow_error:
            _built_by_dataclass(cls)
        assert str(fast_error.value) == str(slow_error.value)


def test_post_init_runs_as_before() -> None:
    keys = frozenset({" size "})
    fast = LtmFilter(user_id="u1", keys=keys, include_dead=True)
    assert _values(fast) == _values(
        _built_by_dataclass(LtmFilter, "u1", keys=keys, include_dead=True)
    )
    assert fast.keys == frozenset({"size"})
    for build in (LtmFilter, lambda **kw: _built_by_dataclass(LtmFilter, **kw)):
        with pytest.raises(InvalidInput, match="user_id"):
            build(user_id="")
    ids = frozenset({"r1"})
    assert _values(StmFilter(user_id="u1", record_ids=ids)) == _values(
        _built_by_dataclass(StmFilter, user_id="u1", record_ids=ids)
    )


def test_keyword_only_fields_defaults_and_fields_left_out_of_init() -> None:
    @fast_init
    @dataclass(frozen=True, slots=True)
    class Sample:
        a: int
        b: list[int] = field(default_factory=list)
        c: str = field(default="c", init=False)
        d: int = field(default=4, kw_only=True)

    assert str(inspect.signature(Sample.__init__)) == str(inspect.signature(DATACLASS_INIT[Sample]))
    assert _values(Sample(1, [2], d=5)) == [1, [2], "c", 5]
    assert _values(Sample(1)) == _values(_built_by_dataclass(Sample, 1)) == [1, [], "c", 4]
    with pytest.raises(TypeError):
        Sample(1, [2], 5)  # type: ignore[misc]  # d is keyword-only


def test_refuses_what_it_cannot_build_faithfully() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True, slots=True)
    class WithClassVar:
        a: int
        kind: ClassVar[str] = "x"

    for cls in (NoSlots, NotFrozen, WithClassVar):
        with pytest.raises(TypeError):
            fast_init(cls)
