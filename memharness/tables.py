"""Plain-text tables for the terminal: aligned columns, figures in their units, the best of
a column marked when it stands alone.

A table is a tuple of `Column`s (the field a row holds, the header, the unit, and which
way is better) and a list of rows (dicts, field -> value). Numbers are right-aligned,
text left-aligned; `None` reads `-`, a string is shown as it is. In a column with a
`better` direction the best value is marked `*`, but only when no other row shows the
same value: a tie marks nothing. The mark goes before the number (`* 1.6 KiB`).
`render_markdown` gives the same cells as a GitHub table (best in bold) for
`summary.md`.
"""

from __future__ import annotations

import math
import numbers
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from memharness.units import human_bytes, human_duration

__all__ = [
    "BEST_MARK",
    "TIE_NOTE",
    "Column",
    "Unit",
    "format_value",
    "render",
    "render_markdown",
    "wrapped",
]

#: How a column's values are shown: "%" a share (0.25 -> 25.0%), "s" a duration in
#: seconds (s, min, h, d), "bytes" (B, KiB, MiB, GiB), "ms" milliseconds, "count" an
#: integer, "num" any number, "text" left-aligned words.
Unit = Literal["%", "s", "bytes", "ms", "count", "num", "text"]
Better = Literal["higher", "lower"]

BEST_MARK = "*"
TIE_NOTE = f"{BEST_MARK} best in its column; ties are unmarked"
ALARM_MARK = "!"
#: Notes under a table are wrapped to this width.
WIDTH = 100
_GAP = "  "


class Column(NamedTuple):
    """A column: `field` of the row, `header`, `unit`; `better` "higher" or "lower" marks
    the column's best; `alarm` marks every non-zero value (a figure that must be 0)."""

    field: str
    header: str
    unit: Unit
    better: Better | None = None
    alarm: bool = False


def format_value(value: Any, unit: Unit) -> str:
    """One cell: `value` in `unit`; a string (or anything not a number) as it is, None
    and NaN as `-`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) or unit == "text" or not isinstance(value, numbers.Real):
        return str(value)
    value = float(value)
    if unit == "%":
        return f"{value * 100:.1f}%"
    if unit == "s":
        return human_duration(value)
    if unit == "bytes":
        return human_bytes(value)
    if unit == "ms":
        return f"{value:,.1f} ms"
    if unit == "count":
        return f"{int(value):,}"
    if float(value).is_integer() or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _number(value: Any) -> bool:
    """A real number to rank (not a bool, not NaN)."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and not math.isnan(float(value))
    )


def _best_rows(column: Column, rows: Sequence[Mapping[str, Any]], texts: list[str]) -> set[int]:
    """The row holding the column's best value, when its shown value is no other row's."""
    if column.better is None:
        return set()
    values = [row.get(column.field) for row in rows]
    ranked = [(float(v), i) for i, v in enumerate(values) if v is not None and _number(v)]
    if len(ranked) < 2:
        return set()
    pick = max if column.better == "higher" else min
    _, best = pick(ranked, key=lambda item: item[0])
    if sum(texts[i] == texts[best] for _, i in ranked) > 1:
        return set()  # a tie (as shown): nothing is best
    return {best}


def _cells(
    columns: Sequence[Column], rows: Sequence[Mapping[str, Any]]
) -> tuple[list[list[str]], list[list[str]]]:
    """Per row, each column's text and its mark ('', `*`, `!`)."""
    texts = [[format_value(row.get(c.field), c.unit) for c in columns] for row in rows]
    marks = [["" for _ in columns] for _ in rows]
    for j, column in enumerate(columns):
        for i in _best_rows(column, rows, [t[j] for t in texts]):
            marks[i][j] = BEST_MARK
        if column.alarm:
            for i, row in enumerate(rows):
                value = row.get(column.field)
                if _number(value) and value != 0:
                    marks[i][j] = ALARM_MARK
    return texts, marks


def render(
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    *,
    reference: Sequence[Mapping[str, Any]] = (),
    indent: str = "  ",
) -> str:
    """The table as aligned text, with a line on the marks when there are any.

    `reference` rows come first and take no part in choosing the best (e.g. the dense
    retrieval ceiling above the strategies)."""
    texts, marks = _cells(columns, rows)
    ref_texts = [[format_value(r.get(c.field), c.unit) for c in columns] for r in reference]
    all_texts = ref_texts + texts
    all_marks = [["" for _ in columns] for _ in reference] + marks
    marked = [any(m[j] for m in all_marks) for j in range(len(columns))]
    # In a marked column a mark goes before the number ('* 1.6 KiB'), in its padding when
    # the header is wider: the numbers stay right-aligned under their header.
    widths = [
        max([len(c.header), *(len(t[j]) + 2 * marked[j] for t in all_texts)])
        for j, c in enumerate(columns)
    ]

    def line(cells: Sequence[str], row_marks: Sequence[str] | None) -> str:
        out = []
        for j, (column, cell) in enumerate(zip(columns, cells, strict=True)):
            if column.unit == "text":
                out.append(cell.ljust(widths[j]))
            elif row_marks and row_marks[j]:
                out.append(f"{row_marks[j]} {cell}".rjust(widths[j]))
            else:
                out.append(cell.rjust(widths[j]))
        return indent + _GAP.join(out).rstrip()

    lines = [line([c.header for c in columns], None)]
    lines.append(indent + _GAP.join("-" * w for w in widths))
    lines += [line(t, m) for t, m in zip(all_texts, all_marks, strict=True)]
    notes = []
    if any(c.better for c in columns) and len(rows) > 1:
        notes.append(TIE_NOTE)
    if any(ALARM_MARK in m for m in marks):
        alarmed = ", ".join(c.header for c in columns if c.alarm)
        notes.append(f"{ALARM_MARK} must be 0 ({alarmed})")
    if notes:
        lines.append(indent + "; ".join(notes))
    return "\n".join(lines) + "\n"


def wrapped(text: str, *, indent: str = "  ", width: int = WIDTH) -> str:
    """`text` as indented lines of at most `width` characters, ending in a newline."""
    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent) + "\n"


def render_markdown(
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    *,
    reference: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The same cells as a GitHub-flavoured Markdown table: text columns left, numbers
    right; the best of a column in bold (ties unmarked), an alarm with ⚠; `reference`
    rows first, unranked, as in `render`."""
    texts, marks = _cells(columns, rows)
    texts = [[format_value(r.get(c.field), c.unit) for c in columns] for r in reference] + texts
    marks = [["" for _ in columns] for _ in reference] + marks
    head = "| " + " | ".join(c.header for c in columns) + " |"
    rule = "|" + "".join("---|" if c.unit == "text" else "---:|" for c in columns)
    body = []
    for row_texts, row_marks in zip(texts, marks, strict=True):
        cells = []
        for j, (text, mark) in enumerate(zip(row_texts, row_marks, strict=True)):
            text = text.replace("|", "\\|")
            if j == 0 and columns[0].unit == "text" and text != "-":
                text = f"`{text}`"  # the row's name, as in the other tables of summary.md
            if mark == BEST_MARK:
                text = f"**{text}**"
            elif mark == ALARM_MARK:
                text = f"**{text}** ⚠"
            cells.append(text)
        body.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *body]) + "\n"
