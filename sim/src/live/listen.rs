//! The limits of every HTTP listener `fleetsim serve` opens, so that idle, half-sent or slow connections cannot stop
//! a served site: a header-read timeout that also bounds keep-alive idleness (hyper's, which starts when a
//! connection opens and again after each response), a deadline and a minimum rate for each request's body, a time
//! limit on each request (408), and a cap on open connections per service. At the cap a new connection takes the
//! place of the one that has waited longest — idle (no request), or stalled in a request's body (its headers in, its
//! body still arriving: a client trickling a body is as idle as one sending nothing); only when every connection has
//! a request being handled is the new one refused, so a flood of idle or trickling connections costs a real client
//! nothing. The routes check a request's credential from its headers before they read its body (`fakes::http`), so
//! a client without one never gets as far as a body. Request bodies are limited by the fakes' own extractors (413).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use http::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::time::Instant;
use tower::ServiceExt;

/// How long an accept loop waits after a failed accept before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// The limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a connection may take to send a request's headers, counted from when it opens and from each
    /// response (so it is also the keep-alive idle timeout).
    pub header_read: Duration,
    /// How long one request may take, its body included, before it is answered 408.
    pub request: Duration,
    /// How long a request's body may take to arrive, from its headers: past it the body fails and the connection
    /// closes.
    pub body_read: Duration,
    /// The least rate a body must arrive at, in bytes per second, once [`BODY_RATE_GRACE`] has passed (0: none).
    pub body_bytes_per_s_min: u64,
    /// Open connections per listener.
    pub connections_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(10),
            request: Duration::from_secs(30),
            body_read: Duration::from_secs(10),
            body_bytes_per_s_min: 1_024,
            connections_max: 512,
        }
    }
}

/// How long a body may arrive at any rate before [`Limits::body_bytes_per_s_min`] applies.
pub const BODY_RATE_GRACE: Duration = Duration::from_secs(1);

/// One open connection, as the listener's cap sees it.
struct Slot {
    /// Requests on it now, from their headers to their answer.
    in_flight: AtomicUsize,
    /// Of those, the ones whose body is still arriving.
    in_body: AtomicUsize,
    /// When it last went idle (opened, or answered its last request), or a body began to arrive on it.
    idle_since: Mutex<Instant>,
    /// Closes it to make room.
    evict: Notify,
}

impl Slot {
    /// Whether the cap may close it: no request, or every request on it still waiting for its body.
    fn evictable(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) <= self.in_body.load(Ordering::SeqCst)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The open connections of one listener.
#[derive(Default)]
struct Open {
    next: u64,
    slots: BTreeMap<u64, Arc<Slot>>,
}

/// A listener's open connections, shared by its accept loop and its connections.
#[derive(Clone, Default)]
pub struct Connections(Arc<Mutex<Open>>);

impl Connections {
    /// How many connections are open now.
    pub fn open(&self) -> usize {
        lock(&self.0).slots.len()
    }

    /// How many open connections have a request in flight now (its body arriving or not).
    pub fn busy(&self) -> usize {
        lock(&self.0).slots.values().filter(|slot| slot.in_flight.load(Ordering::SeqCst) > 0).count()
    }

    /// How many open connections have a request being handled (its body, if any, all in): the ones the cap spares.
    pub fn handling(&self) -> usize {
        lock(&self.0).slots.values().filter(|slot| !slot.evictable()).count()
    }

    /// Admits a new connection, closing the one idle or stalled in a body the longest when the cap is reached;
    /// `None` when every open connection has a request being handled.
    fn admit(&self, connections_max: usize) -> Option<(u64, Arc<Slot>)> {
        let mut open = lock(&self.0);
        if open.slots.len() >= connections_max.max(1) {
            let idlest = open
                .slots
                .iter()
                .filter(|(_, slot)| slot.evictable())
                .min_by_key(|(id, slot)| (*lock(&slot.idle_since), **id))
                .map(|(id, _)| *id)?;
            if let Some(slot) = open.slots.remove(&idlest) {
                slot.evict.notify_one();
            }
        }
        let slot = Arc::new(Slot {
            in_flight: AtomicUsize::new(0),
            in_body: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            evict: Notify::new(),
        });
        let id = open.next;
        open.next += 1;
        open.slots.insert(id, slot.clone());
        Some((id, slot))
    }

