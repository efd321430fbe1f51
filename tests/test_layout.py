"""House rules of docs/design.md#layout and §4, checked on the source: storage/ imports nothing from services/ or
handlers/, handlers reach storage only through services, and common/ imports nothing of Parley's."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "handlers", "services", "storage")


def parley_imports(path):
    """The top-level Parley packages a module imports (at any depth in the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(name.split(".")[0] for name in names if name.split(".")[0] in PACKAGES)
    return found


FORBIDDEN = {"storage": {"services", "handlers"}, "handlers": {"storage"},
             "common": {"handlers", "services", "storage"}, "services": {"handlers"}}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layers(package):
    offenders = {str(path.relative_to(ROOT)): sorted(parley_imports(path) & FORBIDDEN[package])
                 for path in sorted((ROOT / package).rglob("*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}


# A test module imports fixtures and helpers from helper modules (tests/*_helpers.py, tests/ui_fixtures.py,
# conftest), never from another test module (issue 42 §6): a change to one test file breaks no other.
def imports_a_test_module(path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # `from tests.test_x import y`, `from tests import test_x`
            names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(name.startswith("tests.test_") for name in names):
            return True
    return False


def test_no_test_module_imports_another():
    importing = sorted(path.stem for path in (ROOT / "tests").glob("*.py") if imports_a_test_module(path))
    assert importing == [], "import shared fixtures and helpers from a helper module instead"
