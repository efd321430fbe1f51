"""Validation shared by every pydantic model: an error as one sentence that names the field (e.g.
"bot.rules[0].keywords: …"), and the JSON Schema note for text that must not be blank."""

# Documents (in the OpenAPI schema only) a check the validators make by hand with str.strip(): not empty or
# whitespace-only. Python's whitespace, spelled out: JSON Schema's \S differs (e.g. on U+001F, U+FEFF).
NOT_BLANK = {"pattern": "[^" + "".join(c for c in map(chr, range(0x3001)) if c.isspace()) + "]"}


def field_path(loc, prefix=""):
    """("rules", 0, "keywords") -> "rules[0].keywords" (after prefix, when given)."""
    path = prefix
    for part in loc:
        if part == "__root__":
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def validation_message(error, prefix=""):
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