    fn leave(&self, id: u64) {
        lock(&self.0).slots.remove(&id);
    }
}

/// Marks a request in flight on its connection for as long as it lives.
struct InFlight(Arc<Slot>);

impl InFlight {
    fn new(slot: Arc<Slot>) -> InFlight {
        slot.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(slot)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        *lock(&self.0.idle_since) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves `router` on `listener` within `limits` until the runtime stops; returns the address and the listener's
/// open connections.
pub fn spawn(listener: TcpListener, router: Router, limits: Limits) -> std::io::Result<(SocketAddr, Connections)> {
    let addr = listener.local_addr()?;
    let connections = Connections::default();
    let open = connections.clone();
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                // Out of descriptors or a reset before accept: the listener itself goes on, after a pause, so that
                // a process out of descriptors does not spin on a failing accept.
                Err(error) => {
                    tracing::warn!(%addr, %error, "accept failed");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            let Some((id, slot)) = open.admit(limits.connections_max) else {
                tracing::warn!(%addr, open = open.open(), "every connection has a request in flight: refused one");
                drop(stream);
                continue;
            };
            let (router, open) = (router.clone(), open.clone());
            tokio::spawn(async move {
                serve_connection(stream, router, limits, slot).await;
                open.leave(id);
            });
        }
    });
    Ok((addr, connections))
}

/// A request's body as the handler reads it: held to the body deadline and the minimum rate (an error past either,
/// which ends the request and its connection), and counting as a stall its connection may be closed for until it
/// ends (or the handler drops it unread: a credential refused from the headers).
struct GuardedBody {
    inner: hyper::body::Incoming,
    slot: Arc<Slot>,
    started: Instant,
    received: u64,
    limits: Limits,
    /// When the body is next judged if nothing arrives: the deadline, or when the rate would fall below its minimum.
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// Still counted in its slot's `in_body`.
    stalling: bool,
}

impl GuardedBody {
    fn new(inner: hyper::body::Incoming, slot: Arc<Slot>, limits: Limits) -> GuardedBody {
        let started = Instant::now();
        slot.in_body.fetch_add(1, Ordering::SeqCst);
        *lock(&slot.idle_since) = started;
        let timer = Box::pin(tokio::time::sleep_until(started + BODY_RATE_GRACE.min(limits.body_read)));
        GuardedBody { inner, slot, started, received: 0, limits, timer, stalling: true }
    }

