//! The DNS resolver client: [`Resolver`] over the DNS wire format (hickory-proto's codec, no runtime), one A query
//! a datagram through a [`DatagramTransport`].
//!
//! Query ids are deterministic: the `n`th query of a client with seed `s` carries [`query_id`]`(s, n)`, so a
//! simulated run sends the same bytes every time.
//!
//! How an answer reads: NOERROR with an A record → `Address` (the first A among the answers, after any CNAME);
//! NOERROR without one (NODATA) → `NxDomain` (the name has no address a node could use); NXDOMAIN → `NxDomain`;
//! SERVFAIL, and any other rcode (REFUSED, NOTIMP, ...), → `ServFail` (the resolver answered and cannot resolve it).
//!
//! Decision: an answer the client cannot use, one that does not parse, is not a response, carries another query's
//! id or another question, is `Err(TransportError::Timeout)`, not `ServFail`. A stub resolver discards such a
//! datagram and keeps waiting for its answer (RFC 5452), which then never comes within the call; and `ServFail` is
//! evidence the engine acts on (a rack resolver that SERVFAILs stops onboarding for a person), which a garbled or
//! stray datagram must not fake. A transport error is retried as upstream-transient.
//!
//! A name that is not a valid DNS name cannot be asked: `NxDomain`, what a stub resolver answers for it.

use std::cell::Cell;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

use super::DatagramTransport;
use crate::ports::TransportError;
use crate::ports::site::{DnsAnswer, Resolver};

/// [`Resolver`] over DNS datagrams. The transport carries the resolver's address.
pub struct DnsClient<T> {
    transport: T,
    seed: u64,
    call_timeout_ms: u64,
    queries_sent: Cell<u64>,
}

/// The id of the `counter`th query (from 0) of a client seeded with `seed`: one SplitMix64 step of their sum,
/// folded to 16 bits, so successive ids do not follow one another.
pub fn query_id(seed: u64, counter: u64) -> u16 {
    let mut z = seed.wrapping_add(counter).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z ^ (z >> 16) ^ (z >> 32) ^ (z >> 48)) as u16
}

/// An A query for `name` (made absolute) with recursion desired, or `None` when `name` is not a DNS name.
pub fn a_query(name: &str, id: u16) -> Option<(Name, Vec<u8>)> {
    let mut name = Name::from_ascii(name).ok()?;
    name.set_fqdn(true);
    let mut message = Message::new();
    message
        .set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name.clone(), RecordType::A));
    let packet = message.to_vec().ok()?;
    Some((name, packet))
}

/// Reads the answer to the A query `id` for `name`; `Err(Timeout)` for a datagram that is not that answer.
pub fn read_answer(packet: &[u8], id: u16, name: &Name) -> Result<DnsAnswer, TransportError> {
    let unusable = TransportError::Timeout;
    let message = Message::from_vec(packet).map_err(|_| unusable)?;
    if message.id() != id || message.message_type() != MessageType::Response {
        return Err(unusable);
    }
    if message.queries().iter().any(|query| query.name() != name || query.query_type() != RecordType::A) {
        return Err(unusable);
    }
    match message.response_code() {
        ResponseCode::NoError => Ok(message
            .answers()
            .iter()
            .find_map(|record| match record.data() {
                RData::A(address) => Some(DnsAnswer::Address(address.0.to_string())),
                _ => None,
            })
            .unwrap_or(DnsAnswer::NxDomain)),
        ResponseCode::NXDomain => Ok(DnsAnswer::NxDomain),
        _ => Ok(DnsAnswer::ServFail),
    }
}

impl<T: DatagramTransport> DnsClient<T> {
    /// A client whose query ids derive from `seed`; each query waits at most `call_timeout_ms` for its answer.
    pub fn new(transport: T, seed: u64, call_timeout_ms: u64) -> DnsClient<T> {
        DnsClient { transport, seed, call_timeout_ms, queries_sent: Cell::new(0) }
    }
}

impl<T: DatagramTransport> Resolver for DnsClient<T> {
    async fn resolve(&self, name: &str) -> Result<DnsAnswer, TransportError> {
        let counter = self.queries_sent.get();
        self.queries_sent.set(counter.wrapping_add(1));
        let id = query_id(self.seed, counter);
        let Some((name, packet)) = a_query(name, id) else {
            return Ok(DnsAnswer::NxDomain);
        };
        let answer = self.transport.exchange(packet, self.call_timeout_ms).await?;
        read_answer(&answer, id, &name)
    }
}
