"""Holds a flood of idle and half-sent connections against the served MAAS while python-libmaas, a real client, lists
the machines: the listener's connection cap and timeouts must keep the site answering.

usage: flood_client.py MAAS_URL API_KEY COUNT
"""

import socket
import sys
import urllib.parse

from maas.client import connect


def main():
    url, key, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    parsed = urllib.parse.urlparse(url)
    held = []
    for index in range(count):
        sock = socket.create_connection((parsed.hostname, parsed.port))
        if index % 3 == 0:
            sock.sendall(b"GET /MAAS/api/2.0/machines/ HTTP/1.1\r\nHost: maas\r\n")
        held.append(sock)
    machines = connect(url, apikey=key).machines.list()
    print(f"flood: python-libmaas listed {len(machines)} machines with {count} idle connections held")
    closed = 0
    for sock in held:
        sock.setblocking(False)
        try:
            if sock.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except ConnectionError:
            closed += 1
    print(f"flood: the site closed {closed} of them to make room")
    if closed == 0:
        sys.exit("flood: no held connection was closed: the listener has no connection cap")


if __name__ == "__main__":
    main()
