"""Writes tests/data/pii_eu.yaml: the labelled German, French, Spanish and Italian set.

    .venv/bin/python tests/data/pii_eu_make.py > tests/data/pii_eu.yaml

How the set is built (said in the file's header too): street names, postcodes and
cities, given names and surnames of each country, and sentence templates, combined with
a fixed seed. None of these streets, surnames or templates was used while writing
`reference/pii/european.py` (the patterns were written against the tuning examples in
tests/test_pii_eu.py). The given names and most surnames are popular ones, so most
of them are in `given_names_eu.txt` by construction; each language also has given
names that are not in it, and surnames that are not in its surname part (the last four
of each list); a name with neither is found only through a cue, or not at all.
Negatives are sentences with numbers and capitalised words and nothing personal.
"""

from __future__ import annotations

import json
import random

STREETS = {
    "de": [
        "Schillerstraße",
        "Goethestr.",
        "Bahnhofstraße",
        "Mozartweg",
        "Rosenweg",
        "Birkenallee",
        "Kirchgasse",
        "Bismarckring",
        "Uferdamm",
        "Eichendorffstraße",
        "Kastanienallee",
        "Friedrich-Ebert-Straße",
        "Am Sandtorkai",
        "Unter den Eichen",
        "Hamburger Straße",
        "Kölner Weg",
        "Lessingplatz",
        "Mühlgraben",
        "Domhof",
        "Sonnenstrasse",
    ],
    "fr": [
        "rue des Lilas",
        "avenue Jean Jaurès",
        "boulevard Haussmann",
        "place Bellecour",
        "allée des Tilleuls",
        "impasse du Moulin",
        "chemin de la Croix",
        "quai de la Tournelle",
        "rue Nationale",
        "rue du Faubourg Saint-Antoine",
        "avenue de la République",
        "rue Victor Hugo",
        "boulevard de la Liberté",
        "cours Mirabeau",
        "rue Sainte-Catherine",
        "route de Lyon",
        "passage Brady",
        "rue de la Paix",
        "avenue Foch",
        "place du Marché",
    ],
    "es": [
        "Calle Mayor",
        "Avenida de la Constitución",
        "Plaza Mayor",
        "Paseo de Gracia",
        "C/ Alcalá",
        "Calle del Príncipe",
        "Carrer de Balmes",
        "Avenida de América",
        "Calle Serrano",
        "Calle de Toledo",
        "Paseo de la Castellana",
        "Ronda de Valencia",
        "Calle San Vicente",
        "Avenida Diagonal",
        "Plaza de España",
        "Calle Real",
        "Rambla de Catalunya",
        "Calle de la Luna",
        "Avenida del Puerto",
        "Camino de Ronda",
    ],
    "it": [
        "Via Garibaldi",
        "Viale dei Mille",
        "Piazza del Popolo",
        "Corso Buenos Aires",
        "Via XX Settembre",
        "Largo Argentina",
        "Vicolo del Cinque",
        "Via San Domenico",
        "Via Mazzini",
        "Corso Italia",
        "Via dei Condotti",
        "Piazza della Signoria",
        "Via Manzoni",
        "Viale Europa",
        "Via Nazionale",
        "Via Dante",
        "Borgo Pinti",
        "Via della Spiga",
        "Lungomare Caracciolo",
        "Via Cavour",
    ],
}
CITIES = {
    "de": [
        "80331 München",
        "20095 Hamburg",
        "50667 Köln",
        "60311 Frankfurt am Main",
        "70173 Stuttgart",
        "40213 Düsseldorf",
        "01067 Dresden",
        "30159 Hannover",
        "90402 Nürnberg",
        "28195 Bremen",
    ],
    "fr": [
        "69003 Lyon",
        "31000 Toulouse",
        "75009 Paris",
        "44000 Nantes",
        "33000 Bordeaux",
        "13100 Aix-en-Provence",
        "59000 Lille",
        "67000 Strasbourg",
        "06000 Nice",
        "35000 Rennes",
    ],
    "es": [
        "28013 Madrid",
        "08007 Barcelona",
        "46002 Valencia",
        "41001 Sevilla",
        "50001 Zaragoza",
        "29001 Málaga",
        "48001 Bilbao",
        "15001 A Coruña",
        "03001 Alicante",
        "18001 Granada",
    ],
    "it": [
        "20121 Milano",
        "50131 Firenze",
        "00187 Roma",
        "16121 Genova",
        "40124 Bologna",
        "10121 Torino",
        "80132 Napoli",
        "30124 Venezia",
        "90133 Palermo",
        "37121 Verona",
    ],
}
ADDRESS_TEMPLATES = {
    "de": [
        "Meine neue Adresse ist {a}.",
        "Bitte schicken Sie das Paket an {a}.",
        "Wir wohnen jetzt in der {a}.",
        "Lieferung an {a}, bitte zweimal klingeln.",
        "Ich bin umgezogen, jetzt {a}.",
    ],
    "fr": [
        "Mon adresse est le {a}.",
        "Livrez au {a}, s'il vous plaît.",
        "J'habite au {a}.",
        "Envoyez la facture au {a}.",
        "Notre nouveau bureau: {a}.",
    ],
    "es": [
        "Mi dirección es {a}.",
        "Envíalo a {a}, por favor.",
        "Vivo en {a}.",
        "La entrega es en {a}.",
        "Nos mudamos a {a} el mes pasado.",
    ],
    "it": [
        "Il mio indirizzo è {a}.",
        "Spedisci il pacco a {a}, grazie.",
        "Abito in {a}.",
        "La consegna va fatta in {a}.",
        "Ci siamo trasferiti in {a}.",
    ],
}
GIVEN = {
    "de": [
        "Anna",
        "Lukas",
        "Sabine",
        "Jonas",
        "Katharina",
        "Stefan",
        "Lena",
        "Matthias",
        "Mechthild",
        "Wiebke",
        "Hinnerk",
        "Gesa",
        "Malte",
        "Frauke",
    ],
    "fr": [
        "Camille",
        "Julien",
        "Isabelle",
        "Nicolas",
        "Manon",
        "Pierre",
        "Chloé",
        "Mathieu",
        "Ghislaine",
        "Aymeric",
        "Solène",
        "Gaspard",
        "Bérénice",
        "Anatole",
    ],
    "es": [
        "Lucía",
        "Javier",
        "Carmen",
        "Pablo",
        "Elena",
        "Sergio",
        "Marta",
        "Alejandro",
        "Iker",
        "Ainhoa",
        "Leire",
        "Aitana",
        "Íñigo",
        "Begoña",
    ],
    "it": [
        "Giulia",
        "Marco",
        "Francesca",
        "Luca",
        "Chiara",
        "Matteo",
        "Sara",
        "Davide",
        "Ottavio",
        "Brunella",
        "Gualtiero",
        "Ornella",
        "Corrado",
        "Assunta",
    ],
}
SURNAMES = {
    "de": [
        "Müller",
        "Schmidt",
        "Schneider",
        "Fischer",
        "Weber",
        "Meyer",
        "Wagner",
        "Becker",
        "Hoffmann",
        "Schäfer",
        "Koch",
        "Bauer",
        "Richter",
        "Klein",
        "Zimmermann",
        "Krüger",
        "Ostendorf",
        "Tiedemann",
        "Hinrichsen",
        "Wübbeling",
    ],
    "fr": [
        "Martin",
        "Bernard",
        "Dubois",
        "Durand",
        "Leroy",
        "Moreau",
        "Lefebvre",
        "Girard",
        "Mercier",
        "Dupont",
        "Lambert",
        "Bonnet",
        "Fournier",
        "Rousseau",
        "Chevalier",
        "Lemaire",
        "Kerjean",
        "Delacourt",
        "Marchais",
        "Peyrefitte",
    ],
    "es": [
        "García",
        "Fernández",
        "González",
        "Rodríguez",
        "López",
        "Martínez",
        "Sánchez",
        "Pérez",
        "Gómez",
        "Jiménez",
        "Ruiz",
        "Hernández",
        "Moreno",
        "Álvarez",
        "Navarro",
        "Castillo",
        "Echeverría",
        "Urquiza",
        "Zubizarreta",
        "Olazábal",
    ],
    "it": [
        "Rossi",
        "Russo",
        "Ferrari",
        "Esposito",
        "Bianchi",
        "Romano",
        "Colombo",
        "Ricci",
        "Marino",
        "Greco",
        "Gallo",
        "Conti",
        "Mancini",
        "Costa",
        "Giordano",
        "Lombardi",
        "Tagliaferri",
        "Scognamiglio",
        "Buonocore",
        "Pettinari",
    ],
}
# {n}: given name and surname; {g}: given name alone; {s}: surname alone.
NAME_TEMPLATES = {
    "de": [
        "Ich heiße {n}.",
        "Mein Name ist {n}.",
        "Das ist meine Frau {g}.",
        "Frau {s} hat heute angerufen.",
        "Herr {s} kommt morgen vorbei.",
        "{n} hat mir gestern geschrieben.",
        "Gestern war ich mit {n} im Kino.",
        "Mein Bruder {g} zieht nach Hamburg.",
    ],
    "fr": [
        "Je m'appelle {n}.",
        "Mon nom est {n}.",
        "Ma sœur {g} arrive demain.",
        "Madame {s} a appelé ce matin.",
        "M. {s} est en retard.",
        "{n} m'a écrit hier soir.",
        "Hier j'ai dîné avec {n}.",
        "Mon voisin {g} part en vacances.",
    ],
    "es": [
        "Me llamo {n}.",
        "Mi nombre es {n}.",
        "Mi hermana {g} llega mañana.",
        "La señora {s} llamó esta mañana.",
        "El Sr. {s} llega tarde.",
        "{n} me escribió ayer.",
        "Ayer cené con {n}.",
        "Mi vecino {g} se va de viaje.",
    ],
    "it": [
        "Mi chiamo {n}.",
        "Il mio nome è {n}.",
        "Mia sorella {g} arriva domani.",
        "La signora {s} ha chiamato stamattina.",
        "Il dott. {s} è in ritardo.",
        "{n} mi ha scritto ieri.",
        "Ieri sono uscito con {n}.",
        "Mio fratello {g} parte per Milano.",
    ],
}
NEGATIVES = {
    "de": [
        "Ich habe 12 Äpfel gekauft.",
        "Der Zug fährt um 10 Uhr ab.",
        "Die Berliner Mauer fiel 1989.",
        "Wir treffen uns am Bahnhof.",
        "Der Weg ist 5 Kilometer lang.",
        "Das Spiel endete 2 zu 1.",
        "Bitte bestellen Sie 3 Pakete Kaffee.",
        "Im Sommer fahren wir an die Ostsee.",
        "Die Rechnung über 250 Euro ist bezahlt.",
        "Mein Handy hat 128 GB Speicher.",
        "Kapitel 7 ist das spannendste.",
        "Am Montag ist der Laden geschlossen.",
        "Die Temperatur liegt bei 25 Grad.",
        "Der Marktplatz ist heute voll.",
        "Ich lese gerade Faust von Goethe.",
        "Bestellung Nummer 4711 ist unterwegs.",
        "Unser Team hat 3 neue Kollegen.",
        "Die Straße ist wegen Bauarbeiten gesperrt.",
        "Der Film dauert 2 Stunden.",
        "Wir brauchen 4 Stühle für den Garten.",
    ],
    "fr": [
        "J'ai acheté 3 baguettes.",
        "Le train part à 8 heures.",
        "La Place de la Concorde est magnifique.",
        "Il fait 25 degrés à Paris.",
        "Le match s'est terminé 2 à 0.",
        "Commande numéro 5521 expédiée.",
        "Nous sommes 4 pour le dîner.",
        "La Tour Eiffel mesure 330 mètres.",
        "Le chapitre 9 est passionnant.",
        "Je lis Les Misérables en ce moment.",
        "Lundi le magasin est fermé.",
        "Il reste 2 places dans le bus.",
        "La facture de 120 euros est payée.",
        "Mon téléphone a 64 Go de mémoire.",
        "La rue est barrée à cause des travaux.",
        "Le film dure 2 heures.",
        "Nous avons visité le Louvre hier.",
        "Ajoutez 3 œufs à la pâte.",
        "Le vol AF 1234 est en retard.",
        "Il y a 7 jours dans une semaine.",
    ],
    "es": [
        "Compré 2 kilos de naranjas.",
        "El partido empieza a las 9.",
        "Madrid tiene 3 millones de habitantes.",
        "Nos vemos en la Plaza a las 5.",
        "El pedido 8812 ya salió.",
        "Somos 6 para la cena.",
        "La Sagrada Familia es impresionante.",
        "El capítulo 4 es el mejor.",
        "Hace 30 grados en Sevilla.",
        "El lunes la tienda está cerrada.",
        "Quedan 2 entradas para el concierto.",
        "La factura de 90 euros está pagada.",
        "Estoy leyendo Cien Años de Soledad.",
        "La calle está cortada por obras.",
        "La película dura 2 horas.",
        "Añade 3 huevos a la mezcla.",
        "El vuelo IB 3170 llega tarde.",
        "Tengo 2 gatos y un perro.",
        "El Real Madrid ganó 3 a 1.",
        "Necesitamos 5 sillas más.",
    ],
    "it": [
        "Ho comprato 4 pizze.",
        "Il treno parte alle 7.",
        "Via libera al progetto per il 2024.",
        "Piazza Affari ha chiuso in rialzo.",
        "Siamo in 5 a cena.",
        "L'ordine 3390 è stato spedito.",
        "Il Colosseo è bellissimo di sera.",
        "Il capitolo 6 è il migliore.",
        "Ci sono 35 gradi a Palermo.",
        "Il lunedì il negozio è chiuso.",
        "Restano 2 posti sul pullman.",
        "La fattura di 80 euro è pagata.",
        "Sto leggendo I Promessi Sposi.",
        "La strada è chiusa per lavori.",
        "Il film dura 2 ore.",
        "Aggiungi 3 uova all'impasto.",
        "Il volo AZ 610 è in ritardo.",
        "Ho 2 gatti e un cane.",
        "La Juventus ha vinto 2 a 0.",
        "Servono 6 sedie in più.",
    ],
}


