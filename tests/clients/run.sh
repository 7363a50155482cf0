#!/usr/bin/env bash
# The real clients against `fleetsim serve`: python-libmaas and sushy (pinned in requirements.txt, from PyPI, in a
# virtual environment) and dig (Debian's dnsutils); python-libmaas again under a flood of idle connections; then the
# examples of docs/serve.md as written (curl, jq, python-libmaas, dig) against a second, fresh site. A missing client
# is a failure, never a skip. `.ci/run` calls it.
set -euo pipefail
cd "$(dirname "$0")/../.."
fleetsim=${FLEETSIM:-./target/debug/fleetsim}
venv=${CLIENTS_VENV:-target/clients-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q -r tests/clients/requirements.txt
for tool in dig:dnsutils jq:jq; do
    if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
        package=${tool##*:}
        apt-get install -y -q "$package" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "$package" >/dev/null; }
    fi
done
dir=$(mktemp -d)
"$fleetsim" serve --port 0 --speed 60 --machines 3 --write-site "$dir" >"$dir/banner" 2>"$dir/stderr" &
pid=$!
trap 'kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 300); do grep -q '^Ctrl-C stops' "$dir/banner" && break; kill -0 "$pid"; sleep 0.1; done
grep -q '^Ctrl-C stops' "$dir/banner" || { cat "$dir/stderr" >&2; exit 1; }
field() { sed -n "s|^  $1 *||p" "$dir/banner" | head -1; }
maas=$(field MAAS | sed 's|api/2.0/$||')
redfish=$(field Redfish | sed 's|/Systems$||')
secrets=$(field secrets | sed 's|/v1/$||')
admin=$(field admin | sed 's|/admin/state$||')
dns=$(field DNS | sed 's|^udp://||; s| .*||')
key=$(cat "$dir/maas-api-key")
mac=$(curl -sf "$admin/admin/state" | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["machines"][0]["pxe_mac"])')
login=$(curl -sf -H "X-Vault-Token: $(cat "$dir/secrets-token")" "$secrets/v1/secret/data/power/gpu-01")
user=$(echo "$login" | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["data"]["user"])')
pass=$(echo "$login" | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["data"]["password"])')
"$venv/bin/python" tests/clients/libmaas_client.py "$maas" "$key" "$mac" gpu-01 "$user" "$pass"
"$venv/bin/python" tests/clients/sushy_client.py "$redfish" admin "$(cat "$dir/redfish-password")" 3
"$venv/bin/python" tests/clients/sushy_client.py "$redfish" "$user" "$pass" 1
host=${dns%:*}; port=${dns##*:}
for transport in +notcp +tcp; do
    answer=$(dig @"$host" -p "$port" "$transport" +short metadata.maas-internal A)
    [ -n "$answer" ] || { echo "dig $transport: no A record" >&2; exit 1; }
    echo "dig $transport: metadata.maas-internal A $answer"
done
status=$(dig @"$host" -p "$port" CH metadata.maas-internal A | sed -n 's/.*status: \([A-Z]*\).*/\1/p')
[ "$status" = REFUSED ] || { echo "dig CH: status $status, expected REFUSED" >&2; exit 1; }
echo "dig CH: REFUSED"
"$venv/bin/python" tests/clients/flood_client.py "$maas" "$key" 2000
"$venv/bin/python" tests/clients/serve_docs.py "$fleetsim" docs/serve.md
