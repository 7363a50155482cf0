//! The instance driver (`engine::instance::driver`) against the cloud provider fake (`fakes::cloud`) through the
//! engine's `Provider` port: lost answers, quota refusals, boot faults, a controller killed between a terminate's
//! commit and its destroy, a hold across a restart, and the sync's signals.
//!
//! Each body runs on two backends (`on_both_backends!` makes its two tests): `direct` (a shim that is the port over
//! the fake's requests) and `served` (the production `ProviderClient` over real HTTP to the fake's axum router on a
//! loopback port, behind a transport wrapper that counts the calls and can lose one create's answer after the
//! provider executed it).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use engine::adapters::http::provider::ProviderClient;
use engine::adapters::http::{HttpRequest, HttpResponse, HttpTransport, Method};
use engine::secret::Secret;
use fakes::http::cloud::CloudFront;

use engine::instance::approval::{Governance, Policy};
use engine::instance::control::Control;
use engine::instance::driver::{Cleared, DriverError, InstanceDriver, Progress};
use engine::instance::inventory::{Backing, DeferredOperation, InstanceRecord};
use engine::instance::operator::{AuditOutcome, OperatorStep};
use engine::instance::provision::{AgentPhase, Provisioned};
use engine::instance::state::{InstanceEvent, InstanceState};
use engine::instance::stuck::Stuck;
use engine::instance::sync::SyncSignal;
use engine::ports::bare_metal::NoSite;
use engine::ports::platform::{PlatformError, PlatformRows};
use engine::ports::provider::{CreateVm, Provider, ProviderError, ProviderVm};
use engine::ports::{Journal, JournalError, TransportError};
use fakes::cloud::{CloudProvider, CloudRequest, CloudResponse, GuestEvent};

/// The port over the fake, on a clock the test moves.
struct FakeCloud {
    cloud: RefCell<CloudProvider>,
    now_ms: Cell<u64>,
    /// The next create executes at the fake and its answer is lost (a timeout to the caller).
    lose_next_create: Cell<bool>,
    creates: Cell<u32>,
    destroys: Cell<u32>,
}

impl FakeCloud {
    fn new() -> FakeCloud {
        let mut cloud = CloudProvider::new();
        cloud.add_region("region-a", 10);
        cloud.add_instance_type("type-small");
        FakeCloud {
            cloud: RefCell::new(cloud),
            now_ms: Cell::new(0),
            lose_next_create: Cell::new(false),
            creates: Cell::new(0),
            destroys: Cell::new(0),
        }
    }

    fn call(&self, request: CloudRequest) -> Result<CloudResponse, ProviderError> {
        let lose = matches!(request, CloudRequest::Create { .. }) && self.lose_next_create.replace(false);
        let answer = self.cloud.borrow_mut().handle(request, self.now_ms.get());
        if lose {
            return Err(ProviderError::Transport(TransportError::Timeout));
        }
        answer.map_err(sim::world::instances::provider_error)
    }

    fn vms(&self, request: CloudRequest) -> Result<Vec<ProviderVm>, ProviderError> {
        sim::world::instances::provider_vms(self.call(request)?)
    }
}

/// What a body needs of a backend: the port, the fake behind it, the clock, and the calls it saw.
trait Backend {
    type Port: Provider;
    fn port(&self) -> &Self::Port;
    fn with_cloud<R>(&self, change: impl FnOnce(&mut CloudProvider) -> R) -> R;
    /// Moves the clock and answers what the guests did since the last look.
    fn advance_to(&self, now_ms: u64) -> Vec<GuestEvent>;
    /// The next create executes at the provider and its answer is lost.
    fn lose_next_create(&self);
    fn creates(&self) -> u32;
    fn destroys(&self) -> u32;
    fn live_with_tag(&self, tag: &str) -> usize {
        self.with_cloud(|cloud| cloud.live_with_tag(tag).count())
    }
}

