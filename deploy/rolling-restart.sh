#!/bin/sh
# Restart Parley's processes one at a time (an upgrade): each drains on SIGTERM while nginx sends new requests
# to the others, and the next one is restarted only once this one answers /healthz again.
# Usage: deploy/rolling-restart.sh 1 2 [3 ...]   (the systemd instances, parley@N)
set -eu
for n in "$@"; do
    systemctl restart "parley@$n"
    for _ in $(seq 1 60); do
        if curl -fsk -o /dev/null "https://127.0.0.1:844$n/healthz"; then
            echo "parley@$n is back"
            sleep 3  # nginx's fail_timeout (2 s) is over: it sends to this one again before the next stops
            continue 2
        fi
        sleep 1
    done
    echo "parley@$n did not come back: stopping the rolling restart" >&2
    exit 1
done