def _address(rng: random.Random, lang: str, street: str, with_city: bool) -> str:
    number = str(rng.randint(1, 180))
    if lang == "fr":
        core = f"{number} {street}"
    elif lang in ("de", "es", "it"):
        core = f"{street} {number}"
    city = rng.choice(CITIES[lang])
    return f"{core}, {city}" if with_city else core


def entries(lang: str) -> list[dict[str, object]]:
    rng = random.Random(f"pii-eu-{lang}")
    out: list[dict[str, object]] = []
    for i in range(50):
        street = STREETS[lang][i % len(STREETS[lang])]
        value = _address(rng, lang, street, with_city=i % 5 != 4)
        text = ADDRESS_TEMPLATES[lang][i % len(ADDRESS_TEMPLATES[lang])].format(a=value)
        out.append({"lang": lang, "text": text, "pii": [{"value": value, "kind": "address"}]})
    for i in range(50):
        template = NAME_TEMPLATES[lang][i % len(NAME_TEMPLATES[lang])]
        given = GIVEN[lang][rng.randrange(len(GIVEN[lang]))]
        surname = SURNAMES[lang][rng.randrange(len(SURNAMES[lang]))]
        value = (
            given if "{g}" in template else surname if "{s}" in template else f"{given} {surname}"
        )
        text = template.format(n=value, g=value, s=value)
        out.append({"lang": lang, "text": text, "pii": [{"value": value, "kind": "name"}]})
    out += [{"lang": lang, "text": text} for text in NEGATIVES[lang]]
    return out


def main() -> None:
    print("# German, French, Spanish and Italian utterances for the PII detector, labelled:")
    print("# 50 addresses, 50 names and 20 sentences without PII per language. Written by")
    print("# tests/data/pii_eu_make.py (its docstring says how: none of its streets, surnames")
    print("# or templates was used to write reference/pii/european.py). Same format as")
    print("# pii_labelled.yaml, with `lang`.")
    for lang in ("de", "fr", "es", "it"):
        for entry in entries(lang):
            print("- " + json.dumps(entry, ensure_ascii=False))


if __name__ == "__main__":
    main()
