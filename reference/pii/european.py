"""German, French, Spanish and Italian person names and street addresses.

Detection only (`find_names`, `find_addresses`) and the address mask; the masker
(`masker.py`) merges these spans with the other kinds'.

Names: a cue of the four languages ("Ich heiße", "Mein Name ist", "Je m'appelle",
"Me llamo", "Mi chiamo", "Frau", "Mme", "Sra.", "Sig.ra", "meine Frau", "mon mari",
"mi hermana", "mio fratello" ...) followed by one to three capitalised words, with name
particles between them (von, van, de, di, del, della, da, dos, la); or a given name of
`given_names_eu.txt` (with the capitalised words after it: a surname); or any
capitalised word before a common surname of the same file ("Wiebke Schäfer"). Given
names that are also common words need a cue or a surname, as in `english.py`.

Addresses, each with an optional postcode and city after it (`10115 Berlin`,
`75001 Paris`, `28013 Madrid`, `00184 Roma (RM)`):

- German (and Austrian, Swiss): a street word ending in a street suffix (`Hauptstraße`,
  `Lindenweg`, `Karl-Marx-Allee`), an adjective and a separate suffix (`Berliner
  Straße`), or a prefix (`Am Markt`, `An der Alster`, `Unter den Linden`), then a house
  number (`12`, `12a`, `12-14`);
- French: a house number (`12`, `12 bis`), a street type (`rue`, `avenue`, `boulevard`,
  `place`, `allée`, `impasse`, `chemin`, `quai` ...) and its name (`de Rivoli`,
  `Victor Hugo`, `du Faubourg Saint-Honoré`);
- Spanish and Italian: a street type (`Calle`, `C/`, `Avenida`, `Plaza`, `Paseo`,
  `Carrer`, `Via`, `Viale`, `Piazza`, `Corso`, `Largo`, `Vicolo` ...), its name, and a
  house number (`5`, `nº 5`, `5, 2º B`, `10/A`).

A street name without a house number is not taken: "Via Roma" or "Hauptstraße" alone
name a place the way "Elm Street" does.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

__all__ = ["find_addresses", "find_names", "mask_address"]

_NAMES_FILE = Path(__file__).with_name("given_names_eu.txt")

_UP = "A-ZÀ-ÖØ-Þ"
_LOW = "a-zß-öø-ÿ"
# A capitalised word: "Schulz", "Müller", "García", "D'Angelo", "Saint-Étienne".
_CAPW = rf"[{_UP}][{_LOW}]+(?:['’-][{_UP}][{_LOW}]+)*"
_NAME_PARTICLES = (
    r"(?:von der|von|van der|van|vom|zu|de la|de los|del|della|delle|de|di|da|dos|du|la|le|y)"
)
_NAME = rf"{_CAPW}(?:\s+(?:{_NAME_PARTICLES}\s+)?{_CAPW}){{0,2}}"
_AFTER = rf"(?![{_UP}{_LOW}0-9])"

_CUES = (
    # de
    r"[Ii]ch hei(?:ß|ss)e|[Mm]ein Name ist|[Mm]ein Name lautet|[Ii]ch bin (?:der|die)|"
    r"Herr|Frau|Hr\.|Fr\.|"
    r"(?:[Mm]ein|[Mm]eine|[Uu]nser|[Uu]nsere) (?:Mann|Frau|Sohn|Tochter|Mutter|Vater|"
    r"Schwester|Bruder|Freund|Freundin|Kollege|Kollegin|Nachbar|Nachbarin|Chef|Chefin|"
    r"Oma|Opa|Tante|Onkel|Partner|Partnerin)|"
    # fr
    r"[Jj]e m['’]appelle|[Mm]on nom est|[Mm]oi,? c['’]est|Monsieur|Madame|Mademoiselle|"
    r"M\.|Mme|Mlle|"
    r"(?:[Mm]a|[Mm]on|[Nn]otre) (?:femme|mari|fille|fils|mère|père|sœur|soeur|frère|ami|"
    r"amie|copain|copine|collègue|voisin|voisine|patron|patronne|grand-mère|grand-père|"
    r"tante|oncle|compagnon|compagne)|"
    # es
    r"[Mm]e llamo|[Mm]i nombre es|[Ss]oy|Sr\.|Sra\.|Srta\.|Don|Doña|[Ss]eñor|[Ss]eñora|"
    r"[Mm]i (?:esposa|esposo|mujer|marido|hija|hijo|madre|padre|hermana|hermano|amigo|amiga|"
    r"novio|novia|compañero|compañera|vecino|vecina|jefe|jefa|abuela|abuelo|tía|tío|"
    r"pareja)|"
    # it
    r"[Mm]i chiamo|[Ii]l mio nome è|[Ss]ono|Sig\.(?:ra)?|[Ss]ignor|[Ss]ignora|[Dd]ott\.(?:ssa)?|"
    r"(?:[Mm]ia|[Mm]io|[Ii]l mio|[Ll]a mia) (?:moglie|marito|figlia|figlio|madre|padre|"
    r"sorella|fratello|amico|amica|collega|vicino|vicina|capo|nonna|nonno|zia|zio|"
    r"fidanzato|fidanzata|compagno|compagna)"
)
_CUE_RE = re.compile(rf"(?<![{_UP}{_LOW}])(?:{_CUES}),?\s+(?P<name>{_NAME}){_AFTER}")
_WORD_RE = re.compile(rf"(?<![{_UP}{_LOW}0-9'’-]){_CAPW}{_AFTER}")
_PAIR_RE = re.compile(
    rf"(?<![{_UP}{_LOW}0-9'’-])(?=(?P<first>{_CAPW})\s+(?P<second>{_CAPW}){_AFTER})"
)
_SURNAME_RE = re.compile(rf"\s+(?:{_NAME_PARTICLES}\s+)?({_CAPW}){_AFTER}")

# Capitalised words after a cue or a given name that are no name: greetings, days,
# months, nationalities, pronouns, nouns that start a sentence.
_NOT_NAME_WORDS = """
    Ja Nein Danke Hallo Guten Tag Morgen Abend Montag Dienstag Mittwoch Donnerstag Freitag
    Samstag Sonntag Januar Februar März April Mai Juni Juli August September Oktober
    November Dezember Deutscher Deutsche Österreicher Schweizer Ich Du Er Sie Wir Ihr Und
    Oui Non Merci Bonjour Salut Lundi Mardi Mercredi Jeudi Vendredi Samedi Dimanche Janvier
    Février Mars Avril Juin Juillet Août Septembre Octobre Novembre Décembre Français
    Française Je Tu Il Elle Nous Vous Et Le La Les Un Une Sí Gracias Hola Lunes Martes
    Miércoles Jueves Viernes Sábado Domingo Enero Febrero Marzo Abril Mayo Junio Julio
    Agosto Septiembre Octubre Noviembre Diciembre Español Española Yo Él Ella Nosotros El
    Los Las Grazie Ciao Buongiorno Lunedì Martedì Mercoledì Giovedì Venerdì Sabato Domenica
    Gennaio Febbraio Aprile Maggio Giugno Luglio Settembre Ottobre Dicembre Italiano
    Italiana Io Lui Lei Noi Voi Gli Die Der Das Den Dem Des Ein Eine Mit Von Bei Für Avec
    Chez Pour Con Para Por Per Ieri Ayer Hier Gestern Heute Aujourd Hoy Oggi Street Straße
    Strasse Rue Avenue Calle Via Piazza Plaza
