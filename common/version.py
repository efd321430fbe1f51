"""Parley's version: the installed package's (setup.cfg's `version`), for `parley --version`, GET /healthz,
the OpenAPI document and the pages' footer."""
import configparser
from importlib import metadata
from pathlib import Path


def _version() -> str:
    try:
        return metadata.version("parley")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        config = configparser.ConfigParser()
        config.read(Path(__file__).resolve().parent.parent / "setup.cfg")
        return config.get("metadata", "version", fallback="unknown")


VERSION = _version()
