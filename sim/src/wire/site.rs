//! The MAAS site on the wire: the `maas` turmoil host serving the site's front ends (the MAAS API on
//! [`MAAS_PORT`], Redfish on [`REDFISH_PORT`], the secrets store on [`VAULT_PORT`] over simulated TCP; DNS on
//! [`DNS_PORT`] over simulated UDP), and the engine's real clients of them in the controller's host
//! ([`WireSite`]).
//!
//! One model: the front ends serve the world's own site front ([`crate::world::site::SiteWorld::front`]), so the fault
//! steps, the machines' progress (the site task) and the fast adapters the world still uses (the agents' enrolment,
//! SSH) act on the same `Site`. What the front ends record in its event sink, the site task drains and traces as it
//! does the fast adapters' events: every answered request pokes it.
//!
//! The hub stays in-world (the controller's `SimHub`): the hub's front end and client exist, but moving the hub
//! would move the fleet's agents' heartbeats onto the wire too (one turmoil host per node), which is the cost the
//! notes warn about; the site is where the real adapters matter.
//!
//! Network faults between `controller` and `maas` are mirrored onto turmoil's verbs (see [`mirror_step`]).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use engine::adapters::http::dns::DnsClient;
use engine::adapters::http::maas::MaasClient;
use engine::adapters::http::secrets::{SecretsClient, SiteConfigDefaults};
use fakes::http::{Clock, SharedSite};
use tokio::sync::Notify;

use crate::model::faults::{Step, decommission_step, fleet_step, instance_step, rollout_step, site_step};
use crate::wire::http::HyperTransport;
use crate::wire::turmoil::{SimListener, TurmoilConnector, TurmoilDatagram, serve_datagrams};
use crate::wire::world::CONTROLLER_HOST;
use crate::world::plug::{PluggedDatagram, PluggedHttp, SiteClients, SitePlug};
use crate::world::site::CONTROLLER_MAAS_USER;
use crate::world::{CONTROLLER_ID, SimClock, World};

/// The turmoil host of the site's services.
pub const MAAS_HOST: &str = "maas";
/// The MAAS region API (MAAS's own port).
pub const MAAS_PORT: u16 = 5240;
/// The BMCs' Redfish service (one front for every machine's BMC).
pub const REDFISH_PORT: u16 = 8000;
/// The secrets store (Vault's port).
pub const VAULT_PORT: u16 = 8200;
/// The rack's DNS resolver.
pub const DNS_PORT: u16 = 53;
/// What the resolver's `DnsQuery` events name as the asking client.
const DNS_CLIENT: &str = "controller";
/// How often the `maas` host looks for the world's site before the world has built it (the first tick).
const FRONT_POLL_MS: u64 = 1;

/// Mixed into the run's seed for the MAAS client's nonces and the DNS client's query ids (ASCII `masnonce`, `dns`):
/// each client's sequence is a function of the run's seed alone.
const MAAS_NONCE_SALT: u64 = 0x6d61_736e_6f6e_6365;
const DNS_ID_SALT: u64 = 0x0064_6e73;

type Http = HyperTransport<TurmoilConnector>;

/// The wire's part of an onboarding world.
pub(crate) struct WireSite {
    /// The current controller process's clients: a controller that boots again gets new ones (new connections, its
    /// nonces and query ids from a stream of its own); the old ones go with the old process's tasks.
    clients: RefCell<Rc<SiteClients>>,
    seed: u64,
    /// Why `controller`–`maas` is partitioned on turmoil now (a step's partition, the `maas` host down): repaired
    /// when no reason is left.
    partitioned: RefCell<BTreeSet<&'static str>>,
}

impl SitePlug for WireSite {
    fn clients(&self) -> Rc<SiteClients> {
        self.clients.borrow().clone()
    }

    /// The controller booted (again): its process gets new clients (new connections, its own nonce and query-id
    /// streams), as a restarted process would.
    fn controller_booted(&self, world: &Rc<World>, boot: u64) {
        if boot > 1 {
            *self.clients.borrow_mut() = Rc::new(clients(world, self.seed, boot));
        }
    }