"""
_NOT_NAMES = frozenset(_NOT_NAME_WORDS.split())

_DE_SUFFIX = (
    r"stra(?:ß|ss)e|str\.|weg|platz|allee|gasse|ring|damm|ufer|chaussee|steig|pfad|markt|"
    r"graben|kamp|stieg|wall|zeile|promenade|berg|hof|brücke|tor|feld|garten|anger|höhe"
)
_DE_STREET = (
    rf"(?:(?P<de_name>[{_UP}][{_LOW}]+(?:-[{_UP}]?[{_LOW}]+)*-?)(?P<de_suffix>(?i:{_DE_SUFFIX}))"
    rf"|(?P<de_adj>[{_UP}][{_LOW}]+(?:er|e|es))\s+(?P<de_word>Stra(?:ß|ss)e|Str\.|Weg|Platz|"
    r"Allee|Gasse|Ring|Damm|Ufer|Chaussee|Landstra(?:ß|ss)e|Steig|Pfad|Markt)"
    rf"|(?P<de_prefix>Am|An der|An den|Auf der|Auf dem|Im|In der|In den|Unter den|Zum|Zur|"
    rf"Hinter der|Vor dem)\s+(?P<de_place>{_CAPW}))"
)
_HOUSE = r"\d{1,4}(?:\s?[a-zA-Z])?(?:\s?[-/]\s?\d{1,4}[a-zA-Z]?)?"
_CITY = rf"{_CAPW}(?:\s(?:am|an der|im|in der|bei|de|del|di|sur|en)\s{_CAPW}|[ -]{_CAPW})?"
_POSTAL = (
    rf"(?:,?\s*(?P<post>(?:[A-Z]-)?\d{{4,5}})\s+(?P<city>{_CITY})"
    r"(?:\s*\(?[A-Z]{2}\)?(?![A-Za-z]))?(?:\s+CEDEX)?)?"
)
_DE_RE = re.compile(rf"(?<![{_UP}{_LOW}0-9-]){_DE_STREET}\s+(?P<num>{_HOUSE}){_AFTER}{_POSTAL}")

_FR_TYPE = (
    r"[Rr]ue|[Aa]venue|[Aa]v\.|[Bb]oulevard|[Bb]d|[Pp]lace|[Aa]llée|[Ii]mpasse|[Cc]hemin|"
    r"[Qq]uai|[Cc]ours|[Rr]oute|[Pp]assage|[Ss]quare|[Ee]splanade|[Ff]aubourg|[Vv]illa|"
    r"[Ss]entier|[Cc]ité|[Rr]ésidence|[Rr]ond-[Pp]oint|[Pp]romenade|[Mm]ontée"
)
_FR_PARTICLES = r"(?:de la|de l['’]|de|du|des|d['’]|la|le|les|l['’]|aux|au|sur|en|et|à)"
_FR_RE = re.compile(
    rf"(?<![{_UP}{_LOW}0-9])(?P<num>\d{{1,4}}(?:\s?(?:bis|ter|quater|[A-D]))?),?\s+"
    rf"(?P<fr_type>{_FR_TYPE})\s+"
    rf"(?P<fr_name>(?:{_FR_PARTICLES}\s*)*(?:{_CAPW}|\d{{1,2}})"
    rf"(?:\s+(?:{_FR_PARTICLES}\s*)*{_CAPW}){{0,3}}){_AFTER}{_POSTAL}"
)

_ES_IT_TYPE = (
    # es (and Catalan)
    r"Calle|C/|Avenida|Avda\.|Av\.|Plaza|Pza\.|Paseo|Pº|Camino|Carretera|Ctra\.|Ronda|"
    r"Travesía|Glorieta|Rambla|Carrer|Passeig|Plaça|Callejón|Bulevar|Cuesta|Pasaje|"
    # it
    r"Via|V\.|Viale|V\.le|Piazza|P\.zza|Piazzale|Corso|C\.so|Largo|Vicolo|Strada|Contrada|"
    r"Lungomare|Lungotevere|Borgo|Salita|Galleria|Fondamenta|Località|Loc\."
)
_ES_IT_PARTICLES = (
    r"(?:de la|de los|de las|del|de|la|las|los|el|y|i|dels|d['’]|l['’]|"
    r"della|delle|dei|degli|dello|dell['’]|di|da|al|alla|ai|alle)"
)
_ES_IT_RE = re.compile(
    rf"(?<![{_UP}{_LOW}0-9])(?P<es_type>{_ES_IT_TYPE})\s*"
    rf"(?P<es_name>(?:{_ES_IT_PARTICLES}\s*)*(?:{_CAPW}|[IVXL]+|\d{{1,2}})"
    rf"(?:\s+(?:{_ES_IT_PARTICLES}\s*)*(?:{_CAPW}|[IVXL]+)){{0,3}})"
    r",?\s+(?:n(?:[º°o.]|um\.)\s*)?(?P<num>\d{1,4}(?:\s?[a-zA-Z](?![a-zA-Z]))?(?:/[A-Za-z0-9]+)?)"
    r"(?:,?\s*\d{1,2}\s?[º°ª]\s*(?:[A-Z](?![a-zA-Z]))?)?"
    rf"{_AFTER}{_POSTAL}"
)

_ADDRESS_RES = (_DE_RE, _FR_RE, _ES_IT_RE)
# The groups whose letters the mask hides: the street's own name (its type and suffix,
# particles and the city stay visible).
_NAME_GROUPS = ("de_name", "de_adj", "de_place", "fr_name", "es_name")


@cache
def _name_lists() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(given names, given names that are also common words, surnames) of every
    language in the list file (the surnames follow its `# surnames` line)."""
    plain: set[str] = set()
    ambiguous: set[str] = set()
    surnames: set[str] = set()
    into = plain
    for line in _NAMES_FILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("# surnames"):
            into = surnames
        if line.startswith("#"):
            continue
        for word in line.split():
            if word.startswith("?"):
                ambiguous.add(word[1:])
            else:
                into.add(word)
    return frozenset(plain - ambiguous), frozenset(ambiguous), frozenset(surnames)


