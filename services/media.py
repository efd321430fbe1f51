"""Custom-channel media: data URIs decoded and sniffed against their declared type, stored
content-addressed in data/media/, served by signed expiring URLs; http(s) URLs kept as given."""
from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import hashlib
import hmac
import mimetypes
import os
import re
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import SplitResult, quote, urlsplit

import puremagic
from puremagic.main import magic_footer_array, magic_header_array, max_foot, max_head, multi_part_dict

from common.errors import Invalid, PayloadTooLarge
from common.validation import no_control_characters

if TYPE_CHECKING:
    from services.context import JSONObject, Services
    from services.secretbox import SecretBox
    from settings import Settings

STORED_PREFIX = "media:"  # messages.media_url of a stored file: "media:<sha256>"
_MIME = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_WHITESPACE = b" \t\r\n\x0b\x0c"
# Base64 is decoded in steps of this many characters: each C call is short and gives the GIL back
# between steps, so the event loop keeps running while a thread decodes a 16 MB file.
_DECODE_STEP = 1 << 20

# What the sniffer reads of a file (puremagic.magic_string: its head and its tail)
_SNIFF_HEAD, _SNIFF_FOOT = max_head, max_foot

# Types the sniffer can recognize; a declared type outside this set cannot be contradicted by bytes
# the sniffer fails to identify.
_SNIFFABLE = ({m.mime_type for m in magic_header_array + magic_footer_array if m.mime_type}
              | {m.mime_type for options in multi_part_dict.values() for m in options if m.mime_type})

# Names of one format, and containers whose magic bytes do not tell audio from video (an .m4a is an
# MP4 file, Ogg and Matroska hold either): a declared type matches sniffed bytes of its own group.
_GROUPS = [
    {"image/jpeg", "image/jpg", "image/pjpeg"},
    {"image/png", "image/x-png", "image/apng"},
    {"image/heic", "image/heif", "image/heic-sequence", "image/heif-sequence"},
    {"image/bmp", "image/x-bmp", "image/x-ms-bmp"},
    {"image/tiff", "image/tif"},
    {"image/x-icon", "image/vnd.microsoft.icon"},
    {"audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mp3", "audio/x-mpeg"},
    {"audio/wav", "audio/wave", "audio/x-wav", "audio/vnd.wave", "audio/x-pn-wav"},
    {"video/mp4", "audio/mp4", "audio/m4a", "audio/x-m4a", "video/x-m4v", "video/quicktime",
     "video/3gpp", "audio/3gpp", "video/3gpp2", "audio/3gpp2", "application/mp4"},
    {"application/ogg", "audio/ogg", "video/ogg", "audio/opus", "audio/vorbis", "audio/x-opus+ogg"},
    {"video/webm", "audio/webm", "video/x-matroska", "audio/x-matroska", "application/x-matroska"},
    {"video/avi", "video/x-msvideo", "video/msvideo"},
    {"application/zip", "application/x-zip-compressed", "application/x-zip"},
]
_GROUP_OF = {name: i for i, group in enumerate(_GROUPS) for name in group}
# Text has no magic bytes: a textual type matches bytes that decode as text.
_TEXTUAL = {"application/json", "application/xml", "application/javascript", "application/x-ndjson",
            "application/csv", "application/yaml", "application/x-yaml", "application/rtf", "image/svg+xml",
            "application/ld+json", "application/x-sh", "application/sql", "message/rfc822"}
# Sniffed candidates within this confidence of the best one count (an ID3-tagged MP3 also matches an
# obscure format more strongly; a WAV file also weakly matches every RIFF format, WebP among them).
_CONFIDENCE_SPAN = 0.3


def media_dir(settings: Settings) -> Path:
    return Path(settings.data_dir) / "media"


def normalize_content_type(raw: str | None, field: str = "customData.mediaContentType") -> tuple[str, str | None]:
    """"Image/PNG; charset=x" -> ("image/png", "x" or None); Invalid when it is not a MIME type."""
    base, _, params = (raw or "").partition(";")
    base = base.strip().lower()
    if not _MIME.match(base):
        raise Invalid(f"{field} must be a MIME type such as image/png")
    charset = None
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    return base, charset