impl Backend for FakeCloud {
    type Port = FakeCloud;
    fn port(&self) -> &FakeCloud {
        self
    }
    fn with_cloud<R>(&self, change: impl FnOnce(&mut CloudProvider) -> R) -> R {
        change(&mut self.cloud.borrow_mut())
    }
    fn advance_to(&self, now_ms: u64) -> Vec<GuestEvent> {
        self.now_ms.set(now_ms);
        self.cloud.borrow_mut().poll(now_ms)
    }
    fn lose_next_create(&self) {
        self.lose_next_create.set(true);
    }
    fn creates(&self) -> u32 {
        self.creates.get()
    }
    fn destroys(&self) -> u32 {
        self.destroys.get()
    }
}

/// The transport under the served client: counts creates and destroys, and loses a create's answer on request.
struct Counting<T> {
    inner: T,
    lose_next_create: Cell<bool>,
    creates: Cell<u32>,
    destroys: Cell<u32>,
}

impl<T: HttpTransport> HttpTransport for Counting<T> {
    async fn send(&self, request: HttpRequest, timeout_ms: u64) -> Result<HttpResponse, TransportError> {
        let create = request.method == Method::Post && request.path_and_query.ends_with("/vms");
        if create {
            self.creates.set(self.creates.get() + 1);
        }
        if request.method == Method::Delete {
            self.destroys.set(self.destroys.get() + 1);
        }
        let answer = self.inner.send(request, timeout_ms).await;
        if create && self.lose_next_create.replace(false) {
            return Err(TransportError::Timeout);
        }
        answer
    }
}

struct ServedCloud<T> {
    shared: fakes::http::cloud::SharedCloud,
    now_ms: Arc<AtomicU64>,
    client: ProviderClient<Counting<T>>,
}

const TOKEN: &str = "provider-test-token";

impl ServedCloud<()> {
    async fn start() -> ServedCloud<impl HttpTransport> {
        let mut front = CloudFront::default();
        front.provider.add_region("region-a", 10);
        front.provider.add_instance_type("type-small");
        let shared = Arc::new(Mutex::new(front));
        let now_ms = Arc::new(AtomicU64::new(0));
        let clock_ms = now_ms.clone();
        let clock: fakes::http::Clock = Arc::new(move || clock_ms.load(Ordering::SeqCst));
        let router = fakes::http::cloud::router(shared.clone(), clock);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        let inner = sim::wire::http::HyperTransport::tcp(&base_url).expect("a loopback base url");
        let transport =
            Counting { inner, lose_next_create: Cell::new(false), creates: Cell::new(0), destroys: Cell::new(0) };
        ServedCloud { shared, now_ms, client: ProviderClient::new(transport, Secret::new(TOKEN), 5_000) }
    }
}

impl<T: HttpTransport> Backend for ServedCloud<T> {
    type Port = ProviderClient<Counting<T>>;
    fn port(&self) -> &ProviderClient<Counting<T>> {
        &self.client
    }
    fn with_cloud<R>(&self, change: impl FnOnce(&mut CloudProvider) -> R) -> R {
        change(&mut self.shared.lock().expect("the front").provider)
    }
    fn advance_to(&self, now_ms: u64) -> Vec<GuestEvent> {
        self.now_ms.store(now_ms, Ordering::SeqCst);
        let mut front = self.shared.lock().expect("the front");
        let mut events = std::mem::take(&mut front.events);
        events.extend(front.provider.poll(now_ms));
        events
    }
    fn lose_next_create(&self) {
        self.client_transport().lose_next_create.set(true);
    }
    fn creates(&self) -> u32 {
        self.client_transport().creates.get()
    }
    fn destroys(&self) -> u32 {
        self.client_transport().destroys.get()
    }
}

impl<T: HttpTransport> ServedCloud<T> {
    fn client_transport(&self) -> &Counting<T> {
        self.client.transport()
    }
}

