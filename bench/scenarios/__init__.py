"""Scenarios the feature issues add to `make bench`, beside the core phases in bench/run.py (whose measuring parts
are in bench/measure.py).

A scenario is a module listed in MODULES with:
    NAME      short name: its key in results["scenarios"], and what `--only NAME` selects
    run(ctx)  measures and returns a JSON-able dict (ctx: bench.measure.Context: a fresh data dir with an owner
              account, the wrk wrapper, servers, process stats; see its docstring)
    render(result) -> list of markdown lines for bench/README.md's table section
    goals(result)  -> list of bench.report.goal(...) dicts (an unmet goal is reported, never dropped)
"""
import importlib

MODULES = [
    "bench.scenarios.contact_import",
    "bench.scenarios.contacts_export",
    "bench.scenarios.campaigns",
    "bench.scenarios.retention",
    "bench.scenarios.bot",
    "bench.scenarios.bot_matching",
    "bench.scenarios.inbox",
    "bench.scenarios.team_inbox",
    "bench.scenarios.assignment",
    "bench.scenarios.compare",
    "bench.scenarios.postgres",
    "bench.scenarios.scale_out",
    "bench.scenarios.reports",
    "bench.scenarios.report_tenants",
    "bench.scenarios.event_stream",
    "bench.scenarios.bot_real_model",
    "bench.scenarios.search",
    "bench.scenarios.widget",
    "bench.scenarios.email_import",
    "bench.scenarios.email_load",
]


def load(selected=None):
    """The scenario modules, all or those whose NAME is in selected."""
    modules = [importlib.import_module(name) for name in MODULES]
    return [m for m in modules if selected is None or m.NAME in selected]
