"""The bot's AI provider: one OpenAI-compatible chat-completions call (POST {baseUrl}/chat/completions,
bearer key) with the system prompt and the recent conversation, through the SSRF guard.

The answer is structured, never guessed from prose: the request asks for JSON mode
(response_format {"type": "json_object"}) and the system prompt for one object
{"reply": "...", "handoff": false}. Anything else (not JSON, no choices, reply not a string, handoff not a
boolean, nothing to say without a handoff) raises ProviderError, like a timeout, a 4xx/5xx or a
connection error: the bot then sends the fallback, if set.
"""
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from tornado.httpclient import HTTPRequest
from tornado.simple_httpclient import HTTPTimeoutError

from services import netguard

DEFAULT_SYSTEM_PROMPT = ("You answer customers' messages for a business: briefly, politely, in the customer's "
                         "language. Never invent prices, dates or promises you were not given.")
# Appended to every system prompt: the answer's shape is ours to fix, not the business's.
ANSWER_FORMAT = ('Answer with one JSON object and nothing else: {"reply": "<your message to the customer>", '
                 '"handoff": false}. Set "handoff" to true when the customer asks for a person or you cannot '
                 'help; "reply" may then be a short note for the customer, or "".')
MAX_ANSWER_BYTES = 256 * 1024   # the provider's whole HTTP answer
MAX_REPLY_CHARS = 4000          # the reply the bot sends (longer ones are cut)
ERROR_EXCERPT = 200
USER_AGENT = "Parley-Bot/1"


class ProviderError(Exception):
    """The provider gave no usable answer; the message says why (it is recorded on the inbound message)."""


@dataclass(frozen=True)
class Answer:
    reply: str        # may be "" with a handoff
    handoff: bool


def conversation(history, max_messages, max_chars):
    """Chat messages from the contact's recent messages (newest first, each {direction, body}): the
    newest max_messages that fit in max_chars together, oldest first; the newest is always kept (cut to
    max_chars). Inbound messages are the user's, every outbound one (bot, person, campaign) the assistant's."""
    chosen, used = [], 0
    for item in history[:max_messages]:
        body = item["body"]
        if chosen and used + len(body) > max_chars:
            break
        body = body[:max_chars - used] if not chosen else body
        chosen.append({"role": "user" if item["direction"] == "inbound" else "assistant", "content": body})
        used += len(body)
    return chosen[::-1]


def build_request(provider, api_key, messages, *, allow_private):
    """The HTTPRequest of one chat-completions call. ProviderError when the base URL is not allowed."""
    base = provider["baseUrl"].rstrip("/")
    refusal = netguard.scheme_refusal(urlsplit(base), allow_private)
    if refusal:
        raise ProviderError(f"provider URL refused: it {refusal}")
    system = (provider.get("systemPrompt") or "").strip() or DEFAULT_SYSTEM_PROMPT
    body = {"model": provider["model"], "stream": False, "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": f"{system}\n\n{ANSWER_FORMAT}"}, *messages]}
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    timeout = float(provider.get("timeoutSeconds") or 20)
    return HTTPRequest(f"{base}/chat/completions", method="POST", body=json.dumps(body), headers=headers,
                       follow_redirects=False, connect_timeout=timeout, request_timeout=timeout)


def parse_answer(raw):
    """The Answer in a chat-completions response body (bytes); ProviderError when it has none."""
    try:
        data = json.loads(raw)
        content = data["choices"][0]["message"]["content"]
    except (ValueError, TypeError, KeyError, IndexError):
        raise ProviderError("malformed answer: not a chat-completions response with choices[0].message.content")
    if not isinstance(content, str):
        raise ProviderError("malformed answer: choices[0].message.content is not text")
    try:
        answer = json.loads(content)
    except ValueError:
        raise ProviderError(f"malformed answer: the content is not the JSON object asked for: {content[:80]!r}")
    if not isinstance(answer, dict) or not isinstance(answer.get("reply", ""), str) \
            or not isinstance(answer.get("handoff", False), bool):
        raise ProviderError('malformed answer: expected {"reply": text, "handoff": true|false}')
    reply, handoff = answer.get("reply", "").strip(), answer.get("handoff", False)
    if not reply and not handoff:
        raise ProviderError("malformed answer: an empty reply without a handoff")
    return Answer(reply=reply[:MAX_REPLY_CHARS], handoff=handoff)


async def ask(http, provider, api_key, messages, *, allow_private):
    """One call: the provider's Answer to the conversation, or ProviderError. http: an AsyncHTTPClient whose
    resolver is netguard.CheckedResolver (so only checked addresses are connected to)."""
    request = build_request(provider, api_key, messages, allow_private=allow_private)
    try:
        response = await http.fetch(request, raise_error=False)
    except netguard.BlockedAddress as exc:
        raise ProviderError(f"provider URL refused: {exc}") from None
    except HTTPTimeoutError:
        raise ProviderError(f"timeout: no answer within {request.request_timeout:g} s") from None
    except Exception as exc:  # refused, reset, DNS or TLS failure, an answer over MAX_ANSWER_BYTES
        raise ProviderError(f"connection error: {netguard.describe_connection_error(exc)}") from None
    if not 200 <= response.code < 300:
        excerpt = (response.body or b"")[:ERROR_EXCERPT].decode("utf-8", "replace")
        raise ProviderError(f"HTTP {response.code} {response.reason or ''}".rstrip() + (f": {excerpt}" if excerpt else ""))
    return parse_answer(response.body)