impl Provider for FakeCloud {
    async fn create(&self, request: &CreateVm) -> Result<String, ProviderError> {
        self.creates.set(self.creates.get() + 1);
        let request = CloudRequest::Create {
            region: request.region.clone(),
            instance_type: request.instance_type.clone(),
            name: request.name.clone(),
            tag: request.tag.clone(),
        };
        match self.call(request)? {
            CloudResponse::Created { id } => Ok(id),
            other => Err(ProviderError::Rejected(format!("unexpected answer {other:?}"))),
        }
    }
    async fn find_by_tag(&self, region: &str, tag: &str) -> Result<Vec<ProviderVm>, ProviderError> {
        self.vms(CloudRequest::FindByTag { region: region.into(), tag: tag.into() })
    }
    async fn list(&self, region: &str) -> Result<Vec<ProviderVm>, ProviderError> {
        self.vms(CloudRequest::List { region: region.into() })
    }
    async fn start(&self, id: &str) -> Result<(), ProviderError> {
        self.call(CloudRequest::Start { id: id.into() }).map(drop)
    }
    async fn stop(&self, id: &str, hard: bool) -> Result<(), ProviderError> {
        self.call(CloudRequest::Stop { id: id.into(), hard }).map(drop)
    }
    async fn reboot(&self, id: &str) -> Result<(), ProviderError> {
        self.call(CloudRequest::Reboot { id: id.into() }).map(drop)
    }
    async fn destroy(&self, id: &str) -> Result<(), ProviderError> {
        self.destroys.set(self.destroys.get() + 1);
        self.call(CloudRequest::Destroy { id: id.into() }).map(drop)
    }
    async fn force_terminate(&self, region: &str, tag: &str) -> Result<Vec<String>, ProviderError> {
        let tagged = self.vms(CloudRequest::FindByTag { region: region.into(), tag: tag.into() })?;
        let mut cloud = self.cloud.borrow_mut();
        Ok(tagged.into_iter().map(|vm| vm.cloud_instance_id).filter(|id| cloud.reap(id)).collect())
    }
}

/// A journal in memory that can die: after `appends_left` appends every append fails (the controller is gone).
#[derive(Default)]
struct Lines {
    lines: RefCell<Vec<String>>,
    appends_left: Cell<Option<u32>>,
}

impl Journal for Lines {
    async fn append(&self, record: &str) -> Result<(), JournalError> {
        if let Some(left) = self.appends_left.get() {
            if left == 0 {
                return Err(JournalError::WriteFailed("the controller is dead".into()));
            }
            self.appends_left.set(Some(left - 1));
        }
        self.lines.borrow_mut().push(record.to_owned());
        Ok(())
    }
    async fn replay(&self) -> Result<Vec<String>, JournalError> {
        Ok(self.lines.borrow().clone())
    }
}

/// The platform's rows in memory: every instance starts with one certificate, one bootstrap token and one peer,
/// and each call answers how many it changed (0 the second time, as the port says).
#[derive(Default)]
struct Rows {
    revoked: RefCell<BTreeMap<String, u32>>,
    expired: RefCell<BTreeMap<String, u32>>,
    removed: RefCell<BTreeMap<String, u32>>,
}

impl Rows {
    fn once(rows: &RefCell<BTreeMap<String, u32>>, instance: &str) -> u32 {
        let mut rows = rows.borrow_mut();
        let calls = rows.entry(instance.to_owned()).or_default();
        *calls += 1;
        u32::from(*calls == 1)
    }
}

impl PlatformRows for Rows {
    async fn revoke_certificates(&self, instance: &str) -> Result<u32, PlatformError> {
        Ok(Rows::once(&self.revoked, instance))
    }
    async fn expire_bootstrap_tokens(&self, instance: &str) -> Result<u32, PlatformError> {
        Ok(Rows::once(&self.expired, instance))
    }
    async fn remove_peers(&self, instance: &str) -> Result<u32, PlatformError> {
        Ok(Rows::once(&self.removed, instance))
    }
}

