"""Validation shared by every pydantic model: an error as one sentence that names the field (e.g.
"bot.rules[0].keywords: …"), the JSON Schema note for text that must not be blank, and the rule for
identifier-like text (ids, names, emails, keywords, settings keys): no C0/C1 control characters."""
import re
from collections.abc import Callable, Iterable
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from common.errors import Invalid

WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())  # Python's, spelled out
# Documents (in the OpenAPI schema only) a check the validators make by hand with str.strip(): not empty or
# whitespace-only. Python's whitespace, spelled out: JSON Schema's \S differs (e.g. on U+001F, U+FEFF).
NOT_BLANK = {"pattern": "[^" + WHITESPACE + "]"}

MESSAGE_BODY_MAX = 65536  # characters in a message body: sent, received, a campaign's, the bot's dry run

# C0 (U+0000-U+001F), DEL and C1 (U+0080-U+009F): in a name or an id they end up in headers (a 500), in
# CSV exports, in log lines and on pages as junk. Message bodies keep their newlines and tabs.
# The schema says it as "not: pattern" (no anchors, whose "$" Python's re and ECMA read differently), so
# that it composes with NOT_BLANK's pattern.
NO_CONTROL = {"not": {"pattern": "[\\u0000-\\u001f\\u007f-\\u009f]"}}


def is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # what is_control() says, searched in C


def refuse_control_characters(value: str, field: str | None = None) -> str:
    """The value unchanged, or ValueError naming the first control character (and the field, when given)."""
    found = _CONTROL.search(value) if value else None
    if found is not None:
        raise ValueError(f"{field + ' ' if field else ''}must not contain control characters "
                         f"(U+{ord(found.group()):04X})")
    return value


def no_control_characters(value: str, field: str) -> str:
    """refuse_control_characters for code outside the pydantic models (UI forms, imports): Invalid."""
    try:
        return refuse_control_characters(value, field)
    except ValueError as exc:
        raise Invalid(str(exc), field=field) from None


class Strict(BaseModel):
    """A request model's base: a field it does not declare is refused, never ignored (a typo is a 400)."""
    model_config = ConfigDict(extra="forbid")


Identifier = Annotated[str, AfterValidator(refuse_control_characters), Field(json_schema_extra=NO_CONTROL)]
IdentifierNotBlank = Annotated[str, AfterValidator(refuse_control_characters),
                               Field(json_schema_extra={**NO_CONTROL, **NOT_BLANK})]


def may_hold_lone_surrogate(text: str) -> bool:
    """False when JSON text cannot decode to a lone surrogate (no such character, no \\uD800-\\uDFFF escape):
    the common case, decided in C before lone_surrogate_path walks the parsed value."""
    return _has_surrogate(text) or _SURROGATE_ESCAPE.search(text) is not None


def lone_surrogate_path(data: object) -> str | None:
    """Where parsed JSON holds a lone surrogate ("\\ud800" is valid JSON but no Unicode text: it cannot be
    stored or sent on), as a field path ("" for the body itself); None when nowhere."""
    return _path_of_text(data, _has_surrogate, "")


def may_hold_nul(text: str) -> bool:
    """False when JSON text cannot decode to U+0000 (JSON has it only as an escape), decided in C."""
    return "\\u0000" in text


def nul_path(data: object) -> str | None:
    """Where parsed JSON holds U+0000, as a field path: PostgreSQL's text cannot store it, and no person's
    text holds it, so every field refuses it, free text too (its newlines and tabs are kept)."""
    return _path_of_text(data, _has_nul, "")


def nul_refused(where: str, field: str | None = None) -> Invalid:
    """The one answer to U+0000 in a body field, form field or query argument (see nul_path for why)."""
    return Invalid(f"{where} must not contain control characters (U+0000)", field=field)


def _has_nul(text: str) -> bool:
    return "\x00" in text


def _path_of_text(data: object, found_in: Callable[[str], bool], path: str) -> str | None:
    """The path of the first string (value or key) of parsed JSON for which found_in is true."""
    if isinstance(data, str):
        return path if found_in(data) else None
    if isinstance(data, dict):
        for key, value in data.items():
            inner = f"{path}.{_printable(key)}" if path else _printable(key)
            if found_in(key):
                shown = _printable(key.encode("utf-8", "backslashreplace").decode())
                return (path + " key" if path else "key") + f" {shown}"
            found = _path_of_text(value, found_in, inner)
            if found is not None:
                return found
    if isinstance(data, list):
        for index, value in enumerate(data):
            found = _path_of_text(value, found_in, f"{path}[{index}]")
            if found is not None:
                return found
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_surrogate(text: str) -> bool:
    # isascii() is a flag lookup: megabytes of base64 media are passed over at once.
    return not text.isascii() and _SURROGATE.search(text) is not None


def _printable(part: str) -> str:
    """A path part as a message can show it: a dict key with a control character escaped."""
    return part.encode("unicode_escape").decode("ascii") if any(map(is_control, part)) else part


def field_path(loc: Iterable[int | str], prefix: str = "") -> str:
    """("rules", 0, "keywords") -> "rules[0].keywords" (after prefix, when given)."""
    path = prefix
    for part in loc:
        if part in ("__root__", "[key]"):  # "[key]": pydantic's marker for a dict key, named by the part before
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            part = _printable(str(part))
            path += f".{part}" if path else part
    return path


def validation_message(error: ValidationError, prefix: str = "") -> str:
    """One sentence naming the field of a pydantic.ValidationError's first error."""
    first = error.errors()[0]
    field = field_path(first["loc"], prefix)
    message = first["msg"]
    if first["type"] == "missing":
        return f"{field} is required"
    message = message.removeprefix("Value error, ")
    if first["type"] == "value_error" and message.startswith(field):
        return message
    last = str(first["loc"][-1]) if first["loc"] else ""
    if first["type"] == "value_error" and last and message.startswith(last + " "):
        return field + message[len(last):]  # a nested field's own message, named by its whole path
    return f"{field}: {message}" if field else message


def validated_patch(model: type[BaseModel], patch: object, prefix: str) -> dict:
    """A merge patch given as plain data (a UI form's) checked against its model, as PATCH /v1/account/settings
    checks its body: model_dump(exclude_unset=True), or Invalid naming the field under prefix."""
    try:
        return model.model_validate(patch).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise Invalid(validation_message(exc, prefix=prefix)) from None
