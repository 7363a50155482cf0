//! The rack resolver in real DNS wire format (hickory-proto) over
//! [`Site::handle_dns`](crate::maas::Site::handle_dns): one question in, the model's answer out — NOERROR with an A
//! record, NXDOMAIN, or SERVFAIL — with the query's id, question and RD bit echoed.
//!
//! Malformed input: a packet that does not parse but has a full 12-byte header gets FORMERR with its id; anything
//! shorter, and any packet that is itself a response, is dropped ([`answer`] returns an empty vector and [`serve`]
//! sends nothing). A query with other than one question gets FORMERR, an opcode other than QUERY gets NOTIMP; neither
//! reaches the model.
//!
//! A question of a class other than IN gets REFUSED before it reaches the model, as BIND 9 (the resolver MAAS's
//! region and rack ran before 3.7) answers a CHAOS or HESIOD question outside its built-in `_bind` view.
//!
//! Transports: UDP ([`serve`]) and TCP ([`serve_tcp`], RFC 1035 §4.2.2's two-byte length prefix, several queries
//! per connection, closed after [`TCP_IDLE_TIMEOUT_MS`] without one, RFC 7766 §6.2.3).
//!
//! Deviation from real MAAS (bind9): the answer's TTL is a constant [`ANSWER_TTL_S`]; a non-A question for a name
//! the model resolves gets NOERROR with no answer (NODATA); the model is asked for every name, so every question is a
//! `DnsQuery` site event.

use std::net::Ipv4Addr;

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType, rdata::A};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

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
    if question.query_class() != DNSClass::IN {
        response.set_response_code(ResponseCode::Refused);
        return encode(&response);
    }
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

/// How long a DNS-over-TCP connection may wait for its next query.
pub const TCP_IDLE_TIMEOUT_MS: u64 = 10_000;

/// Answers DNS over TCP on `listener` until accepting fails: each connection carries length-prefixed queries and
/// is closed after [`TCP_IDLE_TIMEOUT_MS`] without one; at most `connections_max` are open at once (one over it is
/// closed at once, so a flood cannot take the descriptors the other services need).
pub async fn serve_tcp(
    listener: TcpListener,
    shared: SharedSite,
    clock: Clock,
    connections_max: usize,
) -> std::io::Result<()> {
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(connections_max));
    loop {
        let (stream, peer) = listener.accept().await?;
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let (shared, clock) = (shared.clone(), clock.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let _ = answer_tcp(stream, &shared, &clock, &peer.ip().to_string()).await;
        });
    }
}

async fn answer_tcp(
    mut stream: tokio::net::TcpStream,
    shared: &SharedSite,
    clock: &Clock,
    client: &str,
) -> std::io::Result<()> {
    let idle = std::time::Duration::from_millis(TCP_IDLE_TIMEOUT_MS);
    loop {
        let mut length = [0u8; 2];
        match tokio::time::timeout(idle, stream.read_exact(&mut length)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return Ok(()),
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(length))];
        match tokio::time::timeout(idle, stream.read_exact(&mut query)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return Ok(()),
        }
        let response = answer(shared, clock, client, &query);
        let Ok(response_length) = u16::try_from(response.len()) else { return Ok(()) };
        if response.is_empty() {
            return Ok(());
        }
        stream.write_all(&response_length.to_be_bytes()).await?;
        stream.write_all(&response).await?;
    }
}
