"""Country names for the phone-number regions phonenumbers knows (the import's default-country picker).
The names come from phonenumbers' own locale table (Java's, English); a few it lacks or has outdated are
given here."""
from __future__ import annotations

import functools
import importlib.util
import unicodedata
from pathlib import Path

import phonenumbers

NAMES = {"AC": "Ascension Island", "TA": "Tristan da Cunha", "XK": "Kosovo", "MK": "North Macedonia",
         "SZ": "Eswatini", "CZ": "Czechia", "TR": "Türkiye"}


@functools.cache
def _locale_names(lang: str) -> dict[str, str]:
    """{region: its name in lang} from phonenumbers' locale table (an entry "*xx" there means "as in language
    xx"). The table's module is run from its file alone, and only the names kept: importing
    phonenumbers.geodata.locale runs the geodata package first, which loads every geocoding table (~100 MB for
    the process's life; the server's peak RSS goal is 150 MB)."""
    spec = importlib.util.spec_from_file_location(
        "phonenumbers.geodata.locale", Path(phonenumbers.__file__).parent / "geodata" / "locale.py")
    table = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]  # not in sys.modules: nothing keeps the whole table
    spec.loader.exec_module(table)  # type: ignore[union-attr]
    names = {}
    for region, by_lang in table.LOCALE_DATA.items():
        name = by_lang.get(lang, "")
        names[region] = by_lang.get(name[1:], "") if name.startswith("*") else name
    return names


def country_name(region: str, lang: str = "en") -> str:
    """The region's name in English (its code when no name is known)."""
    if region in NAMES:
        return NAMES[region]
    return _locale_names(lang).get(region) or region


@functools.cache
def region_choices() -> list[tuple[str, str]]:
    """(code, label) of every region phonenumbers knows, e.g. ("CH", "Switzerland +41"), sorted by name."""
    choices = [(code, f"{country_name(code)} +{phonenumbers.country_code_for_region(code)}")
               for code in phonenumbers.SUPPORTED_REGIONS]
    return sorted(choices, key=lambda choice: _sort_key(choice[1]))


def _sort_key(name: str) -> str:
    """Åland Islands among the A's."""
    return unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().casefold()