fn cloud() -> Backing {
    Backing::Cloud { region: "region-a".into(), instance_type: "type-small".into() }
}

async fn node<P: Provider>(driver: &mut InstanceDriver<'_, Lines, P, NoSite, Rows>, name: &str) -> String {
    let decided = driver.inventory().create_node("acme", name, "t-edge", None, Default::default()).unwrap();
    driver.commit(decided).await.unwrap()
}

/// A new node's instance, provisioned under `op-1` at 0 and running after its guest's boot (90 s).
async fn running<B: Backend>(driver: &mut InstanceDriver<'_, Lines, B::Port, NoSite, Rows>, backend: &B) -> String {
    let node = node(driver, "edge-01").await;
    let (provisioned, _) = driver.provision(&node, cloud(), Some("op-1"), 0).await.unwrap();
    let id = provisioned.instance().to_owned();
    let events = backend.advance_to(90_000);
    heartbeats(driver, events, 90_000).await;
    id
}

/// Feeds the guests' events to the driver as the hub would see the agents' heartbeats.
async fn heartbeats<P: Provider>(
    driver: &mut InstanceDriver<'_, Lines, P, NoSite, Rows>,
    events: Vec<GuestEvent>,
    now_ms: u64,
) {
    for event in events {
        let (tag, phase) = match event {
            GuestEvent::AgentUp { tag, .. } => (tag, AgentPhase::Booting),
            GuestEvent::AgentReady { tag, .. } => (tag, AgentPhase::Ready),
            // The provider reports the boot failed: the worker drives mark_errored.
            GuestEvent::BootFailed { tag, .. } => {
                let failed = driver.inventory().handle_failed(&tag, now_ms).unwrap();
                driver.commit(failed).await.unwrap();
                continue;
            }
            GuestEvent::Stopped { .. } | GuestEvent::Destroyed { .. } => continue,
        };
        let decided = driver.inventory().handle_heartbeat(&tag, phase, now_ms);
        driver.commit(decided).await.unwrap();
    }
}

fn terminate_transitions(journal: &Lines, instance: &str) -> usize {
    journal
        .lines
        .borrow()
        .iter()
        .filter_map(|line| InstanceRecord::from_line(line)?.ok())
        .filter(|record| {
            matches!(record, InstanceRecord::Transition { instance: i, event: InstanceEvent::Terminate, .. } if i == instance)
        })
        .count()
}

async fn a_provision_boots_to_running_on_its_first_ready_heartbeat<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let node = node(&mut driver, "edge-01").await;
    let (provisioned, progress) = driver.provision(&node, cloud(), Some("op-1"), 0).await.unwrap();
    assert!(matches!(progress, Progress::Created { adopted: false, .. }));
    let id = provisioned.instance().to_owned();
    assert_eq!(driver.inventory().instance(&id).unwrap().state, InstanceState::Provisioning);
    let events = backend.advance_to(30_000);
    heartbeats(&mut driver, events, 30_000).await;
    assert_eq!(driver.inventory().instance(&id).unwrap().state, InstanceState::Provisioning);
    let events = backend.advance_to(90_000);
    heartbeats(&mut driver, events, 90_000).await;
    assert_eq!(driver.inventory().instance(&id).unwrap().state, InstanceState::Running);
    assert_eq!(backend.live_with_tag(&id), 1);
}

