//! The GPUaaS inventory, allocation service and node tasks over HTTP (our own service, so we define its API; it is
//! documented in `docs/http-apis.md`). The handlers call [`Inventory::handle`], the model the fast transport calls;
//! this module only translates JSON and status codes.
//!
//! - `GET /v1/inventory/nodes/{node}` → `{"record": null}` or `{"record": {"state", "allocations", "agent_installed"}}`
//! - `POST /v1/inventory/nodes/{node}/transition` `{"from", "to"}` → `{}`
//! - `POST /v1/inventory/nodes/{node}/allocations/release` `{"force"}` → `{"remaining": [..]}`
//! - `POST /v1/inventory/nodes/{node}/tasks` `{"task", "operation_id"}` → `{"result": "done"|"residue"|"failed", "detail"}`
//! - `DELETE /v1/inventory/nodes/{node}` → `{}`
//!
//! Errors are `{"error": <kind>, "message": <text>}`: 503 `unavailable` (with `Retry-After`), 404 `not_found`, 409
//! `conflict`, 502 `agent_unreachable` (the node's agent did not take the task), 400 `bad_request`.
//!
//! Deviation (from the simulator's timing, not from a real service): a task is answered when it is done, at once;
//! the fast transport waits [`NodeTask::duration_ms`] of virtual time first.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::inventory::{
    Inventory, InventoryError, InventoryRequest, InventoryResponse, NodeTask, RecordState, TaskResult,
};

/// What the inventory asks of the world around it: whether a node's agent would take a task now (its machine runs
/// its deployed OS with the agent enrolled), and what an uninstall does at the hub.
pub trait AgentDirectory: Send + Sync {
    fn agent_answers(&self, node: &str) -> bool;
    fn uninstalled(&self, node: &str);
}

/// The inventory as the router shares it.
pub struct InventoryFront {
    pub inventory: Inventory,
    pub agents: Arc<dyn AgentDirectory>,
}

pub type SharedInventory = Arc<Mutex<InventoryFront>>;

/// The inventory's routes, under `/v1/inventory/`.
pub fn router(shared: SharedInventory) -> Router {
    Router::new()
        .route("/v1/inventory/nodes/{node}", get(read).delete(remove))
        .route("/v1/inventory/nodes/{node}/transition", post(transition))
        .route("/v1/inventory/nodes/{node}/allocations/release", post(release))
        .route("/v1/inventory/nodes/{node}/tasks", post(task))
        .with_state(shared)
}

#[derive(Debug, Serialize, Deserialize)]
pub struct RecordBody {
    pub state: RecordState,
    pub allocations: Vec<String>,
    pub agent_installed: bool,
}

#[derive(Debug, Deserialize)]
struct TransitionBody {
    from: RecordState,
    to: RecordState,
}

#[derive(Debug, Deserialize)]
struct ReleaseBody {
    force: bool,
}

#[derive(Debug, Deserialize)]
struct TaskBody {
    task: NodeTask,
    /// The journal's id for the task; a retried task is the same operation (the model needs no de-duplication: a
    /// finished task's effect is idempotent).
    #[serde(rename = "operation_id")]
    _operation_id: String,
}

fn error(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": kind, "message": message.into()}))).into_response()
}

