//! The fake rack resolver: the DNS server the rack controller runs for the nodes it boots. It answers the
//! maas-internal names a booting node needs (above all the metadata host in cloud-init's `cloud-config-url`) and
//! recurses for everything else.
//!
//! The fault is the one of `seeds/001_5e13b5e5e5d7ab8b.txt`: the MAAS 3.7 rack-only agent resolver SERVFAILs every
//! query on an internet-isolated rack, so cloud-init never resolves the metadata host and the node boots to a login
//! prompt without fetching a single script. [`Dns::probe`] is the zero-cost read the engine makes before
//! commissioning ("observe, don't change the clock").
//!
//! Deviation from real MAAS: no TTLs, no caching, no record types other than A, and a zone is a name suffix.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The zone of the names the rack serves to its nodes.
pub const INTERNAL_ZONE: &str = "maas-internal";
/// The host in the metadata URL the commissioning kernel command line and the preseed carry.
pub const METADATA_HOST: &str = "metadata.maas-internal";

/// A resolver's answer to one A query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "rcode")]
pub enum DnsAnswer {
    NoError { address: String },
    NxDomain,
    ServFail,
}

/// Which queries the resolver fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DnsFault {
    /// SERVFAIL for every query: the 2026-07-20 rack resolver. Recoverable by [`Dns::repair`].
    ServFailAll,
    /// SERVFAIL for names in these zones only.
    ServFailZones { zones: BTreeSet<String> },
}

/// The result of a resolver probe: resolve the metadata host and one external name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolverProbe {
    pub metadata_host: DnsAnswer,
    pub healthy: bool,
}

/// The rack resolver.
#[derive(Debug, Clone)]
pub struct Dns {
    records: BTreeMap<String, String>,
    fault: Option<DnsFault>,
    /// Whether the rack can reach the internet to recurse; an isolated rack answers SERVFAIL for external names
    /// even when healthy, as a recursive resolver without upstreams does.
    upstream_reachable: bool,
    queries: u64,
    servfails: u64,
}

impl Dns {
    /// A resolver serving `metadata.maas-internal` (and `rack.maas-internal`) at `rack_address`.
    pub fn new(rack_address: &str) -> Dns {
        let mut records = BTreeMap::new();
        records.insert(METADATA_HOST.to_owned(), rack_address.to_owned());
        records.insert(format!("rack.{INTERNAL_ZONE}"), rack_address.to_owned());
        Dns { records, fault: None, upstream_reachable: false, queries: 0, servfails: 0 }
    }

    pub fn add_record(&mut self, name: &str, address: &str) {
        self.records.insert(name.to_owned(), address.to_owned());
    }

    pub fn set_upstream_reachable(&mut self, reachable: bool) {
        self.upstream_reachable = reachable;
    }

    /// Injects a fault; replaces any fault already there.
    pub fn set_fault(&mut self, fault: DnsFault) {
        self.fault = Some(fault);
    }

    pub fn repair(&mut self) {
        self.fault = None;
    }

    pub fn fault(&self) -> Option<&DnsFault> {
        self.fault.as_ref()
    }

    /// Queries answered so far, and how many of them were SERVFAIL.
    pub fn counters(&self) -> (u64, u64) {
        (self.queries, self.servfails)
    }

    /// Answers one A query.
    pub fn resolve(&mut self, name: &str) -> DnsAnswer {
        self.queries += 1;
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let failing = match &self.fault {
            None => false,
            Some(DnsFault::ServFailAll) => true,
            Some(DnsFault::ServFailZones { zones }) => zones.iter().any(|zone| in_zone(&name, zone)),
        };
        let answer = if failing {
            DnsAnswer::ServFail
        } else if let Some(address) = self.records.get(&name) {
            DnsAnswer::NoError { address: address.clone() }
        } else if in_zone(&name, INTERNAL_ZONE) {
            DnsAnswer::NxDomain
        } else if self.upstream_reachable {
            // Deviation from real MAAS: no real internet behind the fake; every external name is unknown.
            DnsAnswer::NxDomain
        } else {
            DnsAnswer::ServFail
        };
        if answer == DnsAnswer::ServFail {
            self.servfails += 1;
        }
        answer
    }

    /// The health probe: resolve the metadata host. Healthy when it resolves.
    pub fn probe(&mut self) -> ResolverProbe {
        let metadata_host = self.resolve(METADATA_HOST);
        let healthy = matches!(metadata_host, DnsAnswer::NoError { .. });
        ResolverProbe { metadata_host, healthy }
    }
}

/// Whether `name` is `zone` or below it.
fn in_zone(name: &str, zone: &str) -> bool {
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    name == zone || name.ends_with(&format!(".{zone}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_healthy_rack_answers_the_internal_names() {
        let mut dns = Dns::new("10.10.0.2");
        assert_eq!(dns.resolve("Metadata.MAAS-internal."), DnsAnswer::NoError { address: "10.10.0.2".into() });
        assert_eq!(dns.resolve("nope.maas-internal"), DnsAnswer::NxDomain);
        assert_eq!(dns.resolve("archive.ubuntu.com"), DnsAnswer::ServFail, "isolated rack, no upstream");
        dns.set_upstream_reachable(true);
        assert_eq!(dns.resolve("archive.ubuntu.com"), DnsAnswer::NxDomain);
        assert!(dns.probe().healthy);
    }

    #[test]
    fn servfail_all_breaks_every_query_until_repaired() {
        let mut dns = Dns::new("10.10.0.2");
        dns.set_fault(DnsFault::ServFailAll);
        assert_eq!(dns.resolve(METADATA_HOST), DnsAnswer::ServFail);
        let probe = dns.probe();
        assert_eq!(probe, ResolverProbe { metadata_host: DnsAnswer::ServFail, healthy: false });
        assert_eq!(dns.counters(), (2, 2));
        dns.repair();
        assert!(dns.probe().healthy);
    }

    #[test]
    fn a_zone_fault_spares_other_zones() {
        let mut dns = Dns::new("10.10.0.2");
        dns.add_record("hub.fleet", "10.30.0.5");
        dns.set_fault(DnsFault::ServFailZones { zones: BTreeSet::from(["maas-internal".to_owned()]) });
        assert_eq!(dns.resolve(METADATA_HOST), DnsAnswer::ServFail);
        assert_eq!(dns.resolve("hub.fleet"), DnsAnswer::NoError { address: "10.30.0.5".into() });
        assert!(!in_zone("notmaas-internal", "maas-internal"));
    }
}
