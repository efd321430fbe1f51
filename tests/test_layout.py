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
