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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::future::Future;
    use std::net::Ipv4Addr;

    use futures_util::FutureExt;
    use hickory_proto::rr::Record;
    use hickory_proto::rr::rdata::{A, CNAME};

    use super::*;

    /// Answers every query with what `answer` builds from it.
    struct Stub {
        answer: fn(Message) -> Vec<u8>,
        sent: RefCell<Vec<Vec<u8>>>,
    }

    impl DatagramTransport for &Stub {
        fn exchange(&self, packet: Vec<u8>, _timeout_ms: u64) -> impl Future<Output = Result<Vec<u8>, TransportError>> {
            self.sent.borrow_mut().push(packet.clone());
            let query = Message::from_vec(&packet).expect("the client sends a DNS message");
            std::future::ready(Ok((self.answer)(query)))
        }
    }

    fn reply(query: &Message, code: ResponseCode) -> Message {
        let mut message = Message::new();
        message.set_id(query.id()).set_message_type(MessageType::Response).set_response_code(code);
        message.add_queries(query.queries().to_vec());
        message
    }

    fn resolve(answer: fn(Message) -> Vec<u8>) -> Result<DnsAnswer, TransportError> {
        let stub = Stub { answer, sent: RefCell::default() };
        let client = DnsClient::new(&stub, 42, 1_000);
        client.resolve("metadata.maas-internal").now_or_never().expect("the stub answers at once")
    }

    #[test]
    fn an_a_record_is_the_address() {
        let answer = resolve(|query| {
            let mut message = reply(&query, ResponseCode::NoError);
            let name = query.queries()[0].name().clone();
            let alias = Name::from_ascii("rack.maas-internal.").unwrap();
            message.add_answer(Record::from_rdata(name, 60, RData::CNAME(CNAME(alias.clone()))));
            message.add_answer(Record::from_rdata(alias, 60, RData::A(A(Ipv4Addr::new(10, 0, 0, 2)))));
            message.to_vec().unwrap()
        });
        assert_eq!(answer, Ok(DnsAnswer::Address("10.0.0.2".into())));
    }

    #[test]
    fn rcodes_read_as_the_port_s_answers() {
        assert_eq!(resolve(|query| reply(&query, ResponseCode::NXDomain).to_vec().unwrap()), Ok(DnsAnswer::NxDomain));
        assert_eq!(resolve(|query| reply(&query, ResponseCode::ServFail).to_vec().unwrap()), Ok(DnsAnswer::ServFail));
        assert_eq!(resolve(|query| reply(&query, ResponseCode::Refused).to_vec().unwrap()), Ok(DnsAnswer::ServFail));
        assert_eq!(resolve(|query| reply(&query, ResponseCode::NoError).to_vec().unwrap()), Ok(DnsAnswer::NxDomain));
    }

    #[test]
    fn an_answer_the_client_cannot_use_is_no_answer() {
        let stray = |query: Message| {
            let mut message = reply(&query, ResponseCode::ServFail);
            message.set_id(query.id().wrapping_add(1));
            message.to_vec().unwrap()
        };
        assert_eq!(resolve(stray), Err(TransportError::Timeout));
        assert_eq!(resolve(|_| vec![1, 2, 3]), Err(TransportError::Timeout));
        assert_eq!(resolve(|query| query.to_vec().unwrap()), Err(TransportError::Timeout), "a query is no answer");
        let other_question = |query: Message| {
            let mut message = reply(&Message::new(), ResponseCode::NoError);
            message.set_id(query.id());
            message.add_query(Query::query(Name::from_ascii("other.example.").unwrap(), RecordType::A));
            message.to_vec().unwrap()
        };
        assert_eq!(resolve(other_question), Err(TransportError::Timeout));
    }

    #[test]
    fn query_ids_are_deterministic_and_move_on() {
        let stub =
            Stub { answer: |query| reply(&query, ResponseCode::NXDomain).to_vec().unwrap(), sent: RefCell::default() };
        let client = DnsClient::new(&stub, 7, 1_000);
        for _ in 0..3 {
            client.resolve("a.example").now_or_never().unwrap().unwrap();
        }
        let ids: Vec<u16> = stub.sent.borrow().iter().map(|packet| Message::from_vec(packet).unwrap().id()).collect();
        assert_eq!(ids, [query_id(7, 0), query_id(7, 1), query_id(7, 2)]);
        assert!(ids[0] != ids[1] && ids[1] != ids[2]);
        let query = Message::from_vec(&stub.sent.borrow()[0]).unwrap();
        assert!(query.recursion_desired());
        assert_eq!(query.queries()[0].query_type(), RecordType::A);
        assert_eq!(query.queries()[0].name().to_ascii(), "a.example.");
    }

    #[test]
    fn a_name_that_is_no_dns_name_is_nxdomain() {
        let stub = Stub { answer: |_| unreachable!("nothing is sent"), sent: RefCell::default() };
        let client = DnsClient::new(&stub, 7, 1_000);
        let long = "a".repeat(70);
        assert_eq!(client.resolve(&long).now_or_never().unwrap(), Ok(DnsAnswer::NxDomain));
        assert!(stub.sent.borrow().is_empty());
    }
}
