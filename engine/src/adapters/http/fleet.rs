//! The GPUaaS inventory client: [`FleetClient`] implements the [`Fleet`] port over the inventory's JSON API
//! (`docs/http-apis.md`): records, allocations and node tasks.
//!
//! Error mapping: 503 is `Unavailable` with its `Retry-After`, 404 `NotFound`, 409 `Conflict`, 502 with the kind
//! `agent_unreachable` is `AgentUnreachable`; any other answer is a `Conflict` naming the status (an answer the
//! workflow cannot act on is a stop for a person, never a retry); no answer is `Transport`.

use serde::Deserialize;
use serde_json::json;

use crate::adapters::http::{HttpRequest, HttpResponse, HttpTransport, Method};
use crate::matrix::NodeState;
use crate::ports::fleet::{Fleet, FleetError, FleetRecord, NodeTask, TaskOutcome};

/// The inventory service at the transport's base URL.
#[derive(Debug)]
pub struct FleetClient<T> {
    transport: T,
    call_timeout_ms: u64,
    /// Sent as `Authorization: Bearer` on every call when set.
    token: Option<crate::secret::Secret>,
}

impl<T: HttpTransport> FleetClient<T> {
    pub fn new(transport: T, call_timeout_ms: u64) -> FleetClient<T> {
        FleetClient { transport, call_timeout_ms, token: None }
    }

    /// Every call carries `Authorization: Bearer <token>` (the served inventory requires it).
    pub fn with_token(mut self, token: crate::secret::Secret) -> FleetClient<T> {
        self.token = Some(token);
        self
    }

    async fn call(&self, method: Method, path: String, body: Option<serde_json::Value>) -> Result<Vec<u8>, FleetError> {
        let mut request = HttpRequest::new(method, path).header("accept", "application/json");
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {}", token.expose()));
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string().into_bytes());
        }
        let response = self.transport.send(request, self.call_timeout_ms).await?;
        if (200..300).contains(&response.status) {
            return Ok(response.body);
        }
        Err(fleet_error(&response))
    }
}

fn fleet_error(response: &HttpResponse) -> FleetError {
    let body = response.error_body();
    match response.status {
        503 => FleetError::Unavailable {
            retry_after_s: response.header("retry-after").and_then(|value| value.trim().parse().ok()).unwrap_or(10),
        },
        404 => FleetError::NotFound(body.message),
        409 => FleetError::Conflict(body.message),
        502 if body.error == "agent_unreachable" => FleetError::AgentUnreachable(body.message),
        status => FleetError::Conflict(format!("inventory answered {status}: {}", body.message)),
    }
}

fn decode<'a, D: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<D, FleetError> {
    serde_json::from_slice(bytes).map_err(|error| FleetError::Conflict(format!("unexpected {what} answer: {error}")))
}

fn state_name(state: NodeState) -> Option<&'static str> {
    match state {
        NodeState::Enrolling => Some("enrolling"),
        NodeState::Active => Some("active"),
        NodeState::Quarantined => Some("quarantined"),
        NodeState::Retired => Some("retired"),
        _ => None,
    }
}

fn parse_state(name: &str) -> Result<NodeState, FleetError> {
    match name {
        "enrolling" => Ok(NodeState::Enrolling),
        "active" => Ok(NodeState::Active),
        "quarantined" => Ok(NodeState::Quarantined),
        "retired" => Ok(NodeState::Retired),
        other => Err(FleetError::Conflict(format!("unknown record state {other:?}"))),
    }
}

/// A node name as one path segment: the inventory's names are DNS labels; anything else is refused, not escaped.
fn segment(node: &str) -> Result<&str, FleetError> {
    if !node.is_empty() && node.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.') {
        Ok(node)
    } else {
        Err(FleetError::NotFound(format!("{node:?} is not a node name")))
    }
}

#[derive(Debug, Deserialize)]
struct RecordAnswer {
    record: Option<RecordWire>,
}

#[derive(Debug, Deserialize)]
struct RecordWire {
    state: String,
    allocations: Vec<String>,
    agent_installed: bool,
}

#[derive(Debug, Deserialize)]
struct ReleaseAnswer {
    remaining: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct TaskAnswer {
    result: String,
    #[serde(default)]
    detail: String,
}

impl<T: HttpTransport> Fleet for FleetClient<T> {
    async fn record(&self, node: &str) -> Result<Option<FleetRecord>, FleetError> {
        let bytes = self.call(Method::Get, format!("/v1/inventory/nodes/{}", segment(node)?), None).await?;
        let answer: RecordAnswer = decode(&bytes, "record")?;
        answer
            .record
            .map(|record| {
                Ok(FleetRecord {
                    state: parse_state(&record.state)?,
                    allocations: record.allocations,
                    agent_installed: record.agent_installed,
                })
            })
            .transpose()
    }

    async fn transition(&self, node: &str, from: NodeState, to: NodeState) -> Result<(), FleetError> {
        let (Some(from), Some(to)) = (state_name(from), state_name(to)) else {
            return Err(FleetError::Conflict(format!("{node}: {from:?} -> {to:?} is not a record transition")));
        };
        let path = format!("/v1/inventory/nodes/{}/transition", segment(node)?);
        self.call(Method::Post, path, Some(json!({ "from": from, "to": to }))).await.map(|_| ())
    }

