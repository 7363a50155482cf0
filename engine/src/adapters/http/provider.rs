//! The cloud provider client: [`ProviderClient`] implements the [`Provider`] port over the provider's JSON API
//! (`docs/http-apis.md`, "cloud provider"), with a bearer token on every call.
//!
//! Error mapping, by the EC2 code the body names and then by status: `InstanceLimitExceeded` is `QuotaExceeded`,
//! 404 `NotFound`, 409 `WrongState`, 503 `Unavailable`, any other answer `Rejected` naming the status and code; no
//! answer is `Transport` (and a create that timed out may have executed: the driver looks its tag up next).

use serde::Deserialize;
use serde_json::json;

use crate::adapters::http::{HttpRequest, HttpResponse, HttpTransport, Method};
use crate::ports::provider::{CreateVm, Provider, ProviderError, ProviderVm};
use crate::secret::Secret;

/// The provider at the transport's base URL.
#[derive(Debug)]
pub struct ProviderClient<T> {
    transport: T,
    call_timeout_ms: u64,
    token: Secret,
}

impl<T: HttpTransport> ProviderClient<T> {
    pub fn new(transport: T, token: Secret, call_timeout_ms: u64) -> ProviderClient<T> {
        ProviderClient { transport, call_timeout_ms, token }
    }

    /// The transport it sends over (a test's wrapper reads its counts through this).
    pub fn transport(&self) -> &T {
        &self.transport
    }

    async fn call(
        &self,
        method: Method,
        path: String,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut request = HttpRequest::new(method, path)
            .header("accept", "application/json")
            .header("authorization", format!("Bearer {}", self.token.expose()));
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string().into_bytes());
        }
        let response = self.transport.send(request, self.call_timeout_ms).await?;
        if (200..300).contains(&response.status) {
            return Ok(response.body);
        }
        Err(provider_error(&response))
    }

    async fn vms(&self, path: String) -> Result<Vec<ProviderVm>, ProviderError> {
        let body = self.call(Method::Get, path, None).await?;
        let answer: VmsAnswer = decode(&body, "list")?;
        let mut vms: Vec<ProviderVm> = answer
            .vms
            .into_iter()
            .map(|vm| ProviderVm { cloud_instance_id: vm.id, tag: vm.tag, region: vm.region, state: vm.state })
            .collect();
        vms.sort();
        Ok(vms)
    }
}

fn provider_error(response: &HttpResponse) -> ProviderError {
    let body = response.error_body();
    match (response.status, body.error.as_str()) {
        (_, "InstanceLimitExceeded") => ProviderError::QuotaExceeded(body.message),
        (404, _) => ProviderError::NotFound(body.message),
        (409, _) => ProviderError::WrongState(body.message),
        (503, _) => ProviderError::Unavailable(body.message),
        (status, code) => ProviderError::Rejected(format!("provider answered {status} {code}: {}", body.message)),
    }
}

fn decode<'a, D: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<D, ProviderError> {
    serde_json::from_slice(bytes).map_err(|error| ProviderError::Rejected(format!("unexpected {what} answer: {error}")))
}

/// An id, region or tag as one path segment or query value: the provider's names are DNS-label-like; anything else
/// is refused, not escaped.
fn segment<'a>(value: &'a str, what: &str) -> Result<&'a str, ProviderError> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.') {
        Ok(value)
    } else {
        Err(ProviderError::Rejected(format!("{value:?} is not a {what}")))
    }
}

#[derive(Debug, Deserialize)]
struct CreatedAnswer {
    id: String,
}

#[derive(Debug, Deserialize)]
struct VmsAnswer {
    vms: Vec<VmWire>,
}

#[derive(Debug, Deserialize)]
struct VmWire {
    id: String,
    tag: String,
    region: String,
    state: String,
}

impl<T: HttpTransport> Provider for ProviderClient<T> {
    async fn create(&self, request: &CreateVm) -> Result<String, ProviderError> {
        let region = segment(&request.region, "region")?;
        let body = json!({ "instance_type": request.instance_type, "name": request.name, "tag": request.tag });
        let answer = self.call(Method::Post, format!("/v1/regions/{region}/vms"), Some(body)).await?;
        Ok(decode::<CreatedAnswer>(&answer, "create")?.id)
    }

    async fn find_by_tag(&self, region: &str, tag: &str) -> Result<Vec<ProviderVm>, ProviderError> {
        let (region, tag) = (segment(region, "region")?, segment(tag, "tag")?);
        self.vms(format!("/v1/regions/{region}/vms?tag={tag}")).await
    }

    async fn list(&self, region: &str) -> Result<Vec<ProviderVm>, ProviderError> {
        self.vms(format!("/v1/regions/{}/vms", segment(region, "region")?)).await
    }

    async fn start(&self, id: &str) -> Result<(), ProviderError> {
        self.call(Method::Post, format!("/v1/vms/{}/start", segment(id, "VM id")?), None).await.map(drop)
    }