def _same_type(declared: str, sniffed: str, sniffed_ext: str, declared_exts: set[str]) -> bool:
    if sniffed == declared or (sniffed_ext and sniffed_ext in declared_exts):
        return True
    group = _GROUP_OF.get(declared)
    return group is not None and _GROUP_OF.get(sniffed) == group


def _is_textual(content_type: str) -> bool:
    return (content_type.startswith("text/") or content_type in _TEXTUAL
            or content_type.endswith("+json") or content_type.endswith("+xml"))


def _looks_like_text(data: bytes, charset: str | None) -> bool:
    sample = data[:65536]
    if b"\x00" in sample:
        return False
    try:
        # Incremental, not final: a sample may end in the middle of a multi-byte character.
        codecs.getincrementaldecoder(charset or "utf-8")().decode(sample, final=False)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def sniff(data: bytes) -> list[tuple[str, str]]:
    """puremagic's plausible candidates for these bytes: [(mime_type, extension)], best first."""
    try:
        found = puremagic.magic_string(data)
    except (puremagic.PureError, ValueError):
        return []
    if not found:
        return []
    best = max(m.confidence for m in found)
    return [(m.mime_type.lower(), m.extension.lower()) for m in found
            if m.confidence >= best - _CONFIDENCE_SPAN]


def check_content(declared: str, charset: str | None, data: bytes, field: str = "customData.mediaContentType") -> None:
    """Invalid unless the bytes are plausibly of the declared type (docs/api.md#custom-channel: the type "must match the
    real file content"). PNG bytes labelled application/pdf fail; text types need text."""
    if declared == "application/octet-stream":
        return  # claims nothing beyond "bytes"
    candidates = sniff(data)
    declared_exts = set(mimetypes.guess_all_extensions(declared, strict=False))
    if any(_same_type(declared, mime, ext, declared_exts) for mime, ext in candidates):
        return
    if _is_textual(declared):
        if _looks_like_text(data, charset):
            return
        raise Invalid(f"{field} is {declared} but the file is not text"
                      + (f" (it looks like {_label(candidates)})" if candidates else ""))
    if not candidates and declared not in _SNIFFABLE:
        return  # a format the sniffer does not know: nothing contradicts the declared type
    found = f"it looks like {_label(candidates)}" if candidates else "its content is not recognizable as that type"
    raise Invalid(f"{field} is {declared} but the file does not match: {found}")


def _label(candidates: list[tuple[str, str]]) -> str:
    for mime, _ext in candidates:
        if mime:
            return mime
    return candidates[0][1] or "another type"


def decode_data_uri(uri: str, max_bytes: int, field: str = "customData.mediaUrl") -> tuple[str, str | None, bytes]:
    """data:<type>[;params];base64,<data> -> (type, charset, bytes). Strict base64 (whitespace such as
    line breaks is allowed); PayloadTooLarge above max_bytes decoded. CPU-heavy: run in an executor."""
    header, comma, payload = uri.partition(",")
    if not comma:
        raise Invalid(f"{field} is not a valid data URI: expected data:<type>;base64,<data>")
    parts = [p.strip() for p in header[len("data:"):].split(";")]
    if len(parts) < 2 or parts[-1].lower() != "base64":
        raise Invalid(f"{field} must be base64-encoded: data:<type>;base64,<data>")
    uri_type, charset = normalize_content_type(";".join(parts[:-1]), field=f"{field} (its data URI type)")
    data = _b64decode_stepwise(payload, max_bytes, field)
    if not data:
        raise Invalid(f"{field} contains an empty file")
    return uri_type, charset, data


