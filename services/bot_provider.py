"""The bot's AI provider: OpenAI-compatible chat-completions calls (POST {baseUrl}/chat/completions,
bearer key) with the system prompt and the recent conversation, through the SSRF guard.

The answer is structured, never guessed from prose: {"reply": "...", "handoff": false}, asked for by the
provider's `mode` (MODES): json_schema (response_format {"type": "json_schema", ...}), json_object (JSON mode,
with the schema under "schema" for llama.cpp's servers), or auto: json_schema, then json_object when the
server refuses a format with 400/422. A structured answer that is not usable (not JSON, parroted example
text, empty; services/bot_answer.py) is followed by ONE plain-text request, whose text is the reply (no
handoff). Mode plain asks for text only. A timeout, another 4xx/5xx, a connection error (a server that closes
the connection mid-answer is named as such), or a plain answer with nothing in it raises ProviderError: the
bot then sends the fallback, if set.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.simple_httpclient import HTTPStreamClosedError, HTTPTimeoutError

from services import bot_answer, netguard
from services.bot_answer import Unstructured

DEFAULT_SYSTEM_PROMPT = ("You answer customers' messages for a business: briefly, politely, in the customer's "
                         "language. Never invent prices, dates or promises you were not given.")
MODES = ("auto", "json_schema", "json_object", "plain")
# The response formats each mode tries, in order; auto moves on when the server refuses one (REFUSED).
FORMATS = {"auto": ("json_schema", "json_object"), "json_schema": ("json_schema",),
           "json_object": ("json_object",), "plain": ()}
# A server that does not know a response_format says so with one of these, or (llama-cpp-python's server) with
# a 500 whose body names response_format.
REFUSED = (400, 422)
RESPONSE_FORMATS = {
    "json_schema": {"type": "json_schema",
                    "json_schema": {"name": "bot_answer", "strict": True, "schema": bot_answer.SCHEMA}},
    "json_object": {"type": "json_object", "schema": bot_answer.SCHEMA},
}
MAX_ANSWER_BYTES = 256 * 1024   # the provider's whole HTTP answer
# max_tokens of every request, so that no provider writes (and bills) an answer longer than the bot would send:
# replies are cut at MAX_REPLY_CHARS (4000, well under a message body's MESSAGE_BODY_MAX), a token is
# on average at least one character (about four in English, one in Chinese), and the JSON around the reply is
# ~20 tokens: 4096 lets any reply the bot sends whole be written whole.
MAX_TOKENS = bot_answer.MAX_REPLY_CHARS + 96
# OpenAI's reasoning models refuse max_tokens with a 400 that names its replacement: asked again with that one.
TOKEN_LIMITS = ("max_tokens", "max_completion_tokens")
ERROR_EXCERPT = 200
# A server that dies while it answers (llama.cpp crashed on its first token: issue 43 §14) closes the connection:
# said as such, since "Stream closed" told nobody to look at the model server's log.
CLOSED = "the model server closed the connection before its answer was complete (did it crash? see its log)"
USER_AGENT = "Parley-Bot/1"


class ProviderError(Exception):
    """The provider gave no usable answer; the message says why (it is recorded on the inbound message)."""


def conversation(history: Sequence[Mapping[str, Any]], max_messages: int, max_chars: int) -> list[dict[str, str]]:
    """Chat messages from the contact's recent messages (newest first, each {direction, body}): the
    newest max_messages that fit in max_chars together, oldest first; the newest is always kept (cut to
    max_chars). Inbound messages are the user's, every outbound one (bot, person, campaign) the assistant's."""
    chosen: list[dict[str, str]] = []
    used = 0
    for item in history[:max_messages]:
        body = item["body"]
        if chosen and used + len(body) > max_chars:
            break
        body = body[:max_chars - used] if not chosen else body
        chosen.append({"role": "user" if item["direction"] == "inbound" else "assistant", "content": body})
        used += len(body)
    return chosen[::-1]


def build_request(provider: Mapping[str, Any], api_key: str | None, messages: Sequence[Mapping[str, Any]], *, allow_private: bool, response_format: str = "json_schema",
                  token_limit: str = TOKEN_LIMITS[0]) -> HTTPRequest:
    """The HTTPRequest of one chat-completions call in a response format (RESPONSE_FORMATS, or "plain").
    ProviderError when the base URL is not allowed."""
    base = provider["baseUrl"].rstrip("/")
    refusal = netguard.scheme_refusal(urlsplit(base), allow_private)
    if refusal:
        raise ProviderError(f"provider URL refused: it {refusal}")
    system = (provider.get("systemPrompt") or "").strip() or DEFAULT_SYSTEM_PROMPT
    instruction = bot_answer.PLAIN_INSTRUCTION if response_format == "plain" else bot_answer.FORMAT_INSTRUCTION
    body = {"model": provider["model"], "stream": False, token_limit: MAX_TOKENS,
            "messages": [{"role": "system", "content": f"{system}\n\n{instruction}"}, *messages]}
    if response_format != "plain":
        body["response_format"] = RESPONSE_FORMATS[response_format]
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    timeout = float(provider.get("timeoutSeconds") or 20)
    return HTTPRequest(f"{base}/chat/completions", method="POST", body=json.dumps(body), headers=headers,
                       follow_redirects=False, connect_timeout=timeout, request_timeout=timeout)


def content_of(raw: bytes) -> str:
    """The text of a chat-completions response body (bytes); ProviderError when it has none."""
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, TypeError, KeyError, IndexError):
        raise ProviderError("malformed answer: not a chat-completions response with choices[0].message.content") from None
    if content is None:  # e.g. a tool call instead of text
        return ""
    if not isinstance(content, str):
        raise ProviderError("malformed answer: choices[0].message.content is not text")
    return content


class _Refused(Exception):
    """The server refused the request's response format (REFUSED): auto tries the next one."""


