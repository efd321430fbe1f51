"""Reading what an AI provider wrote (services/bot_provider.py asks): the structured answer {"reply", "handoff"}
or, on the plain-text path, the text itself, with chat-template debris and code fences stripped.

Small local models (Gemma 3 270M on llama.cpp, issue 22) copy a format's example text ("<your message to
the customer>") or answer with nothing; such an answer is Unstructured, and the provider is then asked once
more for plain text. So the format instruction below carries no example value to copy.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_REPLY_CHARS = 4000  # the reply the bot sends (longer ones are cut; a message body holds MESSAGE_BODY_MAX)

# The answer's JSON schema: response_format json_schema (OpenAI, vLLM, Ollama, llama.cpp's llama-server)
# and json_object's "schema" (llama-cpp-python's server, llama-server) constrain the model to it.
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["reply", "handoff"],
          "properties": {"reply": {"type": "string"}, "handoff": {"type": "boolean"}}}
# Appended to every system prompt in the structured modes: the answer's shape is ours to fix. No
# placeholder value: a small model copies whatever example text it is given.
FORMAT_INSTRUCTION = ('Answer with one JSON object with two keys. "reply" is your answer to the customer\'s last '
                      'message, written out in full. "handoff" is true only when the customer asks for a person or '
                      'you cannot help, otherwise false.')
# The plain-text path: the same system prompt, no format at all.
PLAIN_INSTRUCTION = "Answer the customer's last message directly, in plain text."

# Placeholders models copy: the example text of formats (ours before issue 22, and common ones) and the
# schema's own words. Compared case-insensitively, without surrounding punctuation.
_PARROTED = {"your message to the customer", "your reply", "your answer", "your message", "reply", "message",
             "string", "text", "answer", "...", "…", "your answer to the customer's last message",
             "your answer to the customer's last message, written out in full"}
_PLACEHOLDER = re.compile(r"\s*[<\[{]\s*[^<>\[\]{}]{0,80}[>\]}]\s*")  # "<...>", "[your reply]", "{reply}"
# Chat-template tokens a server may leave in the text (Gemma, ChatML, Llama 3, Phi, Mistral, Llama 2).
_TURN_END = re.compile(r"<end_of_turn>|<\|im_end\|>|<\|eot_id\|>|<\|end\|>|<\|endoftext\|>|</s>")
_TURN_START = re.compile(r"^\s*(?:<start_of_turn>|<\|im_start\|>|<\|start_header_id\|>)\s*(?:model|assistant)?"
                         r"(?:<\|end_header_id\|>)?\s*|^\s*(?:<s>|<\|assistant\|>|\[/INST\])\s*")
_TOKEN = re.compile(r"<start_of_turn>\w*|<\|[a-z_]{1,30}\|>|</?s>|\[/?INST\]")
_FENCE = re.compile(r"^\s*```[\w-]*[ \t]*\n?(.*?)\n?```\s*$", re.S)


class Unstructured(Exception):
    """The structured answer is not usable (not JSON, the wrong shape, parroted, empty): the message says why."""


@dataclass(frozen=True)
class Answer:
    reply: str           # may be "" with a handoff
    handoff: bool
    mode: str            # the response format that answered: json_schema | json_object | plain
    unstructured: str = ""  # on the plain-text path after a structured attempt: why that attempt was not used


def clean(text: str) -> str:
    """The text without chat-template debris (a leading turn marker; everything from the first end-of-turn
    marker on, which is the model inventing the next turn) and without a surrounding code fence."""
    text = _TURN_START.sub("", text, count=1)
    end = _TURN_END.search(text)
    if end and text[:end.start()].strip():
        text = text[:end.start()]
    text = _TOKEN.sub("", _TURN_END.sub("", text)).strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def parroted(reply: str) -> bool:
    """Whether a reply is a format's example text rather than an answer."""
    bare = reply.strip().strip(" .:\"'`").lower()
    if not bare:  # punctuation only ("...") is an example too; nothing at all is merely empty
        return bool(reply.strip())
    return bare in _PARROTED or bool(_PLACEHOLDER.fullmatch(reply)) or (
        len(bare) >= 12 and bare in FORMAT_INSTRUCTION.lower())


def _first_object(text: str) -> Any:
    """The JSON object that starts at the text's first "{", whatever follows it; None when there is none."""
    start = text.find("{")
    try:
        return json.JSONDecoder().raw_decode(text, start)[0] if start >= 0 else None
    except ValueError:
        return None


def structured(content: str, mode: str) -> Answer:
    """The Answer in a structured answer's content; Unstructured when there is none."""
    text = clean(content)
    try:
        answer = json.loads(text)
    except ValueError:
        answer = _first_object(content)  # an end-of-turn marker inside the reply cut the text short
        if answer is None:
            raise Unstructured(f"not the JSON object asked for: {text[:80]!r}") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("reply", ""), str) \
            or not isinstance(answer.get("handoff", False), bool):
        raise Unstructured('expected {"reply": text, "handoff": true|false}')
    reply, handoff = clean(answer.get("reply", "")), answer.get("handoff", False)
    if parroted(reply):
        raise Unstructured(f"the format's example text was copied: {reply[:80]!r}")
    if not reply and not handoff:
        raise Unstructured("an empty reply without a handoff")
    return Answer(reply=reply[:MAX_REPLY_CHARS], handoff=handoff, mode=mode)


def plain(content: str, why: str = "") -> Answer | None:
    """The Answer of the plain-text path (never a handoff), or None when the text says nothing usable. A model
    that answers JSON anyway is read for its reply."""
    text = clean(content)
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("reply"), str):
        text = clean(data["reply"])
    if not text or parroted(text):
        return None
    return Answer(reply=text[:MAX_REPLY_CHARS], handoff=False, mode="plain", unstructured=why)
