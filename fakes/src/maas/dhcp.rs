//! The fake rack DHCP server: leases by MAC on the VLANs the rack serves, with the options MAAS renders into
//! `dhcpd.conf` — among them option 26 (interface MTU), which MAAS emits only when the VLAN MTU is not 1500
//! (LP #1735207, `src/maasserver/templates/dhcp/dhcpd.conf.template`; notes §8.2).
//!
//! The 2026-07-20 record (`seeds/001_5e13b5e5e5d7ab8b.txt`) read exactly this: the metal-admin VLAN MTU was 1500, so
//! no option 26 was served and the ephemeral NIC came up at 1500 whatever the libvirt network said.
//!
//! Deviation from real MAAS: one pool per subnet, handed out in order from `.100` of a `/24` (any other prefix length
//! is treated as `/24`); no DHCPREQUEST/ACK round, an offer is a lease; no failover peer.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The lease time offered. Deviation from real MAAS: the value MAAS renders into dhcpd.conf was not read
/// (UNCONFIRMED); ten minutes is an assumption.
pub const LEASE_TIME_MS: u64 = 600_000;
/// The MTU for which MAAS renders no option 26.
pub const DEFAULT_MTU: u16 = 1500;

/// What the rack knows about one VLAN it serves DHCP on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DhcpScope {
    pub vlan_id: u64,
    pub mtu: u16,
    pub cidr: String,
    pub gateway_ip: String,
    pub dns_server: String,
}

/// One DHCP option as sent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "option")]
pub enum DhcpOption {
    /// Option 3.
    Router { address: String },
    /// Option 6.
    DomainNameServer { address: String },
    /// Option 26: a 16-bit MTU, minimum 68 (RFC 2132).
    InterfaceMtu { mtu: u16 },
    /// Option 51.
    LeaseTime { seconds: u32 },
}

impl DhcpOption {
    /// The option code on the wire.
    pub fn code(&self) -> u8 {
        match self {
            DhcpOption::Router { .. } => 3,
            DhcpOption::DomainNameServer { .. } => 6,
            DhcpOption::InterfaceMtu { .. } => 26,
            DhcpOption::LeaseTime { .. } => 51,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub mac: String,
    pub ip: String,
    pub vlan_id: u64,
    pub expires_ms: u64,
    pub options: Vec<DhcpOption>,
}

impl Lease {
    /// The MTU a client configures: option 26 if present, else 1500.
    pub fn mtu(&self) -> u16 {
        self.options
            .iter()
            .find_map(|option| match option {
                DhcpOption::InterfaceMtu { mtu } => Some(*mtu),
                _ => None,
            })
            .unwrap_or(DEFAULT_MTU)
    }
}

/// Which clients get no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DhcpFault {
    /// The server answers nobody and has forgotten every lease (a wiped lease file, a dead dhcpd).
    LoseAll,
    /// These MACs get no answer and their leases are gone.
    LoseMacs { macs: BTreeSet<String> },
}

/// The rack's DHCP server.
#[derive(Debug, Clone, Default)]
pub struct Dhcp {
    scopes: BTreeMap<u64, DhcpScope>,
    leases: BTreeMap<String, Lease>,
    next_host: BTreeMap<u64, u32>,
    fault: Option<DhcpFault>,
}

impl Dhcp {
    pub fn new() -> Dhcp {
        Dhcp::default()
    }

    /// Starts serving (or reconfigures) a VLAN. A change of MTU applies to the next offer: MAAS reconfigures
    /// dhcpd when a VLAN's MTU changes.
    pub fn configure(&mut self, scope: DhcpScope) {
        self.next_host.entry(scope.vlan_id).or_insert(100);
        self.scopes.insert(scope.vlan_id, scope);
    }

    pub fn scope(&self, vlan_id: u64) -> Option<&DhcpScope> {
        self.scopes.get(&vlan_id)
    }

    /// Injects a lease-loss fault: the affected leases are dropped at once and the clients get no offer until
    /// [`Dhcp::repair`].
    pub fn set_fault(&mut self, fault: DhcpFault) {
        match &fault {
            DhcpFault::LoseAll => self.leases.clear(),
            DhcpFault::LoseMacs { macs } => self.leases.retain(|mac, _| !macs.contains(mac)),
        }
        self.fault = Some(fault);
    }

    pub fn repair(&mut self) {
        self.fault = None;
    }

    pub fn lease(&self, mac: &str) -> Option<&Lease> {
        self.leases.get(&mac.to_ascii_lowercase())
    }

    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.values()
    }

