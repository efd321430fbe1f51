"""Mozilla's TLS configurations (https://ssl-config.mozilla.org, guidelines 5.7) for the HTTPS listener and
for every TLS client Parley opens (webhooks, the AI provider): versions, TLS 1.2 ciphers, TLS 1.3 suites
and key-exchange groups, exactly as the profile lists them.

Python 3.11's ssl module sets TLS 1.2 ciphers (set_ciphers) but no TLS 1.3 suite list and only one group
(set_ecdh_curve; set_groups arrived in 3.13), and its defaults also accept X448, secp521r1 and CBC
ciphers. The two missing calls go to OpenSSL directly, through the libssl that Python's _ssl module is
linked against, on the SSL_CTX behind the SSLContext object."""
from __future__ import annotations

import ctypes
import logging
import os
import ssl
import sys

import _ssl

log = logging.getLogger("parley.tls")

_TLS13_SUITES = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
_GROUPS = "X25519:prime256v1:secp384r1"
_INTERMEDIATE_CIPHERS = ":".join([
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES256-GCM-SHA384", "DHE-RSA-CHACHA20-POLY1305"])

# name -> (lowest TLS version, TLS 1.2 ciphers or None when TLS 1.2 is off)
PROFILES = {"intermediate": (ssl.TLSVersion.TLSv1_2, _INTERMEDIATE_CIPHERS),
            "modern": (ssl.TLSVersion.TLSv1_3, None)}

_SSL_CTRL_SET_GROUPS_LIST = 92  # OpenSSL's SSL_CTX_set1_groups_list() is SSL_CTX_ctrl() with this command
# CPython versions whose PySSLContext is known to begin with PyObject_HEAD, then SSL_CTX *ctx (Modules/_ssl.c,
# 3.11 to 3.14). Any other runtime is a doubt: Python's defaults apply, with a warning.
LAYOUT_VERSIONS = ((3, 11), (3, 14))
# The SSL_METHOD each protocol makes its SSL_CTX with (_ssl.c): an SSL_CTX holds that static pointer among
# its first fields (OpenSSL 1.1.1 and 3.x: libctx, method, ...).
_METHODS = {ssl.PROTOCOL_TLS_SERVER: "TLS_server_method", ssl.PROTOCOL_TLS_CLIENT: "TLS_client_method",
            ssl.PROTOCOL_TLS: "TLS_method"}
_METHOD_SEARCH_BYTES = 64


def _libssl() -> ctypes.CDLL:
    lib = ctypes.CDLL(_ssl.__file__)  # dlsym through this handle finds the libssl _ssl was linked against
    lib.SSL_CTX_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_char_p]
    lib.SSL_CTX_ctrl.restype = ctypes.c_long
    lib.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.SSL_CTX_set_ciphersuites.restype = ctypes.c_int
    lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_get_options.restype = ctypes.c_uint64
    for name in _METHODS.values():
        getattr(lib, name).argtypes = []
        getattr(lib, name).restype = ctypes.c_void_p
    return lib


_LIB: ctypes.CDLL | None
try:
    _LIB = _libssl()
except (OSError, AttributeError) as exc:  # a Python without a dynamically linked OpenSSL 1.1.1+
    _LIB = None
    log.warning("TLS groups and TLS 1.3 suites cannot be restricted (%s): OpenSSL's defaults apply", exc)


class LayoutDoubt(Exception):
    """The SSL_CTX behind an SSLContext could not be found for certain: nothing is written through it."""


def _memory(address: int, size: int) -> bytes:
    """size bytes at address, read through /proc/self/mem: an unmapped address is an OSError there, where
    reading it directly would crash the process."""
    try:
        fd = os.open("/proc/self/mem", os.O_RDONLY)
    except OSError as exc:
        raise LayoutDoubt(f"this process's memory cannot be checked ({exc.strerror})") from None
    try:
        data = os.pread(fd, size, address)
    except (OSError, OverflowError, ValueError):
        raise LayoutDoubt(f"the SSL_CTX pointer {address:#x} is not readable memory") from None
    finally:
        os.close(fd)
    if len(data) != size:
        raise LayoutDoubt(f"the SSL_CTX pointer {address:#x} is not readable memory")
    return data


def _ssl_ctx(context: ssl.SSLContext, lib: ctypes.CDLL) -> int:
    """The SSL_CTX* of an SSLContext: CPython's PySSLContext begins with PyObject_HEAD, then SSL_CTX *ctx.
    Each step is checked before the next touches memory: the runtime and the object's type (the read stays
    inside the object), then the word found there through /proc/self/mem (readable, and holding the
    SSL_METHOD this context's protocol is made with), and only then OpenSSL is asked for the context's
    options, which must be the ones Python reports. LayoutDoubt at the first step that fails."""
    version = sys.version_info[:2]
    if sys.implementation.name != "cpython" or not LAYOUT_VERSIONS[0] <= version <= LAYOUT_VERSIONS[1]:
        raise LayoutDoubt(f"the SSLContext layout of {sys.implementation.name} {version[0]}.{version[1]} "
                          "is not one this code knows")
    offset, word = object.__basicsize__, ctypes.sizeof(ctypes.c_void_p)
    if type(context).__basicsize__ < offset + word or not isinstance(context, _ssl._SSLContext):
        raise LayoutDoubt(f"{type(context).__name__} is not CPython's SSLContext")
    method = _METHODS.get(context.protocol)  # the protocol is a field of the Python object: no SSL_CTX read
    if method is None:
        raise LayoutDoubt(f"the protocol {context.protocol!r} is not one this code knows")
    pointer = int.from_bytes(_memory(id(context) + offset, word), sys.byteorder)
    if not pointer or pointer % word:
        raise LayoutDoubt(f"the word after the object header ({pointer:#x}) is not an SSL_CTX pointer")
    method_bytes = getattr(lib, method)().to_bytes(word, sys.byteorder)
    head = _memory(pointer, _METHOD_SEARCH_BYTES)
    if not any(head[at:at + word] == method_bytes for at in range(0, len(head), word)):
        raise LayoutDoubt(f"the memory at {pointer:#x} is not an SSL_CTX made with {method}()")
    if lib.SSL_CTX_get_options(pointer) != context.options:
        raise LayoutDoubt(f"the SSL_CTX at {pointer:#x} reports other options than the SSLContext")
    return pointer


def restrict_groups_and_suites(context: ssl.SSLContext) -> bool:
    """Key exchange X25519, P-256, P-384 only; TLS 1.3 suites as Mozilla lists them. True when applied; on
    any doubt about where the SSL_CTX is, False with a WARNING, and Python's defaults for both apply."""
    if _LIB is None:
        return False
    try:
        pointer = _ssl_ctx(context, _LIB)
    except LayoutDoubt as exc:
        log.warning("TLS groups and TLS 1.3 suites not restricted, Python's defaults apply: %s", exc)
        return False
    if _LIB.SSL_CTX_ctrl(pointer, _SSL_CTRL_SET_GROUPS_LIST, 0, _GROUPS.encode()) != 1:
        raise ssl.SSLError(f"OpenSSL refused the groups {_GROUPS}")
    if _LIB.SSL_CTX_set_ciphersuites(pointer, _TLS13_SUITES.encode()) != 1:
        raise ssl.SSLError(f"OpenSSL refused the TLS 1.3 suites {_TLS13_SUITES}")
    return True


def apply(context: ssl.SSLContext, profile: str) -> ssl.SSLContext:
    """Set an SSLContext (server or client) to a Mozilla profile: "intermediate" or "modern"."""
    minimum, ciphers = PROFILES[profile]
    context.minimum_version = minimum
    context.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
    if ciphers:
        context.set_ciphers(ciphers)
    # Mozilla: every allowed cipher is strong, so the client's order (e.g. ChaCha20 on phones) wins.
    context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    restrict_groups_and_suites(context)
    return context


def server_context(profile: str) -> ssl.SSLContext:
    return apply(ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), profile)


def client_context(profile: str) -> ssl.SSLContext:
    """Verifies the peer against the system's CAs and its host name, like ssl.create_default_context()."""
    return apply(ssl.create_default_context(), profile)
