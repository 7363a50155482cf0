//! The plug a transport other than the fast one puts into the world: the wire transport gives an onboarding world
//! the engine's real clients of the site's services and mirrors the world's steps onto its own network. The world
//! names only this trait; `crate::wire` implements it (the world never calls the wire by name).
//!
//! The engine's transports ([`HttpTransport`], [`DatagramTransport`]) return `impl Future`, so they are not object
//! safe; [`PluggedHttp`] and [`PluggedDatagram`] carry any of them behind a boxed future, so the world can hold the
//! clients without naming the wire's connector types.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use engine::adapters::http::dns::DnsClient;
use engine::adapters::http::maas::MaasClient;
use engine::adapters::http::secrets::SecretsClient;
use engine::adapters::http::{DatagramTransport, HttpRequest, HttpResponse, HttpTransport};
use engine::ports::TransportError;

use crate::model::faults::Step;
use crate::world::{SimClock, World};

/// The engine's real clients of the site's services, as one controller process holds them.
pub(crate) struct SiteClients {
    pub maas: MaasClient<PluggedHttp, SimClock>,
    pub secrets: SecretsClient<PluggedHttp>,
    pub resolver: DnsClient<PluggedDatagram>,
}

/// What a transport plugs into an onboarding world.
pub(crate) trait SitePlug {
    /// The current controller process's clients of the site's services.
    fn clients(&self) -> Rc<SiteClients>;
    /// The controller booted for the `boot`th time: a restarted process gets clients of its own.
    fn controller_booted(&self, world: &Rc<World>, boot: u64);
    /// The world applied `step`: the transport mirrors what it can of it onto its own network.
    fn mirror_step(&self, step: &Step);
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, TransportError>> + 'a>>;

/// An [`HttpTransport`] behind a boxed future.
pub trait BoxedHttp {
    fn send_boxed(&self, request: HttpRequest, timeout_ms: u64) -> Boxed<'_, HttpResponse>;
}

impl<T: HttpTransport> BoxedHttp for T {
    fn send_boxed(&self, request: HttpRequest, timeout_ms: u64) -> Boxed<'_, HttpResponse> {
        Box::pin(self.send(request, timeout_ms))
    }
}

/// Any [`HttpTransport`], as the world holds it.
pub struct PluggedHttp(pub Rc<dyn BoxedHttp>);

impl HttpTransport for PluggedHttp {
    fn send(
        &self,
        request: HttpRequest,
        timeout_ms: u64,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> {
        self.0.send_boxed(request, timeout_ms)
    }
}

/// A [`DatagramTransport`] behind a boxed future.
pub trait BoxedDatagram {
    fn exchange_boxed(&self, packet: Vec<u8>, timeout_ms: u64) -> Boxed<'_, Vec<u8>>;
}

impl<T: DatagramTransport> BoxedDatagram for T {
    fn exchange_boxed(&self, packet: Vec<u8>, timeout_ms: u64) -> Boxed<'_, Vec<u8>> {
        Box::pin(self.exchange(packet, timeout_ms))
    }
}

/// Any [`DatagramTransport`], as the world holds it.
pub struct PluggedDatagram(pub Rc<dyn BoxedDatagram>);

impl DatagramTransport for PluggedDatagram {
    fn exchange(&self, packet: Vec<u8>, timeout_ms: u64) -> impl Future<Output = Result<Vec<u8>, TransportError>> {
        self.0.exchange_boxed(packet, timeout_ms)
    }
}
