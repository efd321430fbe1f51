"""Jinja filters for the admin UI (installed by install()): one way to show a time, in the viewer's own zone
(a <time datetime> that static/parley.js rewrites on load and on every live update; the UTC text is for a
browser without scripts), and texts the services write for API clients said in the UI's words."""
import re

from markupsafe import Markup, escape

from services.messaging import NO_WEBHOOK

ISO_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})")
# The API counts rules from 0 (`of rules[0]`, the field `bot.rules[1].answer`); the Bot page's form from 1.
RULE_INDEX = re.compile(r"\bof rules\[(\d+)\]")
RULE_FIELD = re.compile(r"\b(?:bot\.)?(?:campaigns\.([^.\s]+)\.)?rules\[(\d+)\]\.(keywords|answer)(?:\[\d+\])?")
PAUSE_REASON = re.compile(r"\((human_reply|handoff)([,)])")
PAUSE_WORDS = {"human_reply": "a person replied", "handoff": "the contact asked for a person"}
SETTINGS_LINK = Markup('set it in <a href="/settings#custom-channel-webhook">Settings</a>')


def local_time(iso):
    """A stored ISO time as a <time> element."""
    if not iso:
        return ""
    return Markup('<time datetime="{0}">{1} UTC</time>').format(iso, iso[:16].replace("T", " "))


def ui_text(text):
    """A service's message (a bot outcome's detail, an error) for the UI: rules numbered as on the Bot page,
    times as local_time(), pause reasons in words, and the API's "set it with PATCH ..." as a Settings link."""
    if not text:
        return ""
    shown = str(escape(text))
    shown = RULE_INDEX.sub(lambda m: f"of rule {int(m[1]) + 1}", shown)
    shown = RULE_FIELD.sub(_rule_field, shown)
    shown = PAUSE_REASON.sub(lambda m: f"({PAUSE_WORDS[m[1]]}{m[2]}", shown)
    shown = ISO_TIME.sub(lambda m: local_time(m[0]), shown)
    api_hint = NO_WEBHOOK.split("; ", 1)[1]
    return Markup(shown.replace(api_hint, SETTINGS_LINK))


def _rule_field(match):
    campaign, index, field = match.groups()
    return f"{f'Campaign {campaign} rule' if campaign else 'Rule'} {int(index) + 1} {field}"


def install(env):
    env.filters["local_time"] = local_time
    env.filters["ui_text"] = ui_text
