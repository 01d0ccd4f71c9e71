#!/bin/sh
# One-shot: register storaged with metad (NebulaGraph 3.x needs ADD HOSTS once per storage
# host), and set root's password from NEBULA_PASSWORD. Safe to run again.
set -u
console() { nebula-console -addr graphd -port 9669 -u root -p "$1" -e "$2"; }
for attempt in $(seq 1 90); do
    if console "$NEBULA_PASSWORD" 'ADD HOSTS "storaged0":9779' >/dev/null 2>&1; then
        echo "storaged0 registered"; exit 0
    fi
    # First start: root still has the default password; change it, then retry.
    if [ "$NEBULA_PASSWORD" != "nebula" ] \
        && console nebula "ALTER USER root WITH PASSWORD \"$NEBULA_PASSWORD\"" >/dev/null 2>&1; then
        echo "root password set"
    fi
    sleep 2
done
echo "graphd did not accept ADD HOSTS within 3 minutes" >&2
exit 1
