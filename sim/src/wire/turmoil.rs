//! The turmoil glue of the wire transport: a TCP connector for hyper-util's pooled client ([`TurmoilConnector`]), a
//! listener for `axum::serve` ([`SimListener`]), and a UDP datagram transport for the DNS client
//! ([`TurmoilDatagram`]), all over turmoil's simulated sockets (reference/turmoil-notes.md §3).
//!
//! Each works only inside a turmoil host's future: turmoil's sockets find their simulation through the host's
//! thread-local world.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use engine::adapters::http::DatagramTransport;
use engine::ports::TransportError;
use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest datagram the DNS transport reads (a DNS answer over UDP without EDNS fits in 512 bytes).
const DATAGRAM_BYTES_MAX: usize = 4096;
/// How long the listener waits before accepting again after a failed accept.
const ACCEPT_RETRY_MS: u64 = 10;

/// A turmoil TCP stream as hyper-util's client wants it (a newtype: `Connection` is hyper-util's trait, the stream is
/// turmoil's type).
#[derive(Debug)]
pub struct SimStream(pub turmoil::net::TcpStream);

impl Connection for SimStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for SimStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// Connects hyper-util's legacy client to `http://host:port` over turmoil TCP (the host is a turmoil host name).
/// Connecting across a partition is refused at once; connecting to a crashed host never completes (the caller's
/// timeout ends it).
#[derive(Debug, Clone, Copy, Default)]
pub struct TurmoilConnector;

type ConnectFuture = Pin<Box<dyn Future<Output = io::Result<TokioIo<SimStream>>> + Send>>;

impl tower::Service<Uri> for TurmoilConnector {
    type Response = TokioIo<SimStream>;
    type Error = io::Error;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no host in the url {uri}")))?
                .to_owned();
            let port = uri.port_u16().unwrap_or(80);
            let stream = turmoil::net::TcpStream::connect((host.as_str(), port)).await?;
            Ok(TokioIo::new(SimStream(stream)))
        })
    }
}

/// A turmoil TCP listener `axum::serve` can serve a router on. A failed accept is retried (the upstream example's
/// `unwrap()` would panic the host).
pub struct SimListener(pub turmoil::net::TcpListener);

impl SimListener {
    /// Listens on `0.0.0.0:port` of the current turmoil host.
    pub async fn bind(port: u16) -> io::Result<SimListener> {
        Ok(SimListener(turmoil::net::TcpListener::bind(("0.0.0.0", port)).await?))
    }
}

impl axum::serve::Listener for SimListener {
    type Io = turmoil::net::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok(accepted) => return accepted,
                Err(_) => tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// One DNS exchange over turmoil UDP: a fresh socket per query (so a late answer to an earlier, timed-out query is
/// never read as this one's), the answer taken from the server's address only.
#[derive(Debug, Clone)]
pub struct TurmoilDatagram {
    /// The server's turmoil host name and port.
    host: String,
    port: u16,
}

impl TurmoilDatagram {
    pub fn new(host: &str, port: u16) -> TurmoilDatagram {
        TurmoilDatagram { host: host.to_owned(), port }
    }

    async fn exchange_within(&self, packet: &[u8]) -> Result<Vec<u8>, TransportError> {
        let socket = turmoil::net::UdpSocket::bind("0.0.0.0:0").await.map_err(|_| TransportError::ConnectionReset)?;
        let target = SocketAddr::new(turmoil::lookup(self.host.as_str()), self.port);
        socket.send_to(packet, target).await.map_err(|error| match error.kind() {
            io::ErrorKind::ConnectionRefused => TransportError::ConnectionRefused,
            _ => TransportError::ConnectionReset,
        })?;
        let mut buffer = vec![0u8; DATAGRAM_BYTES_MAX];
        loop {
            let (length, from) = socket.recv_from(&mut buffer).await.map_err(|_| TransportError::ConnectionReset)?;
            if from == target {
                buffer.truncate(length);
                return Ok(buffer);
            }
        }
    }
}

impl DatagramTransport for TurmoilDatagram {
    async fn exchange(&self, packet: Vec<u8>, timeout_ms: u64) -> Result<Vec<u8>, TransportError> {
        match tokio::time::timeout(Duration::from_millis(timeout_ms), self.exchange_within(&packet)).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Timeout),
        }
    }
}

