"""Country names for the phone-number regions phonenumbers knows (the import's default-country picker).
The names come from phonenumbers' own locale table (Java's, English); a few it lacks or has outdated are
given here."""
import functools
import unicodedata

import phonenumbers
from phonenumbers.geodata.locale import LOCALE_DATA

NAMES = {"AC": "Ascension Island", "TA": "Tristan da Cunha", "XK": "Kosovo", "MK": "North Macedonia",
         "SZ": "Eswatini", "CZ": "Czechia", "TR": "Türkiye"}


def country_name(region, lang="en"):
    """The region's name in English (its code when no name is known). An entry "*xx" in LOCALE_DATA means
    "as in language xx"."""
    if region in NAMES:
        return NAMES[region]
    names = LOCALE_DATA.get(region, {})
    name = names.get(lang, "")
    if name.startswith("*"):
        name = names.get(name[1:], "")
    return name or region


@functools.cache
def region_choices():
    """(code, label) of every region phonenumbers knows, e.g. ("CH", "Switzerland +41"), sorted by name."""
    choices = [(code, f"{country_name(code)} +{phonenumbers.country_code_for_region(code)}")
               for code in phonenumbers.SUPPORTED_REGIONS]
    return sorted(choices, key=lambda choice: _sort_key(choice[1]))


def _sort_key(name):
    """Åland Islands among the A's."""
    return unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().casefold()
