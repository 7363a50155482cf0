"""sushy against `fleetsim serve`'s Redfish: walk Systems with the login given, read the power state, set a one-time
PXE boot override, reset On. Arguments: Redfish root URL, user, password, expected system count."""

import sys

import sushy


def main():
    root, user, password, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    service = sushy.Sushy(root, username=user, password=password)
    systems = service.get_system_collection()
    members = systems.get_members()
    assert len(members) == expected, [m.identity for m in members]
    for system in members:
        assert system.power_state in (sushy.SYSTEM_POWER_STATE_ON, sushy.SYSTEM_POWER_STATE_OFF), system.power_state
    system = members[0]
    system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_PXE, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE)
    system.refresh()
    assert system.boot.target == sushy.BOOT_SOURCE_TARGET_PXE, system.boot.target
    assert system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_ONCE, system.boot.enabled
    system.reset_system(sushy.RESET_ON)
    system.refresh()
    assert system.power_state == sushy.SYSTEM_POWER_STATE_ON, system.power_state
    print(f"sushy: walked {len(members)} systems as {user}; {system.identity} PXE once, reset On, power On")


if __name__ == "__main__":
    main()