    async fn release_allocations(&self, node: &str, force: bool) -> Result<Vec<String>, FleetError> {
        let path = format!("/v1/inventory/nodes/{}/allocations/release", segment(node)?);
        let bytes = self.call(Method::Post, path, Some(json!({ "force": force }))).await?;
        let answer: ReleaseAnswer = decode(&bytes, "release")?;
        Ok(answer.remaining)
    }

    async fn run_task(&self, node: &str, task: NodeTask, operation_id: &str) -> Result<TaskOutcome, FleetError> {
        let path = format!("/v1/inventory/nodes/{}/tasks", segment(node)?);
        let body = json!({ "task": task.as_str(), "operation_id": operation_id });
        let bytes = self.call(Method::Post, path, Some(body)).await?;
        let answer: TaskAnswer = decode(&bytes, "task")?;
        match answer.result.as_str() {
            "done" => Ok(TaskOutcome::Done),
            "residue" => Ok(TaskOutcome::Residue(answer.detail)),
            "failed" => Ok(TaskOutcome::Failed(answer.detail)),
            other => Err(FleetError::Conflict(format!("unknown task result {other:?}"))),
        }
    }

    async fn remove_record(&self, node: &str) -> Result<(), FleetError> {
        self.call(Method::Delete, format!("/v1/inventory/nodes/{}", segment(node)?), None).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::ports::TransportError;

    /// Answers each request with the next canned response and keeps what it was sent.
    struct Canned {
        answers: RefCell<Vec<Result<HttpResponse, TransportError>>>,
        sent: RefCell<Vec<HttpRequest>>,
    }

    impl Canned {
        fn new(answers: Vec<Result<HttpResponse, TransportError>>) -> Canned {
            Canned { answers: RefCell::new(answers), sent: RefCell::new(Vec::new()) }
        }
    }

    impl HttpTransport for &Canned {
        async fn send(&self, request: HttpRequest, _timeout_ms: u64) -> Result<HttpResponse, TransportError> {
            self.sent.borrow_mut().push(request);
            self.answers.borrow_mut().remove(0)
        }
    }

    fn answer(status: u16, body: &str, headers: &[(&str, &str)]) -> Result<HttpResponse, TransportError> {
        Ok(HttpResponse {
            status,
            headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            body: body.as_bytes().to_vec(),
        })
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        futures_util::FutureExt::now_or_never(future).expect("the canned transport never waits")
    }

    #[test]
    fn a_record_is_decoded_and_a_removed_one_is_none() {
        let canned = Canned::new(vec![
            answer(200, r#"{"record":{"state":"quarantined","allocations":["a1"],"agent_installed":true}}"#, &[]),
            answer(200, r#"{"record":null}"#, &[]),
        ]);
        let client = FleetClient::new(&canned, 1000);
        let record = block_on(client.record("gpu-01")).unwrap().unwrap();
        assert_eq!(record.state, NodeState::Quarantined);
        assert_eq!(record.allocations, ["a1"]);
        assert_eq!(block_on(client.record("gpu-01")).unwrap(), None);
        assert_eq!(canned.sent.borrow()[0].path_and_query, "/v1/inventory/nodes/gpu-01");
    }

    #[test]
    fn statuses_map_onto_the_port_errors() {
        let canned = Canned::new(vec![
            answer(503, r#"{"error":"unavailable","message":"x"}"#, &[("retry-after", "7")]),
            answer(409, r#"{"error":"conflict","message":"gpu-01 is active, cannot become retired"}"#, &[]),
            answer(502, r#"{"error":"agent_unreachable","message":"no agent"}"#, &[]),
            Err(TransportError::Timeout),
        ]);
        let client = FleetClient::new(&canned, 1000);
        let from = NodeState::Active;
        assert_eq!(block_on(client.record("gpu-01")), Err(FleetError::Unavailable { retry_after_s: 7 }));
        assert!(matches!(
            block_on(client.transition("gpu-01", from, NodeState::Retired)),
            Err(FleetError::Conflict(message)) if message.contains("cannot become retired")
        ));
        assert!(matches!(
            block_on(client.run_task("gpu-01", NodeTask::Drain, "w/drain/1")),
            Err(FleetError::AgentUnreachable(_))
        ));
        assert_eq!(block_on(client.remove_record("gpu-01")), Err(FleetError::Transport(TransportError::Timeout)));
        let sent = canned.sent.borrow();
        assert_eq!(String::from_utf8_lossy(&sent[1].body), r#"{"from":"active","to":"retired"}"#);
        assert_eq!(sent[3].method, Method::Delete);
    }

    #[test]
    fn a_node_name_that_is_not_a_path_segment_is_refused_without_a_request() {
        let canned = Canned::new(Vec::new());
        let client = FleetClient::new(&canned, 1000);
        assert!(matches!(block_on(client.record("../admin")), Err(FleetError::NotFound(_))));
        assert!(canned.sent.borrow().is_empty());
    }
}
