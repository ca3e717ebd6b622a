"""Precision and recall of the reference's PII detector per kind, on labelled utterances.

    .venv/bin/python -m bench.pii_detector tests/data/pii_labelled.yaml [MORE.yaml ...]
    .venv/bin/python -m bench.pii_detector tests/data/pii_eu.yaml   # per language

A labelled file is a YAML list of `{text: ..., pii: [{value: ..., kind: ...}, ...]}`
(`pii` empty or absent: nothing personal in it; `lang`, optional: the table is then
given per language). A labelled value is found (tp) when a
detection of the same kind overlaps it; a value nothing of its kind overlaps is a miss
(fn); a detection that overlaps no labelled value of its kind is a false alarm (fp).
`covered` is the share of the found values' characters inside detections of their kind.
The table also gives per-utterance detection time (median and p95, over `--reps` passes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from reference.pii import KINDS, RegexPiiMasker


@dataclass(frozen=True, slots=True)
class Labelled:
    text: str
    values: tuple[tuple[str, str], ...]  # (value, kind)
    where: str
    lang: str = ""  # the language the entry names (`lang:`), if any


@dataclass(slots=True)
class Tally:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    covered: list[float] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def load(path: Path) -> list[Labelled]:
    """The utterances of a labelled file; a malformed entry is an error naming it."""
    items = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a list of {{text, pii}} entries")
    out: list[Labelled] = []
    for n, item in enumerate(items, 1):
        where = f"{path}: entry {n}"
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ValueError(f"{where}: field 'text' must be a string")
        values = []
        for v in item.get("pii") or ():
            if not isinstance(v, dict) or v.get("kind") not in KINDS:
                raise ValueError(f"{where}: field 'pii.kind' must be one of {', '.join(KINDS)}")
            value = str(v.get("value", ""))
            if not value or value not in item["text"]:
                raise ValueError(f"{where}: field 'pii.value' {value!r} is not in the text")
            values.append((value, v["kind"]))
        out.append(Labelled(item["text"], tuple(values), where, str(item.get("lang") or "")))
    return out


def _spans(text: str, values: Sequence[tuple[str, str]]) -> list[tuple[int, int, str]]:
    spans, taken = [], set()
    for value, kind in values:
        start = text.find(value)
        while (start, kind) in taken:  # the same value said twice: the next occurrence
            start = text.find(value, start + 1)
        taken.add((start, kind))
        spans.append((start, start + len(value), kind))
    return spans


def score(items: Sequence[Labelled], detector: RegexPiiMasker) -> dict[str, Tally]:
    """tp / fp / fn per kind of `detector` on `items`."""
    tallies = {kind: Tally() for kind in KINDS}
    for item in items:
        found = [(m.start, m.end, m.kind) for m in detector.detect(item.text)]
        labels = _spans(item.text, item.values)
        for start, end, kind in labels:
            inside = [(a, b) for a, b, k in found if k == kind and a < end and b > start]
            if inside:
                tallies[kind].tp += 1
                chars = {i for a, b in inside for i in range(max(a, start), min(b, end))}
                tallies[kind].covered.append(len(chars) / (end - start))
            else:
                tallies[kind].fn += 1
        for a, b, kind in found:
            if not any(k == kind and a < end and b > start for start, end, k in labels):
                tallies[kind].fp += 1
    return tallies


def timings_ms(items: Sequence[Labelled], detector: RegexPiiMasker, reps: int) -> list[float]:
    """Per-utterance detection time in ms, each utterance timed `reps` times."""
    out = []
    for _ in range(reps):
        for item in items:
            start = time.perf_counter()
            detector.detect(item.text)
            out.append((time.perf_counter() - start) * 1e3)
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(tallies: dict[str, Tally]) -> str:
    lines = [f"{'kind':<10}{'tp':>6}{'fp':>6}{'fn':>6}{'precision':>11}{'recall':>8}{'covered':>9}"]
    total = Tally()
    for kind, t in tallies.items():
        cov = statistics.fmean(t.covered) if t.covered else None
        lines.append(
            f"{kind:<10}{t.tp:>6}{t.fp:>6}{t.fn:>6}{_fmt(t.precision):>11}"
            f"{_fmt(t.recall):>8}{_fmt(cov):>9}"
        )
        total.tp, total.fp, total.fn = total.tp + t.tp, total.fp + t.fp, total.fn + t.fn
        total.covered += t.covered
    cov = statistics.fmean(total.covered) if total.covered else None
    lines.append(
        f"{'all':<10}{total.tp:>6}{total.fp:>6}{total.fn:>6}{_fmt(total.precision):>11}"
        f"{_fmt(total.recall):>8}{_fmt(cov):>9}"
    )
    return "\n".join(lines)


def _is_chinese(item: Labelled) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in item.text)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pii_detector", description=__doc__)
    parser.add_argument("files", nargs="+", type=Path, help="labelled YAML files")
    parser.add_argument("--reps", type=int, default=5, help="timing passes over the set")
    args = parser.parse_args(argv)
    for path in args.files:
        items = load(path)
        zh = [i for i in items if _is_chinese(i)]
        en = [i for i in items if not _is_chinese(i)]
        parts = [("all", items)]
        languages = sorted({i.lang for i in items if i.lang})
        if languages:  # a file that names languages is scored per language
            parts += [(lang, [i for i in items if i.lang == lang]) for lang in languages]
        else:
            parts += [("English", en), ("Chinese", zh)]
        for label, part in parts:
            print(f"\n{path} — {label}: {len(part)} utterances")
            print(table(score(part, RegexPiiMasker(cache_size=0))))
        detector = RegexPiiMasker(cache_size=0)
        detector.detect("预热 warm-up 北京市")  # jieba's dictionary loads outside the timing
        for label, part, chinese in (
            ("English", en, True),
            ("Chinese, with jieba", zh, True),
            ("Chinese, without jieba", zh, False),
        ):
            times = timings_ms(part, RegexPiiMasker(cache_size=0, chinese_words=chinese), args.reps)
            if times:
                p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
                print(
                    f"detect per utterance, {label}: median {statistics.median(times):.3f} ms,"
                    f" p95 {p95:.3f} ms ({len(times)} timings)"
                )


if __name__ == "__main__":
    main()
