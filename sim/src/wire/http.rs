//! [`HyperTransport`]: the engine's [`HttpTransport`] on hyper-util's pooled legacy client, to one service's base URL,
//! over any connector: hyper-util's [`HttpConnector`] for real TCP ([`HyperTransport::tcp`]), or a turmoil
//! connector for the wire transport ([`HyperTransport::with_connector`]).
//!
//! Architecture Invariant: the client's pool keeps time on tokio's clock (`pool_timer(TokioTimer)`), never on
//! `std::time::Instant`; otherwise whether a connection is reused depends on how fast the simulation runs
//! (`reference/turmoil-notes.md` §3–4). Each call is bounded by `tokio::time::timeout`, body read included.
//!
//! Failures map onto [`TransportError`]: the timeout elapsed → `Timeout`; the connection could not be established
//! (refused, or any other connect failure: the request never left) → `ConnectionRefused`; anything after that
//! (closed or reset mid-call, a broken answer) → `ConnectionReset`.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use engine::adapters::http::{HttpRequest, HttpResponse, HttpTransport, Method};
use engine::ports::TransportError;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// How long an idle pooled connection is kept (hyper-util's default, made explicit).
pub const POOL_IDLE_TIMEOUT_MS: u64 = 90_000;

/// A base URL that is not `http://host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("base url {url:?} is not http://host[:port] ({why})")]
pub struct BaseUrlError {
    pub url: String,
    pub why: &'static str,
}

/// HTTP/1.1 to one service. Requests' `path_and_query` is appended to the base URL.
pub struct HyperTransport<C> {
    client: Client<C, Full<Bytes>>,
    base_url: String,
}

impl<C> fmt::Debug for HyperTransport<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HyperTransport").field("base_url", &self.base_url).finish_non_exhaustive()
    }
}

impl HyperTransport<HttpConnector> {
    /// Over real TCP (hyper-util's `HttpConnector`, `TCP_NODELAY` on).
    pub fn tcp(base_url: &str) -> Result<HyperTransport<HttpConnector>, BaseUrlError> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        HyperTransport::with_connector(connector, base_url)
    }
}

impl<C: Connect + Clone + Send + Sync + 'static> HyperTransport<C> {
    /// Over `connector` (any `tower::Service<Uri>` whose response is a hyper-util connection). Build it inside the
    /// runtime (the host) whose tasks should carry its connections: they are spawned with `tokio::spawn`.
    pub fn with_connector(connector: C, base_url: &str) -> Result<HyperTransport<C>, BaseUrlError> {
        let error = |why| BaseUrlError { url: base_url.to_owned(), why };
        let uri: http::Uri = base_url.parse().map_err(|_| error("not a uri"))?;
        if uri.scheme_str() != Some("http") {
            return Err(error("the scheme must be http"));
        }
        if uri.authority().is_none() {
            return Err(error("no host"));
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(error("no path or query: requests carry theirs"));
        }
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_millis(POOL_IDLE_TIMEOUT_MS))
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(HyperTransport { client, base_url: base_url.trim_end_matches('/').to_owned() })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    fn build(&self, request: HttpRequest) -> Result<http::Request<Full<Bytes>>, http::Error> {
        let method = match request.method {
            Method::Get => http::Method::GET,
            Method::Post => http::Method::POST,
            Method::Put => http::Method::PUT,
            Method::Patch => http::Method::PATCH,
            Method::Delete => http::Method::DELETE,
        };
        let mut builder =
            http::Request::builder().method(method).uri(format!("{}{}", self.base_url, request.path_and_query));
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        builder.body(Full::new(Bytes::from(request.body)))
    }

    async fn exchange(&self, request: http::Request<Full<Bytes>>) -> Result<HttpResponse, TransportError> {
        let response = self.client.request(request).await.map_err(|error| {
            if error.is_connect() { TransportError::ConnectionRefused } else { TransportError::ConnectionReset }
        })?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|_| TransportError::ConnectionReset)?.to_bytes();
        let headers = parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        Ok(HttpResponse { status: parts.status.as_u16(), headers, body: body.to_vec() })
    }
}

