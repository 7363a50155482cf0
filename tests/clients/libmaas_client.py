"""python-libmaas against `fleetsim serve`: create, list, commission, abort, read interfaces, block devices and
events, delete. Arguments: MAAS url, API key, PXE MAC, power address, BMC user, BMC password. Exits non-zero (an
exception) on the first thing that differs from what a real region answers."""

import sys

from maas.client import connect


def main():
    url, apikey, mac, address, user, password = sys.argv[1:7]
    client = connect(url, apikey=apikey)
    machine = client.machines.create(
        "amd64",
        [mac],
        "redfish",
        hostname="gpu-01",
        power_parameters={"power_address": address, "power_user": user, "power_pass": password},
    )
    assert machine.status_name == "Commissioning", machine.status_name
    listed = [m.system_id for m in client.machines.list()]
    assert machine.system_id in listed, listed
    machine.abort()
    machine.refresh()
    assert machine.status_name == "New", machine.status_name
    machine.commission(wait=False)
    machine.refresh()
    assert machine.status_name == "Commissioning", machine.status_name
    machine.abort()
    interfaces = [(i.name, i.mac_address) for i in machine.interfaces]
    assert any(found == mac for _, found in interfaces), interfaces
    disks = [(d.name, d.id_path) for d in machine.block_devices]
    # An aborted commissioning gathered no storage yet: the fields are read when there are disks.
    assert all(path.startswith("/dev/disk/by-id/") for _, path in disks), disks
    assert machine.zone.name == "default" and machine.pool.name == "default"
    assert machine.domain.authoritative is True
    events = list(client.events.query(system_ids=[machine.system_id], level="DEBUG"))
    types = {event.event_type for event in events}
    assert "Commissioning" in types and "Aborted commissioning" in types, types
    machine.delete()
    assert machine.system_id not in [m.system_id for m in client.machines.list()]
    print(f"python-libmaas: created, listed, commissioned, aborted and deleted {machine.system_id}; "
          f"{len(interfaces)} interfaces, {len(disks)} block devices, {len(events)} events")


if __name__ == "__main__":
    main()
