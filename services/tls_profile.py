"""Mozilla's TLS configurations (https://ssl-config.mozilla.org, guidelines 5.7) for the HTTPS listener and
for every TLS client Parley opens (webhooks, the AI provider): versions, TLS 1.2 ciphers, TLS 1.3 suites
and key-exchange groups, exactly as the profile lists them.

Python 3.11's ssl module sets TLS 1.2 ciphers (set_ciphers) but no TLS 1.3 suite list and only one group
(set_ecdh_curve; set_groups arrived in 3.13), and its defaults also accept X448, secp521r1 and CBC
ciphers. The two missing calls go to OpenSSL directly, through the libssl that Python's _ssl module is
linked against, on the SSL_CTX behind the SSLContext object."""
import ctypes
import logging
import ssl

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


def _libssl():
    lib = ctypes.CDLL(_ssl.__file__)  # dlsym through this handle finds the libssl _ssl was linked against
    lib.SSL_CTX_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_char_p]
    lib.SSL_CTX_ctrl.restype = ctypes.c_long
    lib.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.SSL_CTX_set_ciphersuites.restype = ctypes.c_int
    lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_get_options.restype = ctypes.c_uint64
    return lib


try:
    _LIB = _libssl()
except (OSError, AttributeError) as exc:  # a Python without a dynamically linked OpenSSL 1.1.1+
    _LIB = None
    log.warning("TLS groups and TLS 1.3 suites cannot be restricted (%s): OpenSSL's defaults apply", exc)


def _ssl_ctx(context):
    """The SSL_CTX* of an SSLContext: CPython's PySSLContext begins with PyObject_HEAD, then SSL_CTX *ctx.
    Checked against the options both sides report before anything is written through it."""
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer or _LIB.SSL_CTX_get_options(pointer) != context.options:
        raise RuntimeError("the SSLContext layout is not the one expected")
    return pointer


def restrict_groups_and_suites(context):
    """Key exchange X25519, P-256, P-384 only; TLS 1.3 suites as Mozilla lists them. True when applied."""
    if _LIB is None:
        return False
    try:
        pointer = _ssl_ctx(context)
    except RuntimeError as exc:
        log.warning("TLS groups and TLS 1.3 suites not restricted: %s", exc)
        return False
    if _LIB.SSL_CTX_ctrl(pointer, _SSL_CTRL_SET_GROUPS_LIST, 0, _GROUPS.encode()) != 1:
        raise ssl.SSLError(f"OpenSSL refused the groups {_GROUPS}")
    if _LIB.SSL_CTX_set_ciphersuites(pointer, _TLS13_SUITES.encode()) != 1:
        raise ssl.SSLError(f"OpenSSL refused the TLS 1.3 suites {_TLS13_SUITES}")
    return True


def apply(context, profile):
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


def server_context(profile):
    return apply(ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), profile)


def client_context(profile):
    """Verifies the peer against the system's CAs and its host name, like ssl.create_default_context()."""
    return apply(ssl.create_default_context(), profile)