def find_names(text: str) -> list[tuple[int, int]]:
    """Spans of German, French, Spanish and Italian person names in `text`."""
    plain, ambiguous, surnames = _name_lists()
    found: list[tuple[int, int]] = []
    for m in _CUE_RE.finditer(text):
        words = m.group("name").split()
        if words[0] in _NOT_NAMES:
            continue
        end = m.start("name") + len(words[0])
        rest = m.group("name")[len(words[0]) :]
        surname = _SURNAME_RE.match(rest)
        if surname is not None and surname.group(1) not in _NOT_NAMES:
            end = m.end("name")
        found.append((m.start("name"), end))
    for m in _WORD_RE.finditer(text):
        word = m.group()
        if word not in plain and word not in ambiguous:
            continue
        if any(a <= m.start() < b for a, b in found):
            continue
        end, has_surname = _with_surname(text, m.end())
        if word in ambiguous and not has_surname:
            continue
        found.append((m.start(), end))
    for m in _PAIR_RE.finditer(text):
        # Any capitalised word before a known surname: "Wiebke Schäfer".
        first, second = m.group("first"), m.group("second")
        if second not in surnames or first in _NOT_NAMES or first in surnames:
            continue
        start, end = m.start("first"), m.end("second")
        if all(end <= a or start >= b for a, b in found):
            found.append((start, end))
    return found


