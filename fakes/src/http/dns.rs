//! The rack resolver in real DNS wire format (hickory-proto) over
//! [`Site::handle_dns`](crate::maas::Site::handle_dns): one question in, the model's answer out — NOERROR with an A
//! record, NXDOMAIN, or SERVFAIL — with the query's id, question and RD bit echoed.
//!
//! Malformed input: a packet that does not parse but has a full 12-byte header gets FORMERR with its id; anything
//! shorter, and any packet that is itself a response, is dropped ([`answer`] returns an empty vector and [`serve`]
//! sends nothing). A query with other than one question gets FORMERR, an opcode other than QUERY gets NOTIMP; neither
//! reaches the model.
//!
//! Deviation from real MAAS (bind9): the answer's TTL is a constant [`ANSWER_TTL_S`]; a non-A question for a name
//! the model resolves gets NOERROR with no answer (NODATA); the model is asked for every name, so every question is a
//! `DnsQuery` site event.

use std::net::Ipv4Addr;

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, rdata::A};
use tokio::net::UdpSocket;

use super::{Clock, SharedSite, lock};
use crate::maas::DnsAnswer;

/// The TTL of every A record answered.
pub const ANSWER_TTL_S: u32 = 30;

/// The largest datagram read.
pub const DATAGRAM_MAX_BYTES: usize = 4096;

/// The response to one query datagram from `client` (the name the model records in its `DnsQuery` event, e.g. the
/// peer address); empty: no response (see the module docs).
pub fn answer(shared: &SharedSite, clock: &Clock, client: &str, query: &[u8]) -> Vec<u8> {
    let message = match Message::from_vec(query) {
        Ok(message) => message,
        Err(_) if query.len() >= 12 => {
            let id = u16::from_be_bytes([query[0], query[1]]);
            return encode(&Message::error_msg(id, OpCode::Query, ResponseCode::FormErr));
        }
        Err(_) => return Vec::new(),
    };
    if message.message_type() == MessageType::Response {
        return Vec::new();
    }
    let mut response = Message::new();
    response
        .set_id(message.id())
        .set_message_type(MessageType::Response)
        .set_op_code(message.op_code())
        .set_recursion_desired(message.recursion_desired())
        .set_recursion_available(true);
    if message.op_code() != OpCode::Query {
        response.set_response_code(ResponseCode::NotImp);
        return encode(&response);
    }
    let [question] = message.queries() else {
        response.set_response_code(ResponseCode::FormErr);
        return encode(&response);
    };
    response.add_query(question.clone());
    let name = question.name().to_ascii().trim_end_matches('.').to_ascii_lowercase();
    let model_answer = {
        let mut front = lock(shared);
        let front = &mut *front;
        let now_ms = clock();
        front.site.handle_dns(now_ms, client, &name, &mut front.events)
    };
    match model_answer {
        DnsAnswer::NoError { address } => match address.parse::<Ipv4Addr>() {
            Ok(address) => {
                response.set_response_code(ResponseCode::NoError);
                if question.query_type() == RecordType::A {
                    let record = Record::from_rdata(question.name().clone(), ANSWER_TTL_S, RData::A(A(address)));
                    response.add_answer(record);
                }
            }
            // The model holds an address that is not IPv4: the resolver fails rather than invent one.
            Err(_) => {
                response.set_response_code(ResponseCode::ServFail);
            }
        },
        DnsAnswer::NxDomain => {
            response.set_response_code(ResponseCode::NXDomain);
        }
        DnsAnswer::ServFail => {
            response.set_response_code(ResponseCode::ServFail);
        }
    }
    encode(&response)
}

/// A message that does not encode is a bug in this file; it is dropped rather than half-sent.
fn encode(message: &Message) -> Vec<u8> {
    message.to_vec().unwrap_or_default()
}

/// Answers every datagram on `socket` until receiving fails; the client name given to the model is the peer's IP.
pub async fn serve(socket: UdpSocket, shared: SharedSite, clock: Clock) -> std::io::Result<()> {
    let mut buffer = vec![0u8; DATAGRAM_MAX_BYTES];
    loop {
        let (length, peer) = socket.recv_from(&mut buffer).await?;
        let response = answer(&shared, &clock, &peer.ip().to_string(), &buffer[..length]);
        if !response.is_empty() {
            // A send that fails (the peer went away) loses this answer only, as UDP does.
            let _ = socket.send_to(&response, peer).await;
        }
    }
}