    /// The body is in (or will never be read): the request is being handled from here.
    fn settle(&mut self) {
        if std::mem::take(&mut self.stalling) {
            self.slot.in_body.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Why the body has failed by now, if it has; otherwise when to look again.
    fn judge(&self, now: Instant) -> Result<Instant, &'static str> {
        let deadline = self.started + self.limits.body_read;
        if now >= deadline {
            return Err("the request body did not arrive within the listener's deadline");
        }
        let rate = self.limits.body_bytes_per_s_min;
        if rate == 0 {
            return Ok(deadline);
        }
        // The body must have `rate` bytes for every second past the grace: when does what arrived stop sufficing?
        let covered = Duration::from_secs_f64(self.received as f64 / rate as f64);
        let due = self.started + BODY_RATE_GRACE + covered;
        if now >= due + Duration::from_millis(1) {
            return Err("the request body arrived slower than the listener's minimum rate");
        }
        Ok(due.min(deadline).max(now + Duration::from_millis(1)))
    }
}

impl Drop for GuardedBody {
    fn drop(&mut self) {
        self.settle();
    }
}

impl hyper::body::Body for GuardedBody {
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.settle();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(error))) => {
                this.settle();
                Poll::Ready(Some(Err(Box::new(error))))
            }
            Poll::Pending => match this.judge(Instant::now()) {
                Err(reason) => {
                    this.settle();
                    Poll::Ready(Some(Err(reason.into())))
                }
                Ok(next) => {
                    this.timer.as_mut().reset(next);
                    if std::future::Future::poll(this.timer.as_mut(), cx).is_ready() {
                        cx.waker().wake_by_ref();
                    }
                    Poll::Pending
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

async fn serve_connection(stream: tokio::net::TcpStream, router: Router, limits: Limits, slot: Arc<Slot>) {
    let in_slot = slot.clone();
    let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        let (router, in_flight) = (router.clone(), InFlight::new(in_slot.clone()));
        let empty = hyper::body::Body::is_end_stream(request.body());
        let body_slot = in_slot.clone();
        async move {
            let request = if empty {
                request.map(axum::body::Body::new)
            } else {
                request.map(|body| axum::body::Body::new(GuardedBody::new(body, body_slot, limits)))
            };
            let response = match tokio::time::timeout(limits.request, router.oneshot(request)).await {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_) => {
                    (StatusCode::REQUEST_TIMEOUT, "the request took longer than the listener allows\n").into_response()
                }
            };
            drop(in_flight);
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read).keep_alive(true);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        biased;
        () = slot.evict.notified() => {}
        _ = connection => {}
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::{get, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// A failure guard, never a speed claim: what must happen happens long before it.
    const GUARD: Duration = Duration::from_secs(20);

    async fn start(limits: Limits) -> (SocketAddr, Connections) {
        let router = Router::new()
            .route("/", get(|| async { "ok" }))
            .route("/upload", post(|body: axum::body::Bytes| async move { body.len().to_string() }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        spawn(listener, router, limits).unwrap()
    }

    /// One request and its whole answer, over a fresh connection.
    async fn get_root(addr: SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(GUARD, stream.read_to_string(&mut answer)).await.expect("answered").unwrap();
        answer
    }

    /// Whether the server closed `stream` (a read ends or fails), waiting at most the guard.
    async fn closed(stream: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        matches!(tokio::time::timeout(GUARD, stream.read(&mut byte)).await, Ok(Ok(0) | Err(_)))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_idle_connections_is_capped_and_a_real_request_is_still_answered() {
        let limits = Limits { header_read: Duration::from_secs(3_600), connections_max: 64, ..Limits::default() };
        let (addr, connections) = start(limits).await;
        let mut idle = Vec::new();
        for index in 0..1_000 {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            if index % 2 == 1 {
                // Half of them half-send a request and stop.
                stream.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").await.unwrap();
            }
            idle.push(stream);
        }
        let answer = get_root(addr).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("ok"), "{answer}");
        assert!(connections.open() <= 64, "{} connections open past a cap of 64", connections.open());
        assert!(closed(&mut idle[0]).await, "the longest-idle connection was not closed to make room");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_that_sends_no_whole_header_is_closed() {
        let limits = Limits { header_read: Duration::from_millis(200), ..Limits::default() };
        let (addr, connections) = start(limits).await;
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut half = TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").await.unwrap();
        assert!(closed(&mut silent).await, "a connection that never sent a byte stayed open");
        assert!(closed(&mut half).await, "a half-sent header kept its connection open");
        // And a keep-alive connection that went idle after its answer.
        let mut kept = TcpStream::connect(addr).await.unwrap();
        kept.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
        let mut buffer = [0u8; 512];
        let read = tokio::time::timeout(GUARD, kept.read(&mut buffer)).await.expect("answered").unwrap();
        assert!(buffer[..read].starts_with(b"HTTP/1.1 200 OK"));
        assert!(closed(&mut kept).await, "an idle keep-alive connection stayed open");
        let _ = connections;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_slower_than_the_request_limit_is_answered_408() {
        let limits = Limits { request: Duration::from_millis(300), ..Limits::default() };
        let (addr, _) = start(limits).await;
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789").await.unwrap();
        let mut answer = vec![0u8; 512];
        let read = tokio::time::timeout(GUARD, slow.read(&mut answer)).await.expect("answered").unwrap();
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_whose_requests_are_being_handled_are_never_closed_to_make_room() {
        let limits = Limits { connections_max: 2, request: Duration::from_secs(3_600), ..Limits::default() };
        let release = Arc::new(Notify::new());
        let held = release.clone();
        let router = Router::new().route(
            "/hold",
            post(move |body: axum::body::Bytes| {
                let held = held.clone();
                async move {
                    held.notified().await;
                    body.len().to_string()
                }
            }),
        );
        let (addr, connections) = spawn(TcpListener::bind("127.0.0.1:0").await.unwrap(), router, limits).unwrap();
        // Two requests whose bodies are in, held by their handler, fill the cap.
        let mut busy = Vec::new();
        for _ in 0..2 {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(b"POST /hold HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd").await.unwrap();
            busy.push(stream);
        }
        tokio::time::timeout(GUARD, async {
            while connections.handling() < 2 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("both requests reached their handler");
        // The third is refused: it is closed without an answer.
        let mut third = TcpStream::connect(addr).await.unwrap();
        assert!(closed(&mut third).await, "a connection past a cap of busy ones was admitted");
        // The busy ones are answered once their handlers finish.
        release.notify_waiters();
        for stream in &mut busy {
            let mut answer = vec![0u8; 512];
            let read = tokio::time::timeout(GUARD, stream.read(&mut answer)).await.expect("answered").unwrap();
            let answer = String::from_utf8_lossy(&answer[..read]);
            assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with('4'), "{answer}");
        }
        assert!(connections.open() <= 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_trickling_bodies_is_closed_like_idle_connections_and_a_real_request_is_answered() {
        // No deadline or rate within the test's reach: only the cap can close the flood's connections.
        let limits = Limits {
            header_read: Duration::from_secs(3_600),
            request: Duration::from_secs(3_600),
            body_read: Duration::from_secs(3_600),
            body_bytes_per_s_min: 0,
            connections_max: 64,
        };
        let (addr, connections) = start(limits).await;
        let mut trickling = Vec::new();
        for _ in 0..1_000 {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nx").await.unwrap();
            trickling.push(stream);
        }
        let answer = get_root(addr).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("ok"), "{answer}");
        assert!(connections.open() <= 64, "{} connections open past a cap of 64", connections.open());
        assert!(closed(&mut trickling[0]).await, "the connection stalled longest in its body was not closed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_below_the_minimum_rate_or_past_its_deadline_ends_its_request() {
        for limits in [
            // Ten bytes of a 100 kB body, then nothing: below 1,000 bytes a second once the grace has passed.
            Limits { request: Duration::from_secs(3_600), body_read: Duration::from_secs(3_600), ..Limits::default() },
            // No minimum rate, a deadline of 1.5 s.
            Limits {
                request: Duration::from_secs(3_600),
                body_read: Duration::from_millis(1_500),
                body_bytes_per_s_min: 0,
                ..Limits::default()
            },
        ] {
            let (addr, _) = start(limits).await;
            let mut slow = TcpStream::connect(addr).await.unwrap();
            slow.write_all(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n0123456789")
                .await
                .unwrap();
            let mut answer = vec![0u8; 512];
            let read = tokio::time::timeout(GUARD, slow.read(&mut answer)).await.expect("ended within the guard");
            let answer = String::from_utf8_lossy(&answer[..read.unwrap_or(0)]).into_owned();
            assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 4"), "{limits:?}: {answer}");
            assert!(closed(&mut slow).await, "{limits:?}: the connection stayed open");
        }
    }
}