def _with_surname(text: str, end: int) -> tuple[int, bool]:
    """Where a name starting before `end` ends: after a capitalised surname (one or two,
    "García López"), if one follows."""
    found = False
    for _ in range(2):
        m = _SURNAME_RE.match(text, end)
        if m is None or m.group(1) in _NOT_NAMES:
            break
        end, found = m.end(), True
    return end, found


def find_addresses(text: str) -> list[tuple[int, int]]:
    """Spans of German, French, Spanish and Italian street addresses in `text`."""
    found: list[tuple[int, int]] = []
    for pattern in _ADDRESS_RES:
        for m in pattern.finditer(text):
            if all(m.end() <= a or m.start() >= b for a, b in found):
                found.append((m.start(), m.end()))
    return found


def mask_address(value: str) -> str | None:
    """The address with its digits and the letters of its street name hidden (the
    street type or suffix, particles and the city stay): `Hauptstraße 12, 10115 Berlin`
    -> `*****straße **, ***** Berlin`. None when `value` is no address of these languages.
    """
    for pattern in _ADDRESS_RES:
        m = pattern.search(value)
        if m is None:
            continue
        hidden: set[int] = set()
        for group in _NAME_GROUPS:
            if group in pattern.groupindex and m.group(group) is not None:
                start = m.start(group)
                for word in re.finditer(rf"[{_UP}][\w'’-]*", m.group(group)):
                    hidden.update(range(start + word.start(), start + word.end()))
        return "".join(
            "*" if ch.isdigit() or (ch.isalpha() and i in hidden) else ch
            for i, ch in enumerate(value)
        )
    return None