    async fn stop(&self, id: &str, hard: bool) -> Result<(), ProviderError> {
        let path = format!("/v1/vms/{}/stop", segment(id, "VM id")?);
        self.call(Method::Post, path, Some(json!({ "hard": hard }))).await.map(drop)
    }

    async fn reboot(&self, id: &str) -> Result<(), ProviderError> {
        self.call(Method::Post, format!("/v1/vms/{}/reboot", segment(id, "VM id")?), None).await.map(drop)
    }

    async fn destroy(&self, id: &str) -> Result<(), ProviderError> {
        self.call(Method::Delete, format!("/v1/vms/{}", segment(id, "VM id")?), None).await.map(drop)
    }

    async fn force_terminate(&self, region: &str, tag: &str) -> Result<Vec<String>, ProviderError> {
        let mut freed = Vec::new();
        for vm in self.find_by_tag(region, tag).await? {
            let path = format!("/v1/vms/{}/force-terminate", segment(&vm.cloud_instance_id, "VM id")?);
            let answer = self.call(Method::Post, path, None).await?;
            if decode::<FreedAnswer>(&answer, "force-terminate")?.freed {
                freed.push(vm.cloud_instance_id);
            }
        }
        Ok(freed)
    }
}

#[derive(Debug, Deserialize)]
struct FreedAnswer {
    freed: bool,
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::ports::TransportError;

    struct Canned {
        answers: RefCell<Vec<Result<HttpResponse, TransportError>>>,
        sent: RefCell<Vec<HttpRequest>>,
    }

    impl HttpTransport for Canned {
        async fn send(&self, request: HttpRequest, _timeout_ms: u64) -> Result<HttpResponse, TransportError> {
            self.sent.borrow_mut().push(request);
            self.answers.borrow_mut().remove(0)
        }
    }

    fn answer(status: u16, body: &str) -> Result<HttpResponse, TransportError> {
        Ok(HttpResponse { status, headers: Vec::new(), body: body.as_bytes().to_vec() })
    }

    fn client(answers: Vec<Result<HttpResponse, TransportError>>) -> ProviderClient<Canned> {
        let transport = Canned { answers: RefCell::new(answers), sent: RefCell::new(Vec::new()) };
        ProviderClient::new(transport, Secret::new("provider-token"), 5_000)
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        futures_util::FutureExt::now_or_never(future).expect("the canned transport answers at once")
    }

    #[test]
    fn each_error_answer_maps_to_what_the_driver_acts_on() {
        let cases = [
            (answer(400, r#"{"error":"InstanceLimitExceeded","message":"limit of 2"}"#), "quota"),
            (answer(404, r#"{"error":"InvalidInstanceID.NotFound","message":"gone"}"#), "not found"),
            (answer(409, r#"{"error":"IncorrectInstanceState","message":"stopped"}"#), "wrong state"),
            (answer(503, r#"{"error":"Unavailable","message":"down"}"#), "unavailable"),
            (answer(400, r#"{"error":"InvalidParameterValue","message":"bad type"}"#), "rejected"),
            (answer(500, "boom"), "rejected"),
            (Err(TransportError::Timeout), "transport"),
        ];
        for (reply, expected) in cases {
            let client = client(vec![reply]);
            let error = block_on(client.destroy("vm-1")).unwrap_err();
            let kind = match error {
                ProviderError::QuotaExceeded(_) => "quota",
                ProviderError::NotFound(_) => "not found",
                ProviderError::WrongState(_) => "wrong state",
                ProviderError::Unavailable(_) => "unavailable",
                ProviderError::Rejected(_) => "rejected",
                ProviderError::Transport(_) => "transport",
            };
            assert_eq!(kind, expected);
        }
    }

    #[test]
    fn every_call_carries_the_bearer_token_and_a_tag_lookup_its_query() {
        let client = client(vec![answer(
            200,
            r#"{"vms":[{"id":"vm-2","tag":"i-1","region":"r","state":"running","name":"n","instance_type":"t"}]}"#,
        )]);
        let vms = block_on(client.find_by_tag("r", "i-1")).unwrap();
        assert_eq!(vms[0].cloud_instance_id, "vm-2");
        let sent = client.transport.sent.borrow();
        assert_eq!(sent[0].path_and_query, "/v1/regions/r/vms?tag=i-1");
        assert!(
            sent[0].headers.iter().any(|(name, value)| name == "authorization" && value == "Bearer provider-token")
        );
    }

    #[test]
    fn a_value_that_is_not_a_name_is_refused_before_anything_is_sent() {
        let client = client(Vec::new());
        assert!(matches!(block_on(client.destroy("../admin")), Err(ProviderError::Rejected(_))));
        assert!(matches!(block_on(client.find_by_tag("r", "a&b=c")), Err(ProviderError::Rejected(_))));
        assert!(client.transport.sent.borrow().is_empty());
    }
}