async fn a_create_whose_answer_was_lost_is_adopted_on_the_retry_never_made_twice<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let node = node(&mut driver, "edge-01").await;
    backend.lose_next_create();
    let (first, progress) = driver.provision(&node, cloud(), Some("op-7"), 0).await.unwrap();
    assert_eq!(progress, Progress::Deferred(ProviderError::Transport(TransportError::Timeout)));
    let id = first.instance().to_owned();
    assert_eq!(driver.inventory().instance(&id).unwrap().state, InstanceState::Pending, "no answer, no VM id");
    assert_eq!(backend.live_with_tag(&id), 1, "the create did execute");
    // The caller retries with the same operation id.
    let (again, progress) = driver.provision(&node, cloud(), Some("op-7"), 5_000).await.unwrap();
    assert_eq!(again, Provisioned::Reused { instance: id.clone() });
    assert!(matches!(progress, Progress::Created { adopted: true, .. }), "{progress:?}");
    assert_eq!(backend.creates(), 1, "never a second create");
    assert_eq!(backend.live_with_tag(&id), 1);
    assert_eq!(driver.inventory().instance(&id).unwrap().state, InstanceState::Provisioning);
    // Without an operation id the same call makes a second, distinct instance and VM: the runbook's warning.
    let (other, _) = driver.provision(&node, cloud(), None, 6_000).await.unwrap();
    assert_ne!(other.instance(), id);
    assert_eq!(backend.creates(), 2);
}

async fn a_quota_refusal_leaves_the_row_pending_until_a_retry_of_the_same_operation_goes_through<B: Backend>(
    backend: &B,
) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let node = node(&mut driver, "edge-01").await;
    backend.with_cloud(|cloud| cloud.refuse_quota(1));
    let (first, progress) = driver.provision(&node, cloud(), Some("op-1"), 0).await.unwrap();
    assert!(matches!(progress, Progress::Deferred(ProviderError::QuotaExceeded(_))), "{progress:?}");
    let id = first.instance().to_owned();
    let stuck = driver.inventory().stuck(5 * 60_000 + 1, |_| None);
    assert_eq!(
        stuck.iter().map(|s| (s.instance.as_str(), s.stuck)).collect::<Vec<_>>(),
        vec![(id.as_str(), Stuck::Pending)]
    );
    let (again, progress) = driver.provision(&node, cloud(), Some("op-1"), 6 * 60_000).await.unwrap();
    assert_eq!(again.instance(), id);
    assert!(matches!(progress, Progress::Created { adopted: false, .. }));
}

async fn the_boot_faults_end_in_error_never_ready_and_stuck_provisioning<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let node = node(&mut driver, "edge-01").await;
    backend.with_cloud(|cloud| cloud.hang_creates(1));
    let (hang, _) = driver.provision(&node, cloud(), Some("op-hang"), 0).await.unwrap();
    backend.with_cloud(|cloud| cloud.fail_boots(1));
    let (fail, _) = driver.provision(&node, cloud(), Some("op-fail"), 0).await.unwrap();
    backend.with_cloud(|cloud| cloud.fail_module_pulls(1));
    let (pull, _) = driver.provision(&node, cloud(), Some("op-pull"), 0).await.unwrap();
    let events = backend.advance_to(30_000);
    heartbeats(&mut driver, events, 30_000).await;
    let events = backend.advance_to(11 * 60_000);
    heartbeats(&mut driver, events, 11 * 60_000).await;
    let state = |id: &Provisioned| driver.inventory().instance(id.instance()).unwrap().state;
    assert_eq!(
        (state(&hang), state(&fail), state(&pull)),
        (InstanceState::Provisioning, InstanceState::Error, InstanceState::Provisioning)
    );
    let stuck: Vec<(String, Stuck)> =
        driver.inventory().stuck(11 * 60_000, |_| None).into_iter().map(|s| (s.instance, s.stuck)).collect();
    assert_eq!(
        stuck,
        vec![(hang.instance().to_owned(), Stuck::Provisioning), (pull.instance().to_owned(), Stuck::NeverReady)]
    );
}

