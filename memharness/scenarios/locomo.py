"""Import LoCoMo (long conversations with dated sessions and evidence-linked questions).

Mapping, decided here and documented in docs/running-and-scenarios.md:

- each conversation becomes one user, id = its `sample_id`; both speakers' turns are said
  by that user, the text prefixed with the speaker's name ("Caroline: ..."), because the
  memory under test is the memory of the whole conversation; the name is also the turn's
  `speaker` metadata, which scopes the keys of the facts it states (`reference.promotion`);
- session N is session `session_N`; its turns are said at the session's date
  ("1:56 pm on 8 May, 2023", read as UTC), `TURN_SPACING_S` apart; an image turn's
  caption is appended ("[shares a photo: ...]") since questions may rest on it;
- each turn asserts one fact, id = its `dia_id`, type `fact`;
- a speaker's name (`speaker_a`, `speaker_b`) said in a turn's own words, as a whole
  word, is marked `pii: [{value: <name>, kind: name}]`: a person's name, certainly. The
  speaker prefix is the importer's label, not marked; nor is anything else (other
  people's names, places): LoCoMo does not label them, so its users are not
  `pii_complete` and the detector's precision is not measured on them;
- each question of categories 1-4 becomes a probe, one second apart, an hour after the
  last turn, in session `questions`; its needed facts are its evidence turns;
- category 5 (adversarial) goes to the scenario's `adversarial` list, not probed.

LoCoMo's evidence is hand-typed and a little dirty ("D8:6; D9:17", "D:11:26", "D30:05",
"D"). Ids are split and normalised; ids that still name no turn are dropped and reported
in the notes, and a question left with no evidence is skipped (also noted). Structural
problems (a missing or mistyped field) raise `LocomoError` naming the conversation and
the field.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memharness.scenarios.loader import validate_scenario
from memharness.scenarios.model import Scenario
from reference.errors import InvalidInput

__all__ = [
    "LOCOMO_SOURCE",
    "TURN_SPACING_S",
    "LocomoError",
    "convert_locomo",
    "import_locomo",
    "read_locomo",
]

#: Where to get LoCoMo, which this repository does not ship (docs/running-and-scenarios.md).
LOCOMO_SOURCE = (
    "LoCoMo is not part of memharness: download data/locomo10.json from"
    " https://github.com/snap-research/locomo (Maharana et al., 2024) and give its path"
)

TURN_SPACING_S = 30.0
_PROBE_DELAY_S = 3600.0
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):0*(\d+)")
_SPLIT = re.compile(r"[;,\s]+")


class LocomoError(InvalidInput):
    """The LoCoMo file is malformed: the message names the conversation and field."""


def import_locomo(path: str | Path) -> Scenario:
    """The LoCoMo file at `path` as a scenario (see the module docstring)."""
    return convert_locomo(read_locomo(Path(path)), source=str(path))[0]


def convert_locomo(data: Any, *, source: str = "locomo.json") -> tuple[Scenario, list[str]]:
    """LoCoMo's parsed JSON as a scenario, plus notes on the evidence it had to repair."""
    if not isinstance(data, list) or not data:
        raise LocomoError("(document)", f"{source}: must be a non-empty list of conversations")
    users: list[dict[str, Any]] = []
    adversarial: list[dict[str, Any]] = []
    notes: list[str] = []
    for index, sample in enumerate(data):
        where = f"{source}: conversation {index}"
        if not isinstance(sample, dict):
            raise LocomoError("(conversation)", f"{where}: must be an object")
        user_id = _get(sample, "sample_id", str, where)
        where = f"{source}: conversation {index} ({user_id})"
        timeline, known, end = _turns(_get(sample, "conversation", dict, where), where)
        for q, qa in enumerate(_get(sample, "qa", list, where)):
            field = f"qa[{q}]"
            if not isinstance(qa, dict):
                raise LocomoError(field, f"{where}: {field}: must be an object")
            question = _get(qa, "question", str, where, field)
            category = _get(qa, "category", int, where, field)
            if not 1 <= category <= 5:
                raise LocomoError(
                    f"{field}.category", f"{where}: {field}.category: {category} is not 1-5"
                )
            evidence = _evidence(
                _get(qa, "evidence", list, where, field), known, where, field, notes
            )
            answer = qa.get("answer", qa.get("adversarial_answer"))
            if category == 5:
                item = {"user": user_id, "query": question, "evidence": evidence}
                if answer is not None:
                    item["answer"] = str(answer)
                adversarial.append(item)
            elif not evidence:
                notes.append(f"{where}: {field}: no evidence left, question skipped")
            else:
                at = end + _PROBE_DELAY_S + q
                probe = {"at": at, "session": "questions", "probe": question, "needed": evidence}
                if answer is not None:
                    probe["answer"] = str(answer)
                timeline.append(probe)
        users.append({"id": user_id, "timeline": timeline})
    description = (
        f"LoCoMo imported from {Path(source).name}: {len(users)} conversations, one user each;"
        " questions of categories 1-4 are probes, category 5 is kept apart as adversarial"
    )
    data_out = {"name": "locomo", "description": description, "users": users}
    data_out["adversarial"] = adversarial
    return validate_scenario(data_out, source=source), notes


