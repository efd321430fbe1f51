"""Settings: declared once, each a CLI flag and a PARLEY_* variable, all listed in docs/operations.md."""
import argparse
from pathlib import Path

import settings as settings_module
from settings import Settings

OPERATIONS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"


def test_the_docs_list_every_setting_with_flag_and_env():
    """(tests/test_docs.py checks that the table is the one scripts/settings_table.py writes.)"""
    text = OPERATIONS.read_text()
    for name in Settings.model_fields:
        assert settings_module.flag(name) in text, f"docs/operations.md does not list {settings_module.flag(name)}"
        assert settings_module.env_name(name) in text, f"docs/operations.md does not list {settings_module.env_name(name)}"


def test_every_setting_has_help_text():
    for name, field in Settings.model_fields.items():
        assert field.description, name


def _parse(argv):
    parser = argparse.ArgumentParser()
    settings_module.add_arguments(parser)
    return settings_module.from_namespace(parser.parse_args(argv))


def test_flags_env_and_defaults(monkeypatch):
    assert _parse([]).port == 8443 and _parse([]).rate_limit == 600
    monkeypatch.setenv("PARLEY_RATE_LIMIT", "42")
    monkeypatch.setenv("PARLEY_ALLOW_PRIVATE_WEBHOOKS", "true")
    s = _parse(["--port", "9443"])
    assert (s.port, s.rate_limit, s.allow_private_webhooks) == (9443, 42, True)
    assert _parse(["--rate-limit", "7"]).rate_limit == 7  # the flag wins over the variable
    assert _parse(["--no-allow-private-webhooks"]).allow_private_webhooks is False


def test_bad_values_are_refused():
    import pydantic
    import pytest
    with pytest.raises(pydantic.ValidationError):
        _parse(["--port", "70000"])
    with pytest.raises(pydantic.ValidationError):
        _parse(["--rate-limit", "0"])