async fn a_controller_killed_after_the_terminate_commit_destroys_once_on_restart<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let id = {
        let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
        let id = running(&mut driver, backend).await;
        // The terminate is committed; the controller dies before the destroy reaches the provider.
        let decided = driver.inventory().control(&id, Control::Terminate, false, 100_000).unwrap();
        driver.commit(decided).await.unwrap();
        id
    };
    assert_eq!(backend.destroys(), 0);
    assert_eq!(backend.live_with_tag(&id), 1, "the guest still runs, and bills");
    // The next hourly sync, before any restart, names it.
    {
        let mut looker = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
        let report = looker.sync("region-a", 60 * 60_000).await.unwrap();
        assert!(
            matches!(report.signals.as_slice(), [SyncSignal::CloudSyncTerminatedGuestPresent { instance, .. }] if *instance == id),
            "{report:?}"
        );
    }
    let mut restarted = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    assert_eq!(restarted.inventory().instance(&id).unwrap().state, InstanceState::Terminated);
    assert_eq!(restarted.resume(61 * 60_000).await.unwrap(), vec![id.clone()]);
    assert_eq!(backend.destroys(), 1, "the destroy is sent once");
    backend.advance_to(62 * 60_000);
    assert_eq!(backend.live_with_tag(&id), 0);
    restarted.resume(62 * 60_000).await.unwrap();
    assert_eq!(restarted.inventory().instance(&id).unwrap().destroy_pending_since_ms, None, "confirmed gone");
    assert_eq!(terminate_transitions(&journal, &id), 1, "never a second terminate");
    let cascaded: Vec<InstanceRecord> = journal
        .lines
        .borrow()
        .iter()
        .filter_map(|line| InstanceRecord::from_line(line)?.ok())
        .filter(|record| matches!(record, InstanceRecord::Cascaded { .. }))
        .collect();
    assert_eq!(
        cascaded,
        vec![InstanceRecord::Cascaded {
            instance: id.clone(),
            certificates_revoked: 1,
            bootstrap_tokens_expired: 1,
            peers_removed: 1
        }],
        "the cascade ran once, on the restart"
    );
    assert!(restarted.resume(63 * 60_000).await.unwrap().is_empty(), "nothing left owed");
}

async fn a_hold_survives_a_restart_and_still_refuses_terminate_while_stop_goes_through<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let id = {
        let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
        let id = running(&mut driver, backend).await;
        let hold = driver.inventory().place_hold(&id, "ops", "disk swap", 100_000).unwrap();
        driver.commit(hold).await.unwrap();
        id
    };
    let mut restarted = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let refused = restarted.control(&id, Control::Terminate, true, 200_000).await;
    assert!(matches!(&refused, Err(DriverError::Refused(text)) if text.contains("ops hold")), "{refused:?}");
    assert_eq!(backend.destroys(), 0);
    restarted.control(&id, Control::Stop, false, 210_000).await.unwrap();
    let events = backend.advance_to(220_000);
    assert!(matches!(events.as_slice(), [GuestEvent::Stopped { .. }]), "{events:?}");
}

async fn a_failed_journal_append_stops_the_driver_before_it_calls_the_provider<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let node = node(&mut driver, "edge-01").await;
    let (provisioned, _) = driver.provision(&node, cloud(), Some("op-1"), 0).await.unwrap();
    journal.appends_left.set(Some(0));
    let error = driver.control(provisioned.instance(), Control::Terminate, false, 10).await.unwrap_err();
    assert!(matches!(error, DriverError::Journal(_)), "{error:?}");
    assert_eq!(backend.destroys(), 0, "no destroy without its durable record");
    assert_eq!(driver.inventory().instance(provisioned.instance()).unwrap().state, InstanceState::Provisioning);
}

