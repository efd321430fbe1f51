"""The import page's default-country picker (services/regions.py): English names from phonenumbers' locale table,
without the geocoding tables that importing phonenumbers.geodata loads (~100 MB resident for the server's life,
against the 150 MB peak RSS goal in bench/README)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Every handler module imported (as the server's routes do), then the picker's choices built.
_PROBE = """
import importlib, json, pkgutil, sys
import handlers
for module in pkgutil.walk_packages(handlers.__path__, "handlers."):
    importlib.import_module(module.name)
from services import regions
choices = dict(regions.region_choices())
print(json.dumps({"geodata": sorted(m for m in sys.modules if m.startswith("phonenumbers.geodata")),
                  "count": len(choices), "CH": choices["CH"], "XK": choices["XK"], "AX": choices["AX"],
                  "first": [label for _, label in regions.region_choices()[:2]]}))
"""


def test_country_names_come_without_the_geocoding_tables():
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["geodata"] == []
    assert found["count"] > 200
    assert (found["CH"], found["XK"], found["AX"]) == ("Switzerland +41", "Kosovo +383", "Åland Islands +358")
    assert found["first"] == ["Afghanistan +93", "Åland Islands +358"]  # sorted by name, Å among the A's


def test_a_region_without_a_name_is_shown_by_its_code():
    from services import regions
    assert regions.country_name("ZZ") == "ZZ"
    assert regions.country_name("TR") == "Türkiye"