    fn mirror_step(&self, step: &Step) {
        mirror_step(self, step);
    }
}

/// What the `maas` host needs from the world: the site front, the model's clock and the site task's wake-up.
#[derive(Clone)]
pub(crate) struct Published {
    front: SharedSite,
    clock: Clock,
    wake: Arc<Notify>,
}

/// Where the world publishes its site for the `maas` host (both run on the simulation's one thread).
pub(crate) type FrontSlot = Rc<RefCell<Option<Published>>>;

fn url(port: u16) -> String {
    format!("http://{MAAS_HOST}:{port}")
}

/// Gives an onboarding world its wire clients and publishes its site front for the `maas` host. Runs in the
/// controller's turmoil host, before the world boots. Worlds without a site are left alone.
pub(crate) fn attach(world: &Rc<World>, seed: u64, slot: &FrontSlot) {
    if world.site.is_none() {
        return;
    }
    let site = world.site();
    let clients = clients(world, seed, 1);
    site.set_plug(Rc::new(WireSite {
        clients: RefCell::new(Rc::new(clients)),
        seed,
        partitioned: RefCell::new(BTreeSet::new()),
    }));
    *slot.borrow_mut() =
        Some(Published { front: site.front.clone(), clock: site.wire_clock(), wake: site.wake.clone() });
}

/// The clients of the controller's `boot`th process.
fn clients(world: &Rc<World>, seed: u64, boot: u64) -> SiteClients {
    let site = world.site();
    let seed = seed ^ boot.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let (api_key, vault_token) = {
        let mut front = site.lock();
        (front.api_key_for(CONTROLLER_MAAS_USER), front.vault_token())
    };
    let timeout_ms = world.spec.engine.call_timeout_ms;
    let transport = |port| {
        let http: Http = HyperTransport::with_connector(TurmoilConnector, &url(port)).expect("a valid base url");
        PluggedHttp(Rc::new(http))
    };
    let clock = SimClock { world: world.clone(), host: CONTROLLER_ID };
    let maas = MaasClient::new(
        transport(MAAS_PORT),
        clock,
        &engine::secret::Secret::new(api_key),
        seed ^ MAAS_NONCE_SALT,
        timeout_ms,
    )
    .expect("the fake mints well-formed api keys")
    .with_clock_origin_unix_ms(fakes::http::WIRE_EPOCH * 1000);
    let secrets =
        SecretsClient::new(transport(VAULT_PORT), engine::secret::Secret::new(vault_token.expose()), timeout_ms)
            .with_site_defaults(SiteConfigDefaults {
                metadata_host: fakes::maas::METADATA_HOST.to_owned(),
                pxe_vlan_vid: u16::try_from(fakes::maas::PXE_VLAN_ID).unwrap_or(u16::MAX),
                roce_vlan_vid: u16::try_from(fakes::maas::ROCE_VLAN_ID).unwrap_or(u16::MAX),
            });
    let datagrams = PluggedDatagram(Rc::new(TurmoilDatagram::new(MAAS_HOST, DNS_PORT)));
    let resolver = DnsClient::new(datagrams, seed ^ DNS_ID_SALT, timeout_ms);
    SiteClients { maas, secrets, resolver }
}

/// The `maas` host's software: waits for the world's site, then serves its front ends until the run ends.
pub(crate) async fn serve(slot: FrontSlot) -> turmoil::Result {
    let published = loop {
        if let Some(published) = slot.borrow().clone() {
            break published;
        }
        tokio::time::sleep(Duration::from_millis(FRONT_POLL_MS)).await;
    };
    let Published { front, clock, wake } = published;
    // Every answered request may have changed what the site task waits for, and may have left events to trace.
    let poke = {
        let wake = wake.clone();
        tower::util::MapResponseLayer::new(move |response: axum::response::Response| {
            wake.notify_one();
            response
        })
    };
    let maas = fakes::http::maas::router(front.clone(), clock.clone()).layer(poke.clone());
    let redfish = fakes::http::redfish::router(front.clone(), clock.clone()).layer(poke.clone());
    let vault = fakes::http::vault::router(front.clone(), clock.clone()).layer(poke);
    for (port, router) in [(MAAS_PORT, maas), (REDFISH_PORT, redfish), (VAULT_PORT, vault)] {
        let listener = SimListener::bind(port).await?;
        tokio::task::spawn_local(async move {
            let _ = axum::serve(listener, router).await;
        });
    }
    serve_datagrams(DNS_PORT, move |_, query| {
        let answer = fakes::http::dns::answer(&front, &clock, DNS_CLIENT, query);
        wake.notify_one();
        Some(answer)
    })
    .await?;
    Ok(())
}