async fn a_region_whose_listing_fails_writes_nothing_and_goes_stale_after_three_hours<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    driver.sync("region-a", 0).await.unwrap();
    backend.with_cloud(|cloud| cloud.stop_listing("region-a"));
    for hour in 1..=3 {
        let failed = driver.sync("region-a", hour * 60 * 60_000).await;
        assert!(matches!(failed, Err(DriverError::Provider(ProviderError::Unavailable(_)))), "{failed:?}");
    }
    assert!(driver.inventory().stale_syncs(["region-a"], 3 * 60 * 60_000).is_empty());
    assert_eq!(
        driver.inventory().stale_syncs(["region-a"], 3 * 60 * 60_000 + 1),
        vec![SyncSignal::CloudSyncCheckStale { region: "region-a".into(), last_check_ms: 0 }]
    );
}
async fn a_stuck_provisioning_instance_is_cleared_and_provisioned_again_under_the_same_operation<B: Backend>(
    backend: &B,
) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let node = node(&mut driver, "edge-01").await;
    backend.with_cloud(|cloud| cloud.hang_creates(2));
    let (hung, _) = driver.provision(&node, cloud(), Some("op-1"), 0).await.unwrap();
    let (gone, _) = driver.provision(&node, cloud(), Some("op-2"), 0).await.unwrap();
    let (hung, gone) = (hung.instance().to_owned(), gone.instance().to_owned());
    backend.advance_to(11 * 60_000);
    let stuck: Vec<Stuck> = driver.inventory().stuck(11 * 60_000, |_| None).into_iter().map(|s| s.stuck).collect();
    assert_eq!(stuck, vec![Stuck::Provisioning, Stuck::Provisioning]);
    // One VM is destroyed out of band: the sync is what clears its row.
    let vm = driver.inventory().instance(&gone).unwrap().cloud_instance_id.clone().unwrap();
    backend.with_cloud(|cloud| cloud.handle(CloudRequest::Destroy { id: vm }, 11 * 60_000).unwrap());
    backend.advance_to(12 * 60_000);
    assert_eq!(driver.clear_stuck_provisioning(&gone, 12 * 60_000).await.unwrap(), Cleared::BySync);
    assert_eq!(backend.destroys(), 0);
    // The other is still listed, hung: cancelled into error, then terminated, its VM destroyed.
    assert_eq!(driver.clear_stuck_provisioning(&hung, 12 * 60_000).await.unwrap(), Cleared::Terminated);
    assert_eq!(driver.inventory().instance(&hung).unwrap().state, InstanceState::Terminated);
    assert_eq!(backend.destroys(), 1);
    backend.advance_to(13 * 60_000);
    assert_eq!(backend.live_with_tag(&hung), 0);
    assert!(matches!(driver.clear_stuck_provisioning(&hung, 13 * 60_000).await, Err(DriverError::Refused(_))));
    // Re-provisioned under the same operation id: a fresh row carrying it, and one new VM.
    let (again, progress) = driver.provision(&node, cloud(), Some("op-1"), 13 * 60_000).await.unwrap();
    assert!(matches!(&again, Provisioned::Created { instance } if *instance != hung));
    assert!(matches!(progress, Progress::Created { adopted: false, .. }));
    assert_eq!(backend.creates(), 3);
    assert_eq!(platform.revoked.borrow().len(), 2, "both cleared rows had their cascade");
}

async fn an_operator_s_drain_and_approved_terminate_reach_the_provider_and_are_audited<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let id = running(&mut driver, backend).await;
    let gated = Governance::default();
    // A drain cordons: under the gated cordon policy it would be refused until a cordon is approved.
    let open_cordons = Governance { instance_cordon: Policy::Allow, ..gated };
    let drained =
        driver.operate("alice", OperatorStep::Drain { instance: id.clone() }, open_cordons, 100_000).await.unwrap();
    assert_eq!(drained, AuditOutcome::Performed);
    let events = backend.advance_to(110_000);
    assert!(matches!(events.as_slice(), [GuestEvent::Stopped { .. }]), "the stop reached the provider: {events:?}");
    let terminate =
        OperatorStep::Request { operation: DeferredOperation::Terminate { instance: id.clone(), by: "alice".into() } };
    let AuditOutcome::Pending { deferred } = driver.operate("alice", terminate, gated, 120_000).await.unwrap() else {
        panic!("terminate is gated by default")
    };
    assert_eq!(backend.destroys(), 0, "nothing before the approval");
    let approved = driver.operate("bob", OperatorStep::Approve { deferred }, gated, 130_000).await.unwrap();
    assert_eq!(approved, AuditOutcome::Performed);
    assert_eq!(backend.destroys(), 1);
    assert_eq!(driver.inventory().instance(&id).unwrap().state, InstanceState::Terminated);
    assert!(driver.inventory().instance(&id).unwrap().cascaded);
    let refused = driver
        .operate(
            "bob",
            OperatorStep::Control { instance: id.clone(), action: Control::Start, force: true },
            gated,
            140_000,
        )
        .await
        .unwrap();
    assert!(matches!(refused, AuditOutcome::Refused { .. }), "{refused:?}");
    let verbs: Vec<&str> = driver.inventory().audit.iter().map(|a| a.step.verb()).collect();
    assert_eq!(verbs, ["drain", "terminate", "approve", "start"]);
}