    /// A DISCOVER from `mac` on `vlan_id`: the lease offered, or `None` when the server stays silent (no scope on
    /// that VLAN, or a lease-loss fault). A client that already holds a lease gets the same address back.
    pub fn discover(&mut self, now_ms: u64, mac: &str, vlan_id: u64) -> Option<Lease> {
        let mac = mac.to_ascii_lowercase();
        let silenced = match &self.fault {
            None => false,
            Some(DhcpFault::LoseAll) => true,
            Some(DhcpFault::LoseMacs { macs }) => macs.contains(&mac),
        };
        if silenced {
            return None;
        }
        let scope = self.scopes.get(&vlan_id)?.clone();
        let ip = match self.leases.get(&mac) {
            Some(lease) if lease.vlan_id == vlan_id => lease.ip.clone(),
            _ => {
                let host = self.next_host.entry(vlan_id).or_insert(100);
                let ip = format!("{}.{}", network_prefix(&scope.cidr), host);
                *host += 1;
                ip
            }
        };
        let mut options = vec![
            DhcpOption::Router { address: scope.gateway_ip.clone() },
            DhcpOption::DomainNameServer { address: scope.dns_server.clone() },
        ];
        // `option interface-mtu` is rendered only for a VLAN MTU other than 1500.
        if scope.mtu != DEFAULT_MTU {
            options.push(DhcpOption::InterfaceMtu { mtu: scope.mtu });
        }
        options.push(DhcpOption::LeaseTime { seconds: (LEASE_TIME_MS / 1000) as u32 });
        let lease = Lease { mac: mac.clone(), ip, vlan_id, expires_ms: now_ms + LEASE_TIME_MS, options };
        self.leases.insert(mac, lease.clone());
        Some(lease)
    }
}

/// The first three octets of a `/24` CIDR.
fn network_prefix(cidr: &str) -> String {
    let address = cidr.split('/').next().unwrap_or(cidr);
    let octets: Vec<&str> = address.split('.').collect();
    octets.iter().take(3).copied().collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(mtu: u16) -> DhcpScope {
        DhcpScope {
            vlan_id: 5001,
            mtu,
            cidr: "10.10.0.0/24".into(),
            gateway_ip: "10.10.0.1".into(),
            dns_server: "10.10.0.2".into(),
        }
    }

    #[test]
    fn option_26_is_sent_only_when_the_vlan_mtu_is_not_1500() {
        let mut dhcp = Dhcp::new();
        dhcp.configure(scope(1500));
        let lease = dhcp.discover(0, "52:54:00:00:00:01", 5001).unwrap();
        assert!(lease.options.iter().all(|option| option.code() != 26), "{:?}", lease.options);
        assert_eq!(lease.mtu(), 1500);
        dhcp.configure(scope(9000));
        let lease = dhcp.discover(1, "52:54:00:00:00:01", 5001).unwrap();
        assert!(lease.options.contains(&DhcpOption::InterfaceMtu { mtu: 9000 }));
        assert_eq!(lease.mtu(), 9000);
        assert_eq!(lease.ip, "10.10.0.100", "a renewing client keeps its address");
    }

    #[test]
    fn leases_are_handed_out_by_mac_in_order_and_unknown_vlans_get_no_offer() {
        let mut dhcp = Dhcp::new();
        dhcp.configure(scope(1500));
        assert_eq!(dhcp.discover(0, "52:54:00:00:00:01", 5001).unwrap().ip, "10.10.0.100");
        assert_eq!(dhcp.discover(0, "52:54:00:00:00:02", 5001).unwrap().ip, "10.10.0.101");
        assert_eq!(dhcp.discover(0, "52:54:00:00:00:03", 7777), None);
        assert_eq!(dhcp.lease("52:54:00:00:00:02").unwrap().expires_ms, LEASE_TIME_MS);
    }

    #[test]
    fn lease_loss_drops_leases_and_silences_the_server_until_repaired() {
        let mut dhcp = Dhcp::new();
        dhcp.configure(scope(1500));
        dhcp.discover(0, "52:54:00:00:00:01", 5001).unwrap();
        dhcp.discover(0, "52:54:00:00:00:02", 5001).unwrap();
        dhcp.set_fault(DhcpFault::LoseMacs { macs: BTreeSet::from(["52:54:00:00:00:01".to_owned()]) });
        assert!(dhcp.lease("52:54:00:00:00:01").is_none());
        assert!(dhcp.discover(1, "52:54:00:00:00:01", 5001).is_none());
        assert!(dhcp.discover(1, "52:54:00:00:00:02", 5001).is_some());
        dhcp.set_fault(DhcpFault::LoseAll);
        assert_eq!(dhcp.leases().count(), 0);
        assert!(dhcp.discover(2, "52:54:00:00:00:02", 5001).is_none());
        dhcp.repair();
        assert!(dhcp.discover(3, "52:54:00:00:00:01", 5001).is_some());
    }
}