def _b64decode_stepwise(text: str, max_bytes: int, field: str) -> bytes:
    """Strict base64 (whitespace such as MIME line breaks ignored) decoded in _DECODE_STEP pieces;
    PayloadTooLarge as soon as the output passes max_bytes."""
    pieces: list[bytes] = []
    size, carry, padded = 0, b"", False
    try:
        for start in range(0, len(text), _DECODE_STEP):
            chunk = carry + text[start:start + _DECODE_STEP].encode("ascii", errors="replace").translate(
                None, _WHITESPACE)
            usable = len(chunk) - len(chunk) % 4
            carry = chunk[usable:]
            if not usable:
                continue
            if padded:  # data after "=" padding
                raise binascii.Error("data after padding")
            padded = chunk[usable - 1:usable] == b"="
            piece = base64.b64decode(chunk[:usable], validate=True)
            size += len(piece)
            if size > max_bytes:
                raise PayloadTooLarge(f"{field}: the embedded file is larger than the limit of {max_bytes} bytes")
            pieces.append(piece)
        if carry:
            raise binascii.Error("incomplete final group")
    except (binascii.Error, ValueError):
        raise Invalid(f"{field} is not valid base64 data") from None
    return b"".join(pieces)


def store_bytes(directory: Path, data: bytes) -> str:
    """Write data as directory/<sha256> (atomic rename; the same bytes are stored once); returns the
    hex digest. Blocking: run in an executor."""
    digest = hashlib.sha256(data).hexdigest()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / digest
    if target.exists() and target.stat().st_size == len(data):
        os.utime(target)  # recent again: retention leaves a file alone while a message may be about to name it
        return digest
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the message row that names this file commits durably next
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(directory)
    return digest


def store_file(directory: Path, path: str | Path) -> str:
    """Store the file at path (a temporary file in directory) as directory/<sha256> by renaming it (the same bytes
    are stored once: then it is removed); returns the hex digest. Blocking: run in an executor."""
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_DECODE_STEP):
            sha.update(chunk)
        size = f.tell()
        os.fsync(f.fileno())  # the message row that names this file commits durably next
    digest = sha.hexdigest()
    target = directory / digest
    if target.exists() and target.stat().st_size == size:
        os.utime(target)  # recent again, as store_bytes does
        os.unlink(path)
        return digest
    os.replace(path, target)
    _fsync_dir(directory)
    return digest


def _fsync_dir(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _accept_data_uri(uri: str, declared: str, charset: str | None, max_bytes: int, directory: Path) -> str:
    uri_type, uri_charset, data = decode_data_uri(uri, max_bytes)
    if _GROUP_OF.get(uri_type, uri_type) != _GROUP_OF.get(declared, declared):
        raise Invalid(f"customData.mediaUrl is a data URI of type {uri_type}, but "
                      f"customData.mediaContentType is {declared}")
    check_content(declared, charset or uri_charset, data)
    return store_bytes(directory, data)


def _accept_bytes(data: bytes, declared: str, charset: str | None, max_bytes: int, directory: Path, field: str) -> str:
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"{field} is larger than the limit of {max_bytes} bytes")
    check_content(declared, charset, data, field=field)
    return store_bytes(directory, data)


def _accept_file(path: str | Path, declared: str, charset: str | None, max_bytes: int, directory: Path,
                 field: str) -> str:
    size = os.path.getsize(path)
    if size > max_bytes:
        raise PayloadTooLarge(f"{field} is larger than the limit of {max_bytes} bytes")
    with open(path, "rb") as f:  # the sniffer reads a file's head and tail only; text is read whole
        if size <= _SNIFF_HEAD + _SNIFF_FOOT or _is_textual(declared):
            sample = f.read()
        else:
            sample = f.read(_SNIFF_HEAD)
            f.seek(-_SNIFF_FOOT, os.SEEK_END)
            sample += f.read()
    check_content(declared, charset, sample, field=field)
    return store_file(directory, path)


async def accept_file(settings: Settings, path: str | Path, content_type: str, field: str) -> tuple[str, str]:
    """accept_bytes for a file on disk (a big email attachment decoded into a temporary file of the media
    directory): stored by renaming it; the caller removes it when this raises. Returns (stored url, content type)."""
    declared, charset = normalize_content_type(content_type, field=field)
    digest = await asyncio.get_running_loop().run_in_executor(
        None, _accept_file, path, declared, charset, settings.max_media_bytes, media_dir(settings), field)
    return STORED_PREFIX + digest, declared


