//! The engine's real adapters: the MAAS REST client, the site secrets client, the hub client and the DNS resolver
//! client. Each speaks its service's real protocol (OAuth 1.0 PLAINTEXT and form-encoded bodies for MAAS, JSON for the
//! hub and the secrets store, the DNS wire format) and maps answers into the port's types and error enums.
//!
//! Architecture Invariant: the adapters own the protocol (what bytes go out, what an answer means) and nothing else.
//! The bytes travel through an [`HttpTransport`] or a [`DatagramTransport`]: hyper over real TCP in `fleetsim drive`,
//! hyper over turmoil's simulated TCP in the wire transport, a stub in tests. So the engine stays free of any runtime
//! and the same adapter code runs in production and in simulation.
//!
//! API Boundary: no secret reaches a log line, an error text or a `Debug` output: [`HttpRequest`]'s `Debug` redacts
//! the credential headers, and errors carry the status and the server's message, never the request.

use std::fmt;
use std::future::Future;

use crate::ports::TransportError;

pub mod dns;
pub mod fleet;
pub mod hub;
pub mod maas;
pub mod oauth;
pub mod provider;
pub mod secrets;

/// An HTTP method the adapters use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

/// Headers whose values are credentials: redacted in every `Debug` output.
pub const CREDENTIAL_HEADERS: [&str; 4] = ["authorization", "x-vault-token", "x-fleet-token", "proxy-authorization"];

/// One request, relative to the service's base URL (`path_and_query` starts with `/`).
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: Method,
    pub path_and_query: String,
    /// Header names lowercase, in the order they are sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn new(method: Method, path_and_query: impl Into<String>) -> HttpRequest {
        HttpRequest { method, path_and_query: path_and_query.into(), headers: Vec::new(), body: Vec::new() }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> HttpRequest {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    pub fn body(mut self, body: Vec<u8>) -> HttpRequest {
        self.body = body;
        self
    }
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| {
                if CREDENTIAL_HEADERS.contains(&name.as_str()) {
                    (name.as_str(), "[redacted]")
                } else {
                    (name.as_str(), value.as_str())
                }
            })
            .collect();
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("path_and_query", &self.path_and_query)
            .field("headers", &headers)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// The `{"error": <kind>, "message": <text>}` body our own services answer errors with; a body that is not
    /// one is read as a message of its own text, with no kind.
    pub(crate) fn error_body(&self) -> ErrorBody {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| ErrorBody { error: String::new(), message: String::from_utf8_lossy(&self.body).into() })
    }
}

/// An error answer's kind and message (see [`HttpResponse::error_body`]).
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    pub(crate) error: String,
    #[serde(default)]
    pub(crate) message: String,
}

/// Carries HTTP requests to one service (its base URL is the transport's). Implementations map what they cannot
/// deliver onto [`TransportError`]: no answer within `timeout_ms` is `Timeout`, nobody listening is
/// `ConnectionRefused`, a connection lost mid-call is `ConnectionReset`.
pub trait HttpTransport {
    fn send(&self, request: HttpRequest, timeout_ms: u64)
    -> impl Future<Output = Result<HttpResponse, TransportError>>;
}

/// Carries one datagram to a service and brings back its answer (DNS over UDP).
pub trait DatagramTransport {
    fn exchange(&self, packet: Vec<u8>, timeout_ms: u64) -> impl Future<Output = Result<Vec<u8>, TransportError>>;
}