async def _call(http: AsyncHTTPClient, provider: Mapping[str, Any], api_key: str | None, messages: Sequence[Mapping[str, Any]], allow_private: bool, response_format: str, token_limit: str = TOKEN_LIMITS[0]) -> str:
    """One call: the answer's text, _Refused (a structured format the server would not take), or ProviderError."""
    request = build_request(provider, api_key, messages, allow_private=allow_private, response_format=response_format,
                            token_limit=token_limit)
    try:
        response = await http.fetch(request, raise_error=False)
    except netguard.BlockedAddress as exc:
        raise ProviderError(f"provider URL refused: {exc}") from None
    except HTTPTimeoutError:
        raise ProviderError(f"timeout: no answer within {request.request_timeout:g} s") from None
    except (HTTPStreamClosedError, ConnectionResetError):  # Tornado's name for an end of stream, and a reset
        raise ProviderError(f"connection error: {CLOSED}") from None
    except Exception as exc:  # refused, DNS or TLS failure, an answer over MAX_ANSWER_BYTES
        raise ProviderError(f"connection error: {netguard.describe_connection_error(exc)}") from None
    if not 200 <= response.code < 300:
        other_limit = TOKEN_LIMITS[1]
        if response.code == 400 and token_limit != other_limit and other_limit.encode() in (response.body or b""):
            return await _call(http, provider, api_key, messages, allow_private, response_format, other_limit)
        excerpt = (response.body or b"")[:ERROR_EXCERPT].decode("utf-8", "replace")
        error = f"HTTP {response.code} {response.reason or ''}".rstrip() + (f": {excerpt}" if excerpt else "")
        refused = response.code in REFUSED or b"response_format" in (response.body or b"")
        if refused and response_format != "plain":
            raise _Refused(error)
        raise ProviderError(error)
    return content_of(response.body)


async def ask(http: AsyncHTTPClient, provider: Mapping[str, Any], api_key: str | None, messages: Sequence[Mapping[str, Any]], *, allow_private: bool) -> bot_answer.Answer:
    """The provider's Answer to the conversation, or ProviderError: the structured formats of the provider's
    mode in turn (the next when one is refused), then, when the structured answer was not usable, one
    plain-text request. http: an AsyncHTTPClient whose resolver is netguard.CheckedResolver (so only checked
    addresses are connected to)."""
    mode = provider.get("mode") or "auto"
    formats, why = FORMATS.get(mode, FORMATS["auto"]), ""
    for index, response_format in enumerate(formats):
        try:
            content = await _call(http, provider, api_key, messages, allow_private, response_format)
        except _Refused as exc:
            if index + 1 < len(formats):
                continue
            raise ProviderError(f"{exc} (response format {response_format})") from None
        try:
            return bot_answer.structured(content, response_format)
        except Unstructured as exc:
            why = f"{response_format}: {exc}"
            break
    answer = bot_answer.plain(await _call(http, provider, api_key, messages, allow_private, "plain"), why)
    if answer is None:
        raise ProviderError("malformed answer: " + (f"{why}; the plain-text answer had nothing usable either"
                                                   if why else "the plain-text answer had nothing usable"))
    return answer