async def accept_bytes(settings: Settings, data: bytes, content_type: str, field: str) -> tuple[str, str]:
    """A file that arrived as bytes (an email's attachment) checked and stored as a data URI's would be: the same
    size limit and content sniffing, off the event loop. Returns (stored url, content type); Invalid or
    PayloadTooLarge naming field."""
    declared, charset = normalize_content_type(content_type, field=field)
    digest = await asyncio.get_running_loop().run_in_executor(
        None, _accept_bytes, data, declared, charset, settings.max_media_bytes, media_dir(settings), field)
    return STORED_PREFIX + digest, declared


async def accept_media(settings: Settings, media_url: str | None,
                       media_content_type: str | None) -> tuple[str | None, str | None]:
    """Validate an incoming (mediaUrl, mediaContentType) pair; returns (stored url, content type) or
    (None, None) without media. Data URIs are decoded, checked and stored off the event loop."""
    if media_url is None or not media_url.strip():
        return None, None
    media_url = media_url.strip()
    if media_content_type is None or not media_content_type.strip():
        raise Invalid("customData.mediaContentType is required when customData.mediaUrl is present")
    declared, charset = normalize_content_type(media_content_type)
    if media_url[:5].lower() == "data:":
        digest = await asyncio.get_running_loop().run_in_executor(
            None, _accept_data_uri, media_url, declared, charset, settings.max_media_bytes, media_dir(settings))
        return STORED_PREFIX + digest, declared
    parts: SplitResult | None
    try:
        parts = urlsplit(media_url)
        parts.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise Invalid("customData.mediaUrl must be an http(s) URL or a data:<type>;base64,<data> URI")
    # urlsplit drops tabs and newlines silently; the URL is stored and handed on as given. (A data URI's
    # base64 may have MIME line breaks.)
    no_control_characters(media_url, "customData.mediaUrl")
    if len(media_url) > 4096:
        raise Invalid("customData.mediaUrl is longer than 4096 characters; host the file and send its URL")
    # Hosted files are stored as given and never fetched here (no server-side requests on a client's say).
    return media_url, declared


# ---- signed URLs ---------------------------------------------------------------------------

def _signature(key: bytes, digest: str, content_type: str, expires: int) -> str:
    mac = hmac.new(key, f"{digest}\n{content_type}\n{expires}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def signing_key(box: SecretBox) -> bytes:
    return bytes.fromhex(box.derive("media-urls"))


def signed_path(key: bytes, digest: str, content_type: str, ttl_seconds: float, now: float | None = None) -> str:
    expires = int((now if now is not None else time.time()) + ttl_seconds)
    return (f"/v1/media/{digest}?type={quote(content_type, safe='')}&exp={expires}"
            f"&sig={_signature(key, digest, content_type, expires)}")


def verify(key: bytes, digest: str | None, content_type: str | None, expires: str | int | None, signature: str | None,
           now: float | None = None) -> bool:
    """True when the signature is ours for exactly this file and type and has not expired."""
    if not digest or not _SHA256.match(digest) or not content_type or not signature or expires is None:
        return False
    try:
        until = int(expires)
    except (TypeError, ValueError):
        return False
    if until < (now if now is not None else time.time()):
        return False
    # As bytes: compare_digest refuses str with non-ASCII characters (a forged ?sig= may carry any).
    return hmac.compare_digest(_signature(key, digest, content_type, until).encode(), signature.encode())


def public_media(services: Services, media_url: str | None, content_type: str | None,
                 now: float | None = None) -> JSONObject | None:
    """The media of a message as the API and webhooks show it: {url, contentType} or None. Stored files
    get a signed URL valid for settings.media_url_ttl_seconds."""
    if not media_url:
        return None
    url = media_url
    if media_url.startswith(STORED_PREFIX):
        settings = services.settings
        # a stored file's content type is stored with it (accept_media)
        url = settings.base_url + signed_path(signing_key(services.box), media_url[len(STORED_PREFIX):],
                                              cast(str, content_type), settings.media_url_ttl_seconds, now)
    return {"url": url, "contentType": content_type}
