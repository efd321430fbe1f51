"""The README is a short front door and docs/ holds the rest (issue 26): the README's length, links that
resolve inside the repository (files and their headings), the settings table generated from settings.py,
and every `parley …` command of the shell blocks accepted by the real parser and by its --help."""
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

import parley_cli
import settings as settings_module
from scripts import settings_table
from settings import Settings
from tests.parley_process import parley_command

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md", ROOT / "bench" / "HISTORY.md"]
OPERATIONS = ROOT / "docs" / "operations.md"


def test_the_readme_is_a_front_door_of_at_most_300_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines"
    for heading in ("## Two commands", "## The first fifteen minutes", "## Where to go next"):
        assert heading in lines


def test_the_docs_exist_and_the_readme_links_each():
    text = README.read_text()
    for name in ("guide", "api", "operations", "architecture"):
        assert (ROOT / "docs" / f"{name}.md").is_file()
        assert f"(docs/{name}.md)" in text, f"README does not link docs/{name}.md"
    assert "(bench/README.md)" in text


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path):
    """The markdown links and images of a file, outside code blocks."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves_inside_the_repository(path):
    assert "../" + "shared" not in path.read_text(), f"{path.name} names a file outside the repository"
    for link in links(path):
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        resolved = (path.parent / target).resolve() if target else path
        assert resolved.is_relative_to(ROOT), f"{path.name}: {link} leaves the repository"
        assert resolved.exists(), f"{path.name}: {link} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{path.name}: {link}: no such heading"


def test_the_settings_table_is_generated_from_settings_py():
    """docs/operations.md carries exactly what scripts/settings_table.py writes (run it after changing
    settings.py), so every setting is listed with its flag, variable, default and help text."""
    text = OPERATIONS.read_text()
    assert text == settings_table.render(text), "run: .venv/bin/python scripts/settings_table.py"
    for name, field in Settings.model_fields.items():
        assert f"| `{settings_module.flag(name)}` | `{settings_module.env_name(name)}` |" in text
        assert field.description in text


def test_the_generated_table_changes_with_a_setting(monkeypatch):
    """The comparison above can fail: a changed help text makes the file stale."""
    text = OPERATIONS.read_text()
    field = Settings.model_fields["port"]
    monkeypatch.setattr(field, "description", "A port, described otherwise.")
    assert settings_table.render(text) != text


def shell_commands():
    """(file, command line) for each `parley …`, `python server.py …` or `make run ARGS=…` line of the
    sh blocks of README.md and docs/, continuation lines joined."""
    found = []
    for path in DOCS:
        for block in re.findall(r"```sh\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\$\([^)]*\)", "X", line)  # $(date +%F) and the like: one word
                try:
                    words = shlex.split(line, comments=True)
                except ValueError:
                    continue
                if "make" in words and "run" in words:
                    args = next((w[5:] for w in words if w.startswith("ARGS=")), "")
                    found.append((path.name, ["serve", *shlex.split(args)]))
                for n, word in enumerate(words):
                    if word == "parley" or word.endswith("/parley") or word == "server.py":
                        found.append((path.name, words[n + 1:]))
                        break
    return found


def test_the_docs_show_every_command():
    shown = {args[0] for _, args in shell_commands() if args and not args[0].startswith("-")}
    assert {c.name for c in parley_cli.COMMANDS} <= shown


@pytest.mark.parametrize("where,args", shell_commands(), ids=lambda v: v if isinstance(v, str) else " ".join(v)[:60])
def test_each_command_of_the_docs_parses_as_written(where, args):
    parser = parley_cli.build_parser()
    try:
        parser.parse_args(args)
    except SystemExit as exc:
        if exc.code != 0:  # `parley --help` exits 0
            pytest.fail(f"{where}: `parley {' '.join(args)}` is refused by the parser")


def test_each_command_of_the_docs_answers_help():
    for name in sorted({args[0] for _, args in shell_commands() if args and not args[0].startswith("-")}):
        out = subprocess.run([*parley_command(), name, "--help"], capture_output=True, text=True, timeout=60,
                             cwd=ROOT)
        assert out.returncode == 0, f"parley {name} --help: {out.stderr}"
        assert "example:" in out.stdout


def api_routes():
    from handlers import routes
    patterns = [r[0] if isinstance(r, tuple) else r.regex.pattern for r in routes()]
    out = []
    for pattern in (p.rstrip("$") for p in patterns if p.startswith(("/v1/", "/incoming"))):
        choice = re.search(r"\((\w[\w-]*(?:\|[\w-]+)+)\)", pattern)  # (pause|resume|…): each its own path
        out += [pattern.replace(choice.group(0), c) for c in choice.group(1).split("|")] if choice else [pattern]
    return out


@pytest.mark.parametrize("pattern", api_routes())
def test_the_api_reference_names_every_endpoint(pattern):
    """docs/api.md has every API route (an id as {id}, $CONTACT or <sha256>), so a new endpoint needs its
    section there."""
    doc = re.escape(pattern).replace(re.escape("([^/]+)"), r"(\{\w+\}|\$\w+)")
    doc = doc.replace(re.escape("([0-9a-f]{64})"), r"<sha256>").replace(re.escape("\\."), r"\.")
    assert re.search(doc, (ROOT / "docs" / "api.md").read_text()), f"docs/api.md does not name {pattern}"


# The why lives in the repository (issue 42 §4): code cites docs/ files by anchor, never the design
# document or API spec a clone does not have.
CITING = [p for pattern in ("*.py", "handlers/**/*.py", "services/**/*.py", "storage/**/*.py", "storage/**/*.sql",
                            "common/**/*.py", "tests/**/*.py", "bench/**/*.py", "scripts/**/*.py", "templates/**/*.html",
                            "static/**/*.js", "docs/*.md", "bench/*.md", "README.md", ".ci/*", "Makefile")
          for p in ROOT.glob(pattern) if p.is_file() and ".venv" not in p.parts]
OUTSIDE = re.compile("DESIGN " + "§|spec " + "§|\\.\\./" + "shared")  # split so this file does not cite itself


def test_nothing_cites_a_document_outside_the_repository():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(set(CITING))
             for n, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert not found, f"cite docs/*.md#anchor instead: {found}"


def test_every_cited_docs_anchor_exists():
    cited = {(m[0], m[1]) for p in set(CITING) for m in re.findall(r"docs/([\w-]+\.md)#([\w-]+)", p.read_text())}
    assert len(cited) >= 8
    missing = sorted(f"docs/{name}#{anchor}" for name, anchor in cited
                     if not (ROOT / "docs" / name).exists() or anchor not in anchors(ROOT / "docs" / name))
    assert not missing, f"no such file or heading: {missing}"


def test_the_openapi_document_cites_no_document_a_user_lacks():
    """Users read /v1/openapi.json and /docs without the repository: their text points at nothing of ours."""
    from handlers import routes
    from handlers.openapi import build_document
    text = json.dumps(build_document(routes()))
    for citation in ("docs/design.md", "#api-decisions", "DESIGN", "§", "shared/"):
        assert citation not in text, f"/v1/openapi.json cites {citation!r}"


def test_the_architecture_diagram_names_every_background_task_of_services():
    """docs/architecture.md's "Processes and workers" lists what runs beside the handlers: a new worker in
    server.Services (SnoozeWaker, ReportsWorker and BotRecovery were missing) fails here until it is drawn."""
    import dataclasses

    import server
    diagram = (ROOT / "docs" / "architecture.md").read_text().split("## The live-event path")[0]
    kinds = [field.type for field in dataclasses.fields(server.Services) if isinstance(field.type, str)]
    tasks = [kind for kind in kinds if kind.endswith(("Worker", "Runner", "Waker", "Recovery", "Hub"))]
    assert len(tasks) >= 9, tasks
    missing = [kind for kind in tasks if f"│   {kind} " not in diagram]
    assert not missing, f"docs/architecture.md's diagram does not show {missing}"


def test_the_screenshots_script_imports():
    """`make screenshots` (docs/ images) is not run by the suite, so a helper it imports from tests/ could go
    away unnoticed (add_user_to_file did): importing it at least finds that."""
    import importlib
    importlib.import_module("scripts.screenshots")


def test_every_bench_scenario_imports():
    """`make bench` is not run by the suite: team_inbox imported add_user_to_file after tests/team_users.py had
    dropped it, and the whole bench failed to start. Importing each scenario (bench.scenarios.load) finds that."""
    from bench import scenarios
    assert len(scenarios.load()) == len(scenarios.MODULES)
