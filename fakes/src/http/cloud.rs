//! The cloud provider fake over HTTP (an API shaped on EC2's instance calls, ours to define; documented in
//! `docs/http-apis.md`). The handlers call [`CloudProvider::handle`], the model the direct port calls; this module
//! only translates JSON and status codes. Every route changes or reads tenant state, so `fleetsim serve` puts all of
//! them behind a bearer token.
//!
//! - `POST /v1/regions/{region}/vms` `{"instance_type", "name", "tag"}` → 201 `{"id"}`
//! - `GET /v1/regions/{region}/vms` (optionally `?tag=`) → `{"vms": [{"id", "name", "tag", "region",
//!   "instance_type", "state"}]}`
//! - `POST /v1/vms/{id}/start`, `POST /v1/vms/{id}/stop` `{"hard"}`, `POST /v1/vms/{id}/reboot` → 202 `{}`
//! - `DELETE /v1/vms/{id}` → 202 `{}`
//! - `POST /v1/vms/{id}/force-terminate` → 202 `{"freed": bool}`: the console's force-terminate of a VM whose teardown
//!   is stuck (`freed` is false for any other VM)
//!
//! Errors are `{"error": <EC2 code>, "message": <text>}` with the model's status: 400 `InstanceLimitExceeded` or
//! `InvalidParameterValue`, 404 `InvalidInstanceID.NotFound`, 409 `IncorrectInstanceState`, 503 `Unavailable`.
//! Before each call the model is advanced to the clock's time, so the guests' boots move on between calls.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, post};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::cloud::{CloudError, CloudProvider, CloudRequest, CloudResponse, GuestEvent, Vm};
use crate::http::Clock;

/// The provider as the router shares it, with the guest events the calls' advances produced, in order.
#[derive(Debug, Default)]
pub struct CloudFront {
    pub provider: CloudProvider,
    pub events: Vec<GuestEvent>,
}

pub type SharedCloud = Arc<Mutex<CloudFront>>;

pub fn router(shared: SharedCloud, clock: Clock) -> Router {
    Router::new()
        .route("/v1/regions/{region}/vms", post(create).get(list))
        .route("/v1/vms/{id}/start", post(start))
        .route("/v1/vms/{id}/stop", post(stop))
        .route("/v1/vms/{id}/reboot", post(reboot))
        .route("/v1/vms/{id}", delete(destroy))
        .route("/v1/vms/{id}/force-terminate", post(force_terminate))
        .with_state((shared, clock))
}

type Front = State<(SharedCloud, Clock)>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    instance_type: String,
    name: String,
    tag: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    tag: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StopBody {
    #[serde(default)]
    hard: bool,
}

/// One VM on the wire.
#[derive(Debug, Serialize, Deserialize)]
pub struct VmBody {
    pub id: String,
    pub name: String,
    pub tag: String,
    pub region: String,
    pub instance_type: String,
    pub state: String,
}

impl From<Vm> for VmBody {
    fn from(vm: Vm) -> VmBody {
        VmBody {
            state: vm.state.as_str().to_owned(),
            id: vm.id,
            name: vm.name,
            tag: vm.tag,
            region: vm.region,
            instance_type: vm.instance_type,
        }
    }
}

fn call(front: &Front, request: CloudRequest) -> Result<CloudResponse, CloudError> {
    let (shared, clock) = &front.0;
    let now_ms = clock();
    let mut front = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let events = front.provider.poll(now_ms);
    front.events.extend(events);
    front.provider.handle(request, now_ms)
}

fn error(error: CloudError) -> Response {
    let code = match &error {
        CloudError::QuotaExceeded { .. } => "InstanceLimitExceeded",
        CloudError::UnknownRegion(_) | CloudError::UnknownInstanceType(_) | CloudError::Blank(_) => {
            "InvalidParameterValue"
        }
        CloudError::NotFound(_) => "InvalidInstanceID.NotFound",
        CloudError::IncorrectState { .. } => "IncorrectInstanceState",
        CloudError::Unavailable(_) => "Unavailable",
    };
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
    (status, Json(json!({ "error": code, "message": error.to_string() }))).into_response()
}

fn accepted(result: Result<CloudResponse, CloudError>) -> Response {
    match result {
        Ok(_) => (StatusCode::ACCEPTED, Json(json!({}))).into_response(),
        Err(cloud_error) => error(cloud_error),
    }
}

async fn create(front: Front, Path(region): Path<String>, Json(body): Json<CreateBody>) -> Response {
    let request = CloudRequest::Create { region, instance_type: body.instance_type, name: body.name, tag: body.tag };
    match call(&front, request) {
        Ok(CloudResponse::Created { id }) => (StatusCode::CREATED, Json(json!({ "id": id }))).into_response(),
        Ok(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Err(cloud_error) => error(cloud_error),
    }
}

async fn list(front: Front, Path(region): Path<String>, Query(query): Query<ListQuery>) -> Response {
    let request = match query.tag {
        Some(tag) => CloudRequest::FindByTag { region, tag },
        None => CloudRequest::List { region },
    };
    match call(&front, request) {
        Ok(CloudResponse::Vms { vms }) => {
            let vms: Vec<VmBody> = vms.into_iter().map(VmBody::from).collect();
            Json(json!({ "vms": vms })).into_response()
        }
        Ok(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Err(cloud_error) => error(cloud_error),
    }
}

async fn start(front: Front, Path(id): Path<String>) -> Response {
    accepted(call(&front, CloudRequest::Start { id }))
}

async fn stop(front: Front, Path(id): Path<String>, Json(body): Json<StopBody>) -> Response {
    accepted(call(&front, CloudRequest::Stop { id, hard: body.hard }))
}

async fn reboot(front: Front, Path(id): Path<String>) -> Response {
    accepted(call(&front, CloudRequest::Reboot { id }))
}

async fn destroy(front: Front, Path(id): Path<String>) -> Response {
    accepted(call(&front, CloudRequest::Destroy { id }))
}

async fn force_terminate(front: Front, Path(id): Path<String>) -> Response {
    let (shared, clock) = &front.0;
    let now_ms = clock();
    let mut front = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let events = front.provider.poll(now_ms);
    front.events.extend(events);
    if !front.provider.vms().any(|vm| vm.id == id) {
        return error(CloudError::NotFound(id));
    }
    let freed = front.provider.reap(&id);
    (StatusCode::ACCEPTED, Json(json!({ "freed": freed }))).into_response()
}
