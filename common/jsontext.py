"""JSON text as Parley writes it (answers, live events, stored results): compact, with one encoder for every
call (json.dumps with options builds a new encoder each time)."""
import json

compact_json = json.JSONEncoder(separators=(",", ":")).encode
