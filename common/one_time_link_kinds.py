"""The kinds of one-time link (services/one_time_links.py), each served at /<kind>/<token>. Declared below
every layer so that the route table and the log's redaction (common/redact.py) read this one list: a new
kind is routed and its token masked alike."""
PURPOSES = ("setup", "reset", "invite")
PATH_PATTERN = "/(" + "|".join(PURPOSES) + ")/"  # a link's path up to its token
# Every path whose last part is a single-use token: the one-time links' and the CSAT page's (services/csat.py),
# masked alike in the access log.
TOKEN_PATH_PATTERN = "/(" + "|".join(PURPOSES + ("csat",)) + ")/"
