"""JSON text as Parley writes it (answers, live events, stored results): compact, with one encoder for every
call (json.dumps with options builds a new encoder each time)."""
import json

compact_json = json.JSONEncoder(separators=(",", ":")).encode


class EncodedOnce(dict):
    """A JSON object that may be the answer to many requests (a page of events that a thousand long-polls woken by
    one commit share, services/event_stream.py shared_page): its text is made once, on first use. Not changed
    after it is first encoded."""
    __slots__ = ("_text",)
    _text: str

    def text(self) -> str:
        try:
            return self._text
        except AttributeError:
            self._text = compact_json(self)
            return self._text