async fn a_stuck_teardown_is_freed_by_the_provider_s_force_terminate_and_only_that_one<B: Backend>(backend: &B) {
    let (journal, platform) = (Lines::default(), Rows::default());
    let mut driver = InstanceDriver::open(&journal, backend.port(), &NoSite, &platform).await.unwrap();
    let stuck = running(&mut driver, backend).await;
    let node = node(&mut driver, "edge-02").await;
    let (provisioned, _) = driver.provision(&node, cloud(), Some("op-2"), 90_000).await.unwrap();
    let other = provisioned.instance().to_owned();
    backend.with_cloud(|cloud| cloud.stick_teardowns(1));
    let decided = driver.inventory().control(&stuck, Control::Terminate, false, 100_000).unwrap();
    driver.commit(decided).await.unwrap();
    driver.resume(100_000).await.unwrap();
    backend.advance_to(400_000);
    assert_eq!(backend.live_with_tag(&stuck), 1, "its teardown is stuck shutting down");
    let port = backend.port();
    assert_eq!(
        port.force_terminate("region-a", &other).await.unwrap(),
        Vec::<String>::new(),
        "a running VM is not freed"
    );
    let freed = port.force_terminate("region-a", &stuck).await.unwrap();
    assert_eq!(freed.len(), 1, "the stuck VM is freed: {freed:?}");
    assert!(port.force_terminate("region-a", &stuck).await.unwrap().is_empty(), "and only once");
    backend.advance_to(500_000);
    assert_eq!(backend.live_with_tag(&stuck), 0, "its teardown finishes");
    assert_eq!(backend.live_with_tag(&other), 1);
}

/// Each body's two tests, `<body>::direct` and `<body>::served`.
macro_rules! on_both_backends {
    ($($body:ident),* $(,)?) => {$(
        mod $body {
            #[tokio::test(flavor = "current_thread")]
            async fn direct() {
                super::$body(&super::FakeCloud::new()).await;
            }

            #[tokio::test(flavor = "current_thread")]
            async fn served() {
                super::$body(&super::ServedCloud::start().await).await;
            }
        }
    )*};
}

on_both_backends!(
    a_controller_killed_after_the_terminate_commit_destroys_once_on_restart,
    a_provision_boots_to_running_on_its_first_ready_heartbeat,
    a_create_whose_answer_was_lost_is_adopted_on_the_retry_never_made_twice,
    a_quota_refusal_leaves_the_row_pending_until_a_retry_of_the_same_operation_goes_through,
    the_boot_faults_end_in_error_never_ready_and_stuck_provisioning,
    a_hold_survives_a_restart_and_still_refuses_terminate_while_stop_goes_through,
    a_failed_journal_append_stops_the_driver_before_it_calls_the_provider,
    a_region_whose_listing_fails_writes_nothing_and_goes_stale_after_three_hours,
    a_stuck_provisioning_instance_is_cleared_and_provisioned_again_under_the_same_operation,
    an_operator_s_drain_and_approved_terminate_reach_the_provider_and_are_audited,
    a_stuck_teardown_is_freed_by_the_provider_s_force_terminate_and_only_that_one,
);