fn inventory_error(failure: &InventoryError) -> Response {
    match failure {
        InventoryError::Unavailable { retry_after_s } => {
            let mut response = error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", failure.to_string());
            if let Ok(value) = HeaderValue::from_str(&retry_after_s.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        InventoryError::NotFound { .. } => error(StatusCode::NOT_FOUND, "not_found", failure.to_string()),
        InventoryError::Conflict { .. } | InventoryError::NotRemovable { .. } | InventoryError::Refused { .. } => {
            error(StatusCode::CONFLICT, "conflict", failure.to_string())
        }
    }
}

fn ask(shared: &SharedInventory, request: InventoryRequest) -> Result<InventoryResponse, InventoryError> {
    let mut front = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    front.inventory.handle(request)
}

async fn read(State(shared): State<SharedInventory>, Path(node): Path<String>) -> Response {
    match ask(&shared, InventoryRequest::Read { node }) {
        Ok(InventoryResponse::Record(record)) => {
            let record = record.map(|record| RecordBody {
                state: record.state,
                allocations: record.allocations.into_iter().collect(),
                agent_installed: record.agent_installed,
            });
            Json(json!({ "record": record })).into_response()
        }
        Ok(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "unexpected answer"),
        Err(failure) => inventory_error(&failure),
    }
}

async fn transition(
    State(shared): State<SharedInventory>,
    Path(node): Path<String>,
    Json(body): Json<TransitionBody>,
) -> Response {
    match ask(&shared, InventoryRequest::Transition { node, from: body.from, to: body.to }) {
        Ok(_) => Json(json!({})).into_response(),
        Err(failure) => inventory_error(&failure),
    }
}

async fn release(
    State(shared): State<SharedInventory>,
    Path(node): Path<String>,
    Json(body): Json<ReleaseBody>,
) -> Response {
    match ask(&shared, InventoryRequest::ReleaseAllocations { node, force: body.force }) {
        Ok(InventoryResponse::Remaining(remaining)) => Json(json!({ "remaining": remaining })).into_response(),
        Ok(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "unexpected answer"),
        Err(failure) => inventory_error(&failure),
    }
}

async fn task(State(shared): State<SharedInventory>, Path(node): Path<String>, Json(body): Json<TaskBody>) -> Response {
    let agents = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner).agents.clone();
    if body.task.needs_agent() && !agents.agent_answers(&node) {
        return error(StatusCode::BAD_GATEWAY, "agent_unreachable", format!("{node}'s agent did not take the task"));
    }
    match ask(&shared, InventoryRequest::CompleteTask { node: node.clone(), task: body.task }) {
        Ok(InventoryResponse::Task(result)) => {
            if result == TaskResult::Done && body.task == NodeTask::Uninstall {
                agents.uninstalled(&node);
            }
            let (result, detail) = match result {
                TaskResult::Done => ("done", String::new()),
                TaskResult::Residue { what } => ("residue", what),
                TaskResult::Failed { error } => ("failed", error),
            };
            Json(json!({ "result": result, "detail": detail })).into_response()
        }
        Ok(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "unexpected answer"),
        Err(failure) => inventory_error(&failure),
    }
}

async fn remove(State(shared): State<SharedInventory>, Path(node): Path<String>) -> Response {
    match ask(&shared, InventoryRequest::Remove { node }) {
        Ok(_) => Json(json!({})).into_response(),
        Err(failure) => inventory_error(&failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    struct Agents {
        answers: bool,
        uninstalled: Mutex<Vec<String>>,
    }

    impl AgentDirectory for Agents {
        fn agent_answers(&self, _node: &str) -> bool {
            self.answers
        }
        fn uninstalled(&self, node: &str) {
            self.uninstalled.lock().unwrap().push(node.to_owned());
        }
    }

    fn shared(answers: bool) -> (SharedInventory, Arc<Agents>) {
        let mut inventory = Inventory::new();
        inventory.enrol("gpu-01", 2);
        let agents = Arc::new(Agents { answers, uninstalled: Mutex::new(Vec::new()) });
        (Arc::new(Mutex::new(InventoryFront { inventory, agents: agents.clone() })), agents)
    }

    async fn call(shared: &SharedInventory, method: &str, uri: &str, body: &str) -> (u16, serde_json::Value) {
        let request = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        let response = router(shared.clone()).oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
    }

    #[tokio::test]
    async fn a_record_is_read_moved_along_the_runbook_and_an_illegal_jump_is_409() {
        let (shared, _) = shared(true);
        let (status, body) = call(&shared, "GET", "/v1/inventory/nodes/gpu-01", "").await;
        assert_eq!(status, 200);
        assert_eq!(body["record"]["state"], "active");
        assert_eq!(body["record"]["allocations"].as_array().unwrap().len(), 2);
        let (status, _) =
            call(&shared, "POST", "/v1/inventory/nodes/gpu-01/transition", r#"{"from":"active","to":"retired"}"#).await;
        assert_eq!(status, 409);
        let (status, _) =
            call(&shared, "POST", "/v1/inventory/nodes/gpu-01/transition", r#"{"from":"active","to":"quarantined"}"#)
                .await;
        assert_eq!(status, 200);
        let (status, body) = call(&shared, "GET", "/v1/inventory/nodes/gpu-02", "").await;
        assert_eq!((status, body["record"].is_null()), (200, true));
    }

    #[tokio::test]
    async fn a_task_needs_a_reachable_agent_and_an_uninstall_reaches_the_hub() {
        let (unreachable, _) = shared(false);
        let (status, body) = call(
            &unreachable,
            "POST",
            "/v1/inventory/nodes/gpu-01/tasks",
            r#"{"task":"drain","operation_id":"w/drain/1"}"#,
        )
        .await;
        assert_eq!((status, body["error"].as_str()), (502, Some("agent_unreachable")));
        let (shared, agents) = shared(true);
        let (status, body) = call(
            &shared,
            "POST",
            "/v1/inventory/nodes/gpu-01/tasks",
            r#"{"task":"uninstall","operation_id":"w/uninstall/1"}"#,
        )
        .await;
        assert_eq!((status, body["result"].as_str()), (200, Some("done")));
        assert_eq!(*agents.uninstalled.lock().unwrap(), ["gpu-01"]);
    }

    #[tokio::test]
    async fn a_503_carries_retry_after() {
        let (shared, _) = shared(true);
        shared.lock().unwrap().inventory.fail_next(1);
        let request = axum::http::Request::builder().uri("/v1/inventory/nodes/gpu-01").body(Body::empty()).unwrap();
        let response = router(shared.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status().as_u16(), 503);
        assert!(response.headers().get("retry-after").is_some());
    }
}
