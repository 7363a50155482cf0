//! A test-only HTTP/1.1 transport over loopback TCP (one connection a request, `Connection: close`) for the
//! adapter tests, until the shared hyper transport (`sim::wire::http::HyperTransport`) is on main.

use std::time::Duration;

use engine::http::{HttpRequest, HttpResponse, HttpTransport};
use engine::ports::TransportError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Loopback {
    pub authority: String,
}

impl Loopback {
    pub fn new(base_url: &str) -> Loopback {
        Loopback { authority: base_url.trim_start_matches("http://").trim_end_matches('/').to_owned() }
    }

    async fn round_trip(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let mut stream = TcpStream::connect(&self.authority).await.map_err(|_| TransportError::ConnectionRefused)?;
        let mut head = format!(
            "{} {} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: {}\r\n",
            request.method.as_str(),
            request.path_and_query,
            self.authority,
            request.body.len()
        );
        for (name, value) in &request.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&request.body);
        stream.write_all(&bytes).await.map_err(|_| TransportError::ConnectionReset)?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.map_err(|_| TransportError::ConnectionReset)?;
        parse(&answer).ok_or(TransportError::ConnectionReset)
    }
}

fn parse(answer: &[u8]) -> Option<HttpResponse> {
    let split = answer.windows(4).position(|window| window == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&answer[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let mut body = answer[split + 4..].to_vec();
    if chunked {
        body = dechunk(&body)?;
    }
    Some(HttpResponse { status, headers, body })
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|window| window == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

impl HttpTransport for Loopback {
    async fn send(&self, request: HttpRequest, timeout_ms: u64) -> Result<HttpResponse, TransportError> {
        tokio::time::timeout(Duration::from_millis(timeout_ms), self.round_trip(request))
            .await
            .map_err(|_| TransportError::Timeout)?
    }
}
