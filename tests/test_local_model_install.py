"""The local model's install check (issue 43 §14, scripts/local_model.py): llama-cpp-python built natively died with a
segmentation fault on its first token on a CPU reporting AMX and AVX-512; the install asks the build for one token in
a child process and, when the child crashes, rebuilds it portable and asks again. Real child processes stand in for
the build (one that kills itself with SIGSEGV as the crashed build did) and for pip (one that records its arguments
and CMAKE_ARGS): compiling llama.cpp takes too long for the suite; `make test-ai` runs the real one."""
import importlib.util
import json
import signal
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "local_model", Path(__file__).resolve().parent.parent / "scripts" / "local_model.py")
local_model = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(local_model)

SEGFAULT = f"import os; os.kill(os.getpid(), {int(signal.SIGSEGV)})"


def test_a_build_that_crashes_on_its_token_is_reported_by_its_signal(tmp_path):
    assert local_model.one_token_failure(tmp_path / "m.gguf", code=SEGFAULT) == "killed by SIGSEGV"
    assert local_model.one_token_failure(tmp_path / "m.gguf", code="import sys; print(sys.argv[1])") is None
    failed = local_model.one_token_failure(tmp_path / "m.gguf", code="raise SystemExit('no model at ' + __import__('sys').argv[1])")
    assert failed == f"exit status 1: no model at {tmp_path / 'm.gguf'}"


def _fake_pip(tmp_path):
    """A pip that only records how it was called (its arguments and CMAKE_ARGS) in rebuilt.json."""
    record = tmp_path / "rebuilt.json"
    code = ("import json, os, sys; open(sys.argv[1], 'w').write(json.dumps("
            "{'argv': sys.argv[2:], 'cmake': os.environ.get('CMAKE_ARGS'), 'force': os.environ.get('FORCE_CMAKE')}))")
    return (sys.executable, "-c", code, str(record)), record


def test_a_crashing_native_build_is_rebuilt_portable_and_checked_again(tmp_path):
    pip, record = _fake_pip(tmp_path)
    # The "build" crashes until the rebuild has happened, then writes its token.
    crashes_until_rebuilt = f"import os; os.path.exists({str(record)!r}) or os.kill(os.getpid(), 11)"
    said = []
    outcome = local_model.checked_build(
        tmp_path / "m.gguf", check=lambda model: local_model.one_token_failure(model, code=crashes_until_rebuilt),
        rebuild=lambda: local_model.rebuild_portable(pip=pip, version="0.3.36"), say=said.append)
    assert outcome == "portable"
    rebuilt = json.loads(record.read_text())
    assert rebuilt["cmake"] == ("-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF "
                                "-DGGML_AMX_TILE=OFF") and rebuilt["force"] == "1"
    assert rebuilt["argv"] == ["install", "--force-reinstall", "--no-deps", "--no-cache-dir", "--no-binary",
                               "llama-cpp-python", "llama-cpp-python==0.3.36"]
    assert "killed by SIGSEGV" in said[0] and "rebuilding" in said[0]
    assert "rebuilt" in said[-1]


def test_a_working_build_is_kept(tmp_path):
    pip, record = _fake_pip(tmp_path)
    outcome = local_model.checked_build(
        tmp_path / "m.gguf", check=lambda model: local_model.one_token_failure(model, code="pass"),
        rebuild=lambda: local_model.rebuild_portable(pip=pip, version="0.3.36"), say=lambda text: None)
    assert outcome == "native" and not record.exists()


def test_a_portable_build_that_crashes_too_stops_the_install_saying_why(tmp_path):
    pip, record = _fake_pip(tmp_path)
    with pytest.raises(RuntimeError, match="still did not write a token \\(killed by SIGSEGV\\)"):
        local_model.checked_build(
            tmp_path / "m.gguf", check=lambda model: local_model.one_token_failure(model, code=SEGFAULT),
            rebuild=lambda: local_model.rebuild_portable(pip=pip, version="0.3.36"), say=lambda text: None)
    assert record.exists()