def read_locomo(path: Path) -> Any:
    """The parsed JSON of a LoCoMo file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LocomoError("(file)", f"{path}: no such file. {LOCOMO_SOURCE}") from None
    except OSError as exc:
        raise LocomoError("(file)", f"{path}: cannot be read: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LocomoError("(file)", f"{path}: is not JSON: {exc}") from None


def _get(obj: dict[str, Any], key: str, kind: type, where: str, parent: str = "") -> Any:
    field = f"{parent}.{key}" if parent else key
    if key not in obj:
        raise LocomoError(field, f"{where}: {field}: missing")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise LocomoError(
            field, f"{where}: {field}: must be {kind.__name__}, got {type(value).__name__}"
        )
    return value


def parse_locomo_date(text: str) -> float:
    """Epoch seconds (UTC) of a LoCoMo date like "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


def _turns(conv: dict[str, Any], where: str) -> tuple[list[dict[str, Any]], set[str], float]:
    """The said steps of one conversation, the dialogue ids, and the last turn's time."""
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.fullmatch(key)))
    if not numbers:
        raise LocomoError("conversation", f"{where}: conversation: has no session_N lists")
    steps: list[dict[str, Any]] = []
    known: set[str] = set()
    last = 0.0
    speakers = [
        name.strip()
        for key in ("speaker_a", "speaker_b")
        if isinstance(name := conv.get(key), str) and name.strip()
    ]
    for n in numbers:
        parent = "conversation"
        stamp = _get(conv, f"session_{n}_date_time", str, where, parent)
        try:
            at = parse_locomo_date(stamp)
        except ValueError:
            field = f"conversation.session_{n}_date_time"
            raise LocomoError(
                field, f"{where}: {field}: {stamp!r} is not like '1:56 pm on 8 May, 2023'"
            ) from None
        if at < last:
            field = f"conversation.session_{n}_date_time"
            raise LocomoError(field, f"{where}: {field}: {stamp!r} is before the previous session")
        for t, turn in enumerate(_get(conv, f"session_{n}", list, where, parent)):
            field = f"conversation.session_{n}[{t}]"
            if not isinstance(turn, dict):
                raise LocomoError(field, f"{where}: {field}: must be an object")
            speaker = _get(turn, "speaker", str, where, field)
            dia_id = _get(turn, "dia_id", str, where, field)
            text = _get(turn, "text", str, where, field)
            caption = turn.get("blip_caption")
            if isinstance(caption, str) and caption.strip():
                text = f"{text} [shares a photo: {caption.strip()}]"
            if dia_id in known:
                raise LocomoError(
                    f"{field}.dia_id", f"{where}: {field}.dia_id: duplicate {dia_id!r}"
                )
            known.add(dia_id)
            last = at + t * TURN_SPACING_S
            step = {
                "at": last,
                "session": f"session_{n}",
                "say": f"{speaker}: {text}".strip(),
                "facts": [{"id": dia_id, "type": "fact"}],
                # The memory scopes fact keys by speaker, so neither speaker's
                # "my X is ..." supersedes the other's.
                "metadata": {"speaker": speaker},
            }
            if said := _names_said(text, speakers):
                step["pii"] = [{"value": name, "kind": "name"} for name in said]
            steps.append(step)
    return steps, known, last


def _names_said(text: str, names: list[str]) -> list[str]:
    """The `names` that `text` says as whole words."""
    return [n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text)]


def _evidence(
    raw: list[Any], known: set[str], where: str, field: str, notes: list[str]
) -> list[str]:
    found: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            raise LocomoError(f"{field}.evidence", f"{where}: {field}.evidence: must hold strings")
        for part in filter(None, _SPLIT.split(item)):
            match = _DIA_ID.fullmatch(part)
            dia_id = f"D{match.group(1)}:{match.group(2)}" if match else part
            if dia_id not in known:
                notes.append(f"{where}: {field}.evidence: {part!r} names no turn, dropped")
            elif dia_id not in found:
                found.append(dia_id)
    return found
