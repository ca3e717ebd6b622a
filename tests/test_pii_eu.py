"""German, French, Spanish and Italian names and addresses (`reference/pii/european.py`):
the labelled set's recall per language and kind, precision reported, and the examples
the patterns were written against (the tuning list; the set was not used to write them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.pii_detector import load, score
from reference.pii import RegexPiiMasker

DETECTOR = RegexPiiMasker(cache_size=0)
SET = Path(__file__).parent / "data" / "pii_eu.yaml"
LANGUAGES = ("de", "fr", "es", "it")

# The tuning examples: what the patterns were written and tried against.
TUNING = [
    ("Hauptstrasse 12, 10115 Berlin", "address"),
    ("Lindenweg 5, 04109 Leipzig", "address"),
    ("Karl-Marx-Allee 90, 10243 Berlin", "address"),
    ("Berliner Straße 5", "address"),
    ("Am Markt 3", "address"),
    ("12 Rue de Rivoli, 75001 Paris", "address"),
    ("Calle Mayor 5, 28013 Madrid", "address"),
    ("Calle de Alcalá 45, 3º B, 28014 Madrid", "address"),
    ("Via Roma 10, 00184 Roma", "address"),
    ("Corso Vittorio Emanuele II 21, 10121 Torino", "address"),
    ("Pia Schulz", "name"),
    ("Jürgen Müller", "name"),
    ("Camille Dubois", "name"),
    ("Giulia", "name"),
]
TUNING_TEXTS = {
    "Pia Schulz": "My name is Pia Schulz.",
    "Jürgen Müller": "Ich heiße Jürgen Müller und wohne Am Markt 3 in Bonn.",
    "Camille Dubois": "Je m'appelle Camille Dubois.",
    "Giulia": "Sono Giulia.",
}


@pytest.mark.parametrize(("value", "kind"), TUNING)
def test_the_tuning_examples_are_found_and_masked(value: str, kind: str) -> None:
    text = TUNING_TEXTS.get(value, f"Please write to {value} today.")
    found = [m for m in DETECTOR.detect(text) if m.kind == kind]
    assert any(
        m.start <= text.index(value) and m.end >= text.index(value) + len(value) for m in found
    ), (text, found)
    assert value not in DETECTOR.mask(text)


def test_the_masks_keep_type_and_city_and_hide_the_rest() -> None:
    assert DETECTOR.mask("Hauptstrasse 12, 10115 Berlin") == "*****strasse **, ***** Berlin"
    assert DETECTOR.mask("12 Rue de Rivoli, 75001 Paris") == "** Rue de ******, ***** Paris"
    assert DETECTOR.mask("Via Roma 10, 00184 Roma") == "Via **** **, ***** Roma"


def test_the_set_has_50_names_and_50_addresses_per_language() -> None:
    items = load(SET)
    for lang in LANGUAGES:
        part = [i for i in items if i.lang == lang]
        kinds = [kind for i in part for _, kind in i.values]
        assert kinds.count("name") >= 50 and kinds.count("address") >= 50, lang
        assert any(not i.values for i in part), f"{lang}: no negatives"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_recall_per_language_is_at_least_0_9(lang: str) -> None:
    items = [i for i in load(SET) if i.lang == lang]
    tallies = score(items, DETECTOR)
    for kind in ("name", "address"):
        recall = tallies[kind].recall
        assert recall is not None and recall >= 0.9, (lang, kind, recall)
    # Precision is reported (docs/input-and-isolation.md), not a target; it must not
    # collapse: at most one false alarm in ten detections.
    precision = tallies["name"].precision
    assert precision is not None and precision >= 0.85, (lang, precision)
    assert tallies["address"].precision == 1.0, lang


def test_no_address_in_sentences_with_numbers_and_capitals() -> None:
    for text in (
        "Piazza Affari ha chiuso in rialzo del 2 per cento.",
        "Der Weg ist 5 Kilometer lang.",
        "Le vol AF 1234 est en retard.",
        "Via libera al progetto per il 2024.",
        "El Real Madrid ganó 3 a 1.",
    ):
        assert [m for m in DETECTOR.detect(text) if m.kind == "address"] == [], text