/// Mirrors a step onto turmoil's network between the controller's and the `maas` host (the site's services), on
/// the wire transport; the world's own network keeps the step too (the site's in-world paths: SSH, enrolment).
///
/// | step | turmoil |
/// |---|---|
/// | `partition`/`repair` controller–maas | `partition`/`repair`: a new connection is refused at once, an established one goes half-open (its calls time out) |
/// | `partition_oneway`/`repair_oneway` | the same one-way verbs |
/// | `hold`/`release` controller–maas | `hold`/`release`: messages wait, then arrive (late execution) |
/// | `crash`/`restart` of `maas` | `partition`/`repair` controller–maas: connecting to the host is refused, as the fast transport refuses a call to a down host |
///
/// Not mirrored: `link_loss`, `link_latency` (turmoil's per-link knobs are `Sim` methods, out of reach from inside
/// the simulation); the world's own network still applies them to its in-world paths.
fn mirror_step(wire: &WireSite, step: &Step) {
    let between = |a: &str, b: &str| {
        (a == crate::model::spec::CONTROLLER && b == crate::model::spec::MAAS)
            || (a == crate::model::spec::MAAS && b == crate::model::spec::CONTROLLER)
    };
    let turmoil_name = |name: &str| if name == crate::model::spec::MAAS { MAAS_HOST } else { CONTROLLER_HOST };
    let mut reasons = wire.partitioned.borrow_mut();
    let before = !reasons.is_empty();
    match step {
        Step::Partition { a, b } if between(a, b) => {
            reasons.insert("partition");
        }
        Step::Repair { a, b } if between(a, b) => {
            reasons.remove("partition");
        }
        Step::Crash { target } if target == crate::model::spec::MAAS => {
            reasons.insert("maas down");
        }
        Step::Restart { target } if target == crate::model::spec::MAAS => {
            reasons.remove("maas down");
        }
        Step::PartitionOneway { from, to } if between(from, to) => {
            turmoil::partition_oneway(turmoil_name(from), turmoil_name(to))
        }
        Step::RepairOneway { from, to } if between(from, to) => {
            turmoil::repair_oneway(turmoil_name(from), turmoil_name(to))
        }
        Step::Hold { a, b } if between(a, b) => turmoil::hold(CONTROLLER_HOST, MAAS_HOST),
        Step::Release { a, b } if between(a, b) => turmoil::release(CONTROLLER_HOST, MAAS_HOST),
        // Not between the controller and the `maas` host: the world's own network has it.
        Step::Partition { .. }
        | Step::Repair { .. }
        | Step::Crash { .. }
        | Step::Restart { .. }
        | Step::PartitionOneway { .. }
        | Step::RepairOneway { .. }
        | Step::Hold { .. }
        | Step::Release { .. } => {}
        // Not mirrored (see above), and a clock is no network's.
        Step::LinkLoss { .. } | Step::LinkLatency { .. } | Step::ClockSkew { .. } => {}
        fleet_step!() | rollout_step!() | site_step!() | decommission_step!() | instance_step!() => {}
    }
    match (before, !reasons.is_empty()) {
        (false, true) => turmoil::partition(CONTROLLER_HOST, MAAS_HOST),
        (true, false) => turmoil::repair(CONTROLLER_HOST, MAAS_HOST),
        _ => {}
    }
}