/// Serves datagrams on `0.0.0.0:port` of the current turmoil host: each one's answer is `answer(client, query)`
/// (`None`: no answer, as a server that drops a malformed query).
pub async fn serve_datagrams(
    port: u16,
    mut answer: impl FnMut(SocketAddr, &[u8]) -> Option<Vec<u8>>,
) -> io::Result<()> {
    let socket = turmoil::net::UdpSocket::bind(("0.0.0.0", port)).await?;
    let mut buffer = vec![0u8; DATAGRAM_BYTES_MAX];
    loop {
        let (length, from) = socket.recv_from(&mut buffer).await?;
        if let Some(reply) = answer(from, &buffer[..length]) {
            // A lost answer is the client's timeout, as on a real network.
            let _ = socket.send_to(&reply, from).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::{TokioExecutor, TokioTimer};

    use super::*;

    fn sim() -> turmoil::Sim<'static> {
        turmoil::Builder::new()
            .rng_seed(11)
            .epoch(std::time::UNIX_EPOCH)
            .tick_duration(Duration::from_millis(10))
            .simulation_duration(Duration::from_secs(60))
            .build()
    }

    #[test]
    fn the_pooled_client_reaches_an_axum_router_over_turmoil_tcp() {
        let mut sim = sim();
        sim.host("maas", || async {
            let router = axum::Router::new().route("/hello", axum::routing::get(|| async { "hello" }));
            axum::serve(SimListener::bind(5240).await?, router).await?;
            Ok(())
        });
        let seen: Rc<RefCell<Vec<String>>> = Rc::default();
        let out = seen.clone();
        sim.client("controller", async move {
            let client = Client::builder(TokioExecutor::new())
                .pool_timer(TokioTimer::new())
                .build::<_, Full<Bytes>>(TurmoilConnector);
            for _ in 0..3 {
                let response = client.get(Uri::from_static("http://maas:5240/hello")).await?;
                let status = response.status();
                let body = response.into_body().collect().await?.to_bytes();
                out.borrow_mut().push(format!("{status} {}", String::from_utf8_lossy(&body)));
            }
            Ok(())
        });
        sim.run().unwrap();
        assert_eq!(*seen.borrow(), vec!["200 OK hello"; 3]);
    }

    #[test]
    fn a_connection_across_a_partition_is_refused_and_a_datagram_answered_until_then() {
        let mut sim = sim();
        sim.host("maas", || async {
            serve_datagrams(53, |_, query| Some(query.iter().rev().copied().collect())).await?;
            Ok(())
        });
        let seen: Rc<RefCell<Vec<String>>> = Rc::default();
        let out = seen.clone();
        sim.client("controller", async move {
            let dns = TurmoilDatagram::new("maas", 53);
            let answered = dns.exchange(vec![1, 2, 3], 1_000).await;
            out.borrow_mut().push(format!("{answered:?}"));
            turmoil::partition("controller", "maas");
            let lost = dns.exchange(vec![1, 2, 3], 1_000).await;
            out.borrow_mut().push(format!("{lost:?}"));
            let connect = TurmoilConnector.call_once("http://maas:5240/".parse()?).await;
            out.borrow_mut().push(format!("{:?}", connect.map(|_| ()).map_err(|error| error.kind())));
            Ok(())
        });
        sim.run().unwrap();
        assert_eq!(*seen.borrow(), vec!["Ok([3, 2, 1])", "Err(Timeout)", "Err(ConnectionRefused)"]);
    }

    trait CallOnce {
        fn call_once(self, uri: Uri) -> ConnectFuture;
    }

    impl CallOnce for TurmoilConnector {
        fn call_once(mut self, uri: Uri) -> ConnectFuture {
            tower::Service::call(&mut self, uri)
        }
    }
}
