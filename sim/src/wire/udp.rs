//! [`UdpTransport`]: the engine's [`DatagramTransport`] over a tokio UDP socket, for the DNS resolver client
//! (`engine::adapters::http::dns::DnsClient`) against a real resolver or the served fake (`fakes::http::dns::serve`).
//!
//! Each exchange binds a fresh socket on an ephemeral port (on the loopback when the server is there) and connects
//! it to the server, so the kernel drops datagrams from anyone else and a port nobody listens on comes back as
//! `ConnectionRefused` (the ICMP port-unreachable a connected socket reports). The answer is awaited under
//! `tokio::time::timeout`: under a paused clock (the simulator) that is virtual time.
//!
//! Failures map onto [`TransportError`]: no answer within the timeout → `Timeout`; nothing listening →
//! `ConnectionRefused`; a socket that cannot be bound or connected (no route) → `ConnectionRefused` (nothing left);
//! any other error after the datagram left → `ConnectionReset`.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use engine::adapters::http::DatagramTransport;
use engine::ports::TransportError;
use tokio::net::UdpSocket;

/// The largest answer read: a DNS message over UDP with EDNS can exceed the classic 512 bytes.
pub const ANSWER_BYTES_MAX: usize = 4_096;

/// One datagram service (a DNS resolver) at `server`.
#[derive(Debug, Clone)]
pub struct UdpTransport {
    server: SocketAddr,
}

impl UdpTransport {
    pub fn new(server: SocketAddr) -> UdpTransport {
        UdpTransport { server }
    }

    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// The local address to bind: the loopback for a loopback server, else any address of the server's family.
    fn local(&self) -> SocketAddr {
        match self.server {
            SocketAddr::V4(server) if server.ip().is_loopback() => SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::V6(server) if server.ip().is_loopback() => SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
            SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        }
    }

    async fn round_trip(&self, packet: &[u8]) -> Result<Vec<u8>, TransportError> {
        let socket = UdpSocket::bind(self.local()).await.map_err(|_| TransportError::ConnectionRefused)?;
        socket.connect(self.server).await.map_err(|_| TransportError::ConnectionRefused)?;
        socket.send(packet).await.map_err(|error| sent_error(&error))?;
        let mut buffer = vec![0_u8; ANSWER_BYTES_MAX];
        let length = socket.recv(&mut buffer).await.map_err(|error| sent_error(&error))?;
        buffer.truncate(length);
        Ok(buffer)
    }
}

/// An I/O error once the socket is connected: refused when nothing listens, reset otherwise.
fn sent_error(error: &io::Error) -> TransportError {
    match error.kind() {
        io::ErrorKind::ConnectionRefused => TransportError::ConnectionRefused,
        _ => TransportError::ConnectionReset,
    }
}

impl DatagramTransport for UdpTransport {
    async fn exchange(&self, packet: Vec<u8>, timeout_ms: u64) -> Result<Vec<u8>, TransportError> {
        tokio::time::timeout(Duration::from_millis(timeout_ms), self.round_trip(&packet))
            .await
            .map_err(|_| TransportError::Timeout)?
    }
}
