//! `engine::adapters::http::dns::DnsClient` over `sim::wire::udp::UdpTransport` on real loopback UDP: against a tiny
//! server answering canned hickory-built packets (NOERROR with an A record, NXDOMAIN, SERVFAIL, a stray id, garbage,
//! silence), a port nobody listens on, and the served fake rack resolver (`fakes::http::dns::serve`).
//!
//! The scenario bodies (`body_*`) take any `Resolver`, so the same assertions run against the canned server and the
//! fake rack resolver.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use engine::adapters::http::dns::DnsClient;
use engine::ports::TransportError;
use engine::ports::site::{DnsAnswer, Resolver};
use fakes::http::{SharedSite, SiteFront};
use fakes::maas::{DnsFault, RACK_ADDRESS, Site, SiteConfig, SiteEventKind};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record};
use sim::wire::udp::UdpTransport;
use tokio::net::UdpSocket;

const CALL_TIMEOUT_MS: u64 = 2_000;
const SEED: u64 = 0x5eed;

/// How the canned server answers a query.
#[derive(Clone, Copy)]
enum Canned {
    Address(Ipv4Addr),
    Code(ResponseCode),
    /// SERVFAIL under another id: an answer to some other query.
    StrayId,
    Garbage,
    /// Reads the query and answers nothing.
    Silence,
}

fn reply(query: &Message, code: ResponseCode) -> Message {
    let mut message = Message::new();
    message
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_recursion_desired(query.recursion_desired())
        .set_response_code(code);
    message.add_queries(query.queries().to_vec());
    message
}

fn canned_answer(canned: Canned, packet: &[u8]) -> Option<Vec<u8>> {
    let query = Message::from_vec(packet).expect("the client sends a DNS message");
    assert_eq!(query.message_type(), MessageType::Query);
    let message = match canned {
        Canned::Address(address) => {
            let mut message = reply(&query, ResponseCode::NoError);
            let name = query.queries()[0].name().clone();
            message.add_answer(Record::from_rdata(name, 30, RData::A(A(address))));
            message
        }
        Canned::Code(code) => reply(&query, code),
        Canned::StrayId => {
            let mut message = reply(&query, ResponseCode::ServFail);
            message.set_id(query.id() ^ 0x5a5a);
            message
        }
        Canned::Garbage => return Some(b"not a dns message".to_vec()),
        Canned::Silence => return None,
    };
    Some(message.to_vec().expect("a canned answer encodes"))
}

/// A UDP server on the loopback answering every query as `canned` says.
async fn canned_server(canned: Canned) -> SocketAddr {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let address = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buffer = vec![0_u8; 4_096];
        while let Ok((length, peer)) = socket.recv_from(&mut buffer).await {
            if let Some(answer) = canned_answer(canned, &buffer[..length]) {
                let _ = socket.send_to(&answer, peer).await;
            }
        }
    });
    address
}

async fn resolve_against(canned: Canned, timeout_ms: u64) -> Result<DnsAnswer, TransportError> {
    let server = canned_server(canned).await;
    DnsClient::new(UdpTransport::new(server), SEED, timeout_ms).resolve(METADATA_HOST).await
}

const METADATA_HOST: &str = "metadata.maas-internal";

// --- scenario bodies ------------------------------------------------------------------------------------------------

async fn body_resolves_the_metadata_host(resolver: &impl Resolver) {
    assert_eq!(resolver.resolve(METADATA_HOST).await, Ok(DnsAnswer::Address(RACK_ADDRESS.to_owned())));
}

async fn body_an_unknown_internal_name_is_nxdomain(resolver: &impl Resolver) {
    assert_eq!(resolver.resolve("nothing-here.maas-internal").await, Ok(DnsAnswer::NxDomain));
}

async fn body_the_metadata_host_servfails(resolver: &impl Resolver) {
    assert_eq!(resolver.resolve(METADATA_HOST).await, Ok(DnsAnswer::ServFail));
}

fn client_of(server: SocketAddr) -> DnsClient<UdpTransport> {
    DnsClient::new(UdpTransport::new(server), SEED, CALL_TIMEOUT_MS)
}

// --- against the canned server --------------------------------------------------------------------------------------

#[tokio::test]
async fn canned_rcodes_read_as_the_port_s_answers() {
    let rack: Ipv4Addr = RACK_ADDRESS.parse().unwrap();
    body_resolves_the_metadata_host(&client_of(canned_server(Canned::Address(rack)).await)).await;
    let nxdomain = canned_server(Canned::Code(ResponseCode::NXDomain)).await;
    body_an_unknown_internal_name_is_nxdomain(&client_of(nxdomain)).await;
    body_the_metadata_host_servfails(&client_of(canned_server(Canned::Code(ResponseCode::ServFail)).await)).await;
}

#[tokio::test]
async fn an_answer_the_client_cannot_use_is_no_answer() {
    assert_eq!(resolve_against(Canned::StrayId, CALL_TIMEOUT_MS).await, Err(TransportError::Timeout));
    assert_eq!(resolve_against(Canned::Garbage, CALL_TIMEOUT_MS).await, Err(TransportError::Timeout));
}

#[tokio::test]
async fn a_silent_resolver_times_out() {
    assert_eq!(resolve_against(Canned::Silence, 100).await, Err(TransportError::Timeout));
}

#[tokio::test]
async fn a_port_nobody_listens_on_is_refused() {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let address = socket.local_addr().unwrap();
    drop(socket);
    let client = DnsClient::new(UdpTransport::new(address), SEED, CALL_TIMEOUT_MS);
    assert_eq!(client.resolve(METADATA_HOST).await, Err(TransportError::ConnectionRefused));
}

// --- against the served fake rack resolver --------------------------------------------------------------------------

/// The fake site's rack resolver served on a loopback UDP port; its clock stands at 0.
async fn served_resolver() -> (SharedSite, SocketAddr) {
    let shared = SiteFront::new(Site::new(SiteConfig::new(7))).shared();
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a loopback port");
    let address = socket.local_addr().expect("its address");
    let clock: fakes::http::Clock = Arc::new(|| 0);
    tokio::spawn(fakes::http::dns::serve(socket, shared.clone(), clock));
    (shared, address)
}

#[tokio::test]
async fn served_answers_read_as_the_port_s_answers() {
    let (shared, address) = served_resolver().await;
    let client = client_of(address);
    body_resolves_the_metadata_host(&client).await;
    body_an_unknown_internal_name_is_nxdomain(&client).await;
    shared.lock().expect("the front").site.dns.set_fault(DnsFault::ServFailAll);
    body_the_metadata_host_servfails(&client).await;
    let events = shared.lock().expect("the front").drain_events();
    let queries = events.iter().filter(|event| matches!(event.kind, SiteEventKind::DnsQuery { .. })).count();
    assert_eq!(queries, 3, "every query reached the model");
}