impl<C: Connect + Clone + Send + Sync + 'static> HttpTransport for HyperTransport<C> {
    async fn send(&self, request: HttpRequest, timeout_ms: u64) -> Result<HttpResponse, TransportError> {
        let request = match self.build(request) {
            Ok(request) => request,
            Err(_) => {
                // A header or path the adapter built is not valid HTTP: the request never left.
                tracing::debug!("http request could not be built");
                return Err(TransportError::ConnectionRefused);
            }
        };
        match tokio::time::timeout(Duration::from_millis(timeout_ms), self.exchange(request)).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(TransportError::Timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn listener() -> (tokio::net::TcpListener, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("bound");
        (listener, format!("http://{address}"))
    }

    #[tokio::test]
    async fn a_request_goes_out_as_given_and_the_answer_comes_back_with_lowercase_headers() {
        let (listener, base_url) = listener().await;
        let app = axum::Router::new().route(
            "/MAAS/api/2.0/machines/",
            axum::routing::post(|uri: http::Uri, headers: http::HeaderMap, body: String| async move {
                let seen = format!(
                    "{} {} {} {}",
                    uri.query().unwrap_or_default(),
                    headers.get("x-probe").and_then(|value| value.to_str().ok()).unwrap_or_default(),
                    headers.get("content-type").and_then(|value| value.to_str().ok()).unwrap_or_default(),
                    body
                );
                (http::StatusCode::CONFLICT, [("Retry-After", "5")], seen)
            }),
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let transport = HyperTransport::tcp(&format!("{base_url}/")).expect("a base url");
        let request = HttpRequest::new(Method::Post, "/MAAS/api/2.0/machines/?op=deploy")
            .header("X-Probe", "p1")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(b"erase=true&comment=a+b".to_vec());
        let response = transport.send(request, 5_000).await.expect("an answer");
        assert_eq!(response.status, 409);
        assert_eq!(response.header("retry-after"), Some("5"));
        assert!(response.headers.iter().any(|(name, _)| name == "retry-after"));
        assert_eq!(
            String::from_utf8_lossy(&response.body),
            "op=deploy p1 application/x-www-form-urlencoded erase=true&comment=a+b"
        );
        server.abort();
    }

    #[tokio::test]
    async fn nobody_listening_is_connection_refused() {
        let (listener, base_url) = listener().await;
        drop(listener);
        let transport = HyperTransport::tcp(&base_url).expect("a base url");
        let answer = transport.send(HttpRequest::new(Method::Get, "/MAAS/api/2.0/version/"), 5_000).await;
        assert_eq!(answer, Err(TransportError::ConnectionRefused));
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_within_the_timeout_is_timeout() {
        // The kernel completes the handshake from the backlog; nobody reads or answers.
        let (_listener, base_url) = listener().await;
        let transport = HyperTransport::tcp(&base_url).expect("a base url");
        let answer = transport.send(HttpRequest::new(Method::Get, "/MAAS/api/2.0/version/"), 30_000).await;
        assert_eq!(answer, Err(TransportError::Timeout));
    }

    #[tokio::test]
    async fn a_connection_closed_mid_call_is_connection_reset() {
        let (listener, base_url) = listener().await;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("a connection");
            let mut buffer = [0u8; 64];
            let _ = stream.read(&mut buffer).await;
            // Closed with the request read and unanswered.
        });
        let transport = HyperTransport::tcp(&base_url).expect("a base url");
        let answer = transport.send(HttpRequest::new(Method::Get, "/MAAS/api/2.0/version/"), 5_000).await;
        assert_eq!(answer, Err(TransportError::ConnectionReset));
        server.await.expect("the server task ends");
    }

    #[tokio::test]
    async fn any_connector_plugs_in_and_the_pool_reuses_its_connection() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let (listener, base_url) = listener().await;
        let app = axum::Router::new().route("/MAAS/api/2.0/version/", axum::routing::get(|| async { "{}" }));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let connects = Arc::new(AtomicUsize::new(0));
        let counted = connects.clone();
        // What a turmoil connector is: a tower service from a URI to a hyper-util connection.
        let connector = tower::service_fn(move |uri: http::Uri| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let authority = uri.authority().map(|authority| authority.as_str().to_owned()).unwrap_or_default();
                let stream = tokio::net::TcpStream::connect(authority).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            })
                as std::pin::Pin<
                    Box<
                        dyn std::future::Future<
                                Output = std::io::Result<hyper_util::rt::TokioIo<tokio::net::TcpStream>>,
                            > + Send,
                    >,
                >
        });
        let transport = HyperTransport::with_connector(connector, &base_url).expect("a base url");
        for _ in 0..3 {
            let response = transport.send(HttpRequest::new(Method::Get, "/MAAS/api/2.0/version/"), 5_000).await;
            assert_eq!(response.map(|response| response.status), Ok(200));
        }
        assert_eq!(connects.load(Ordering::SeqCst), 1, "one pooled connection for three sequential calls");
        server.abort();
    }

    #[test]
    fn a_base_url_is_http_host_port_only() {
        assert_eq!(HyperTransport::tcp("http://maas:5240/").expect("valid").base_url(), "http://maas:5240");
        for (bad, why) in [
            ("https://maas:5240", "the scheme must be http"),
            ("maas:5240", "the scheme must be http"),
            ("http://maas:5240/MAAS/", "no path or query: requests carry theirs"),
            ("not a url", "not a uri"),
        ] {
            assert_eq!(HyperTransport::tcp(bad).map(|_| ()).expect_err(bad).why, why, "{bad}");
        }
    }
}
