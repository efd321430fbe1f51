"""sslyze's Mozilla TLS check of HOST:PORT against a profile; prints the issues found as JSON ({} when compliant).

Runs in .venv-tools (`make tools`), not in Parley's .venv: sslyze pins cryptography<47 and Parley runs 50.x.
Usage: .venv-tools/bin/python scripts/mozilla_tls_check.py HOST PORT intermediate|modern"""
import json
import sys

from sslyze import Scanner, ServerNetworkLocation, ServerScanRequest
from sslyze.mozilla_tls_profile.tls_config_checker import (
    SCAN_COMMANDS_NEEDED_BY_MOZILLA_CHECKER,
    MozillaTlsConfiguration,
    ServerNotCompliantWithTlsConfiguration,
    TlsConfigurationEnum,
    check_server_against_tls_configuration,
)


def main(host, port, profile):
    scanner = Scanner()
    scanner.queue_scans([ServerScanRequest(server_location=ServerNetworkLocation(host, int(port)),
                                           scan_commands=SCAN_COMMANDS_NEEDED_BY_MOZILLA_CHECKER)])
    (result,) = list(scanner.get_results())
    try:
        check_server_against_tls_configuration(result, MozillaTlsConfiguration.get(TlsConfigurationEnum(profile)))
    except ServerNotCompliantWithTlsConfiguration as exc:
        return exc.issues
    return {}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
