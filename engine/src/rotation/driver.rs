//! The rotation driver: runs [`crate::rotation::machine`]'s decisions against the `Hub`, `Ssh`, `Journal`, `Clock`,
//! `Signals`, `Jitter` and `Secrets` ports, one rotation of one node at a time. It journals every step's intent
//! before the step and its completion after it, retries transient failures with bounded backoff (`rollout::retry`)
//! with the node re-observed (its host key re-checked, the effect looked for) before every re-attempt of the install,
//! and adopts a dead controller's rotation from the journal: an issue in doubt is replayed under the same rotation id
//! (the hub answers the same successor), an install in doubt is looked for on the node first, a revoke in doubt is
//! replayed (idempotent at the hub).

use crate::ports::events::{RotationEvent, RotationFailure};
use crate::ports::{
    Clock, Endpoint, Hub, HubError, IssuedCredential, Jitter, Journal, RotationState, Secrets, Signal, Signals, Ssh,
    SshError, SshRequest, SshResponse, TransportError,
};
use crate::rollout::retry::{AttemptFailure, Backoff, RetryDecision};
use crate::rotation::journal::{self, Record};
use crate::rotation::machine::{
    AfterFailure, OnNode, RotationEnd, RotationMachine, RotationStep, after_failure, operation_id,
};
use crate::rotation::{CREDENTIAL_FILE, CREDENTIAL_MODE};
use crate::secret::Secret;

/// One rotation to run (or adopt from the journal).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationRequest {
    /// The rotation's id: the journal's subject, the hub's idempotency key, the prefix of its operation ids.
    pub rotation: String,
    /// The node's SSH endpoint with the host key the controller holds authority for (the agent is named as the node).
    pub endpoint: Endpoint,
    pub backoff: Backoff,
    /// How long the successor has to be proved by an accepted heartbeat after its install.
    pub prove_ms: u64,
    /// How often the proof reads the hub's account of the rotation.
    pub prove_poll_ms: u64,
    /// How long the controller waits for a valid hub credential after the hub refused its current one.
    pub credential_wait_ms: u64,
}

/// The ports the driver needs.
pub struct RotationPorts<'a, C, H, S, J, G, X, K> {
    pub clock: &'a C,
    pub hub: &'a H,
    pub ssh: &'a S,
    pub journal: &'a J,
    pub signals: &'a G,
    pub jitter: &'a X,
    pub secrets: &'a K,
}

/// How often one hub call may re-authenticate before the refusal is taken as final.
const REAUTHENTICATIONS_MAX: u32 = 3;

/// A step that failed for good: why, and whether the successor may be on the node.
struct Failed {
    failure: RotationFailure,
    on_node: OnNode,
}

impl Failed {
    fn hub(error: &HubError) -> Failed {
        let failure = match error {
            HubError::Transport(_) => RotationFailure::RetriesExhausted { error: error.to_string() },
            HubError::Rejected(_) | HubError::Unauthorized(_) | HubError::Fenced(_) => {
                RotationFailure::HubRefused { error: error.to_string() }
            }
        };
        Failed { failure, on_node: OnNode::Absent }
    }
}

fn ssh_failure_class(error: &SshError) -> AttemptFailure {
    match error {
        SshError::Transport(_) => AttemptFailure::Transient,
        SshError::HostKeyMismatch { .. } => AttemptFailure::IdentityChanged,
        SshError::Refused(_) => AttemptFailure::Permanent,
    }
}

/// Why an SSH operation ended the step, typed.
fn ssh_failure(error: &SshError) -> RotationFailure {
    match error {
        SshError::Transport(_) => RotationFailure::RetriesExhausted { error: error.to_string() },
        SshError::HostKeyMismatch { presented } => RotationFailure::EndpointChanged { presented: presented.clone() },
        SshError::Refused(reason) => RotationFailure::NodeRefused { error: reason.clone() },
    }
}

/// Whether a failed SSH operation may have run at the far end (a timeout or a reset after sending).
fn may_have_run(error: &SshError) -> bool {
    matches!(error, SshError::Transport(TransportError::Timeout | TransportError::ConnectionReset))
}

impl<C, H, S, J, G, X, K> RotationPorts<'_, C, H, S, J, G, X, K>
where
    C: Clock,
    H: Hub,
    S: Ssh,
    J: Journal,
    G: Signals,
    X: Jitter,
    K: Secrets,
{
    /// Runs rotation `request.rotation`, or adopts it from the journal; a rotation the journal shows ended is
    /// answered as it ended, and nothing is done.
    pub async fn run_rotation(&self, request: &RotationRequest) -> RotationEnd {
        let id = request.rotation.as_str();
        let lines = self
            .journal
            .replay_subject(id)
            .await
            .unwrap_or_else(|error| panic!("rotation journal unreadable: {error}"));
        let adopted = journal::replay(lines.iter().map(String::as_str), id).unwrap_or_else(|error| panic!("{error}"));
        let (endpoint, mut machine, in_doubt) = match adopted {
            Some(adopted) if adopted.terminal => {
                return adopted.machine.end().cloned().expect("a terminal record ends the machine");
            }
            Some(adopted) => {
                self.emit(request, &adopted.node, RotationEvent::Adopted { in_doubt: adopted.in_doubt });
                // The authority the rotation began with, not the request's.
                let endpoint = Endpoint { node: adopted.node, host_key: adopted.host_key };
                (endpoint, adopted.machine, adopted.in_doubt)
            }
            None => {
                let endpoint = request.endpoint.clone();
                let planned = Record::Planned {
                    rotation: id.to_owned(),
                    node: endpoint.node.clone(),
                    host_key: endpoint.host_key.clone(),
                };
                self.record(&planned).await;
                self.emit(request, &endpoint.node, RotationEvent::Planned);
                (endpoint, RotationMachine::new(), None)
            }
        };
        // Every hub call presents the controller's current credential; a failure here shows on the first call.
        let _ = self.authenticate(request, &endpoint.node, false).await;
        let node = endpoint.node.as_str();
        let mut successor: Option<IssuedCredential> = None;
        while let Some(step) = machine.poll_step() {
            let op_id = operation_id(id, step);
            let doubtful = in_doubt == Some(step);
            if !doubtful {
                let intent = Record::Intent {
                    rotation: id.to_owned(),
                    node: node.to_owned(),
                    step,
                    operation_id: op_id.clone(),
                };
                self.record(&intent).await;
            }
            self.emit(request, node, RotationEvent::StepStarted { step });
            let result = match step {
                RotationStep::Issue => self.issue(request, node).await.map(|issued| {
                    let generation = issued.generation;
                    successor = Some(issued);
                    Some(generation)
                }),
                RotationStep::Install => {
                    self.install(request, &endpoint, &op_id, &mut successor, doubtful).await.map(|()| None)
                }
                RotationStep::Prove => self.prove(request, node).await.map(|()| None),
                RotationStep::Revoke => self
                    .hub_retrying(request, node, step, || self.hub.commit_rotation(node, id))
                    .await
                    .map(|_| None)
                    .map_err(|error| Failed::hub(&error)),
            };
            match result {
                Ok(generation) => {
                    let completed = Record::Completed {
                        rotation: id.to_owned(),
                        node: node.to_owned(),
                        step,
                        operation_id: op_id,
                        generation,
                    };
                    self.record(&completed).await;
                    self.emit(request, node, RotationEvent::StepDone { step, generation });
                    machine.handle_done(step, generation);
                }
                Err(Failed { failure, on_node }) => {
                    let end = match after_failure(step, on_node) {
                        AfterFailure::Stop => RotationEnd::Stopped { step, failure },
                        // The successor never reached the node: revoke it, never the predecessor. If the hub cannot be
                        // told, both stay valid, which is a stop.
                        AfterFailure::Abort => {
                            match self.hub_retrying(request, node, step, || self.hub.abort_rotation(node, id)).await {
                                Ok(_) => RotationEnd::Aborted { step, failure },
                                Err(_) => RotationEnd::Stopped { step, failure },
                            }
                        }
                    };
                    machine.handle_ended(end);
                }
            }
        }
        let end = machine.end().cloned().expect("the loop runs until the machine ends");
        let terminal = match end.clone() {
            RotationEnd::Rotated { generation } => {
                Record::Rotated { rotation: id.to_owned(), node: node.to_owned(), generation }
            }
            RotationEnd::Stopped { step, failure } => {
                Record::Stopped { rotation: id.to_owned(), node: node.to_owned(), step, failure }
            }
            RotationEnd::Aborted { step, failure } => {
                Record::Aborted { rotation: id.to_owned(), node: node.to_owned(), step, failure }
            }
        };
        self.record(&terminal).await;
        self.emit(request, node, RotationEvent::Ended { end: end.clone() });
        end
    }

    fn emit(&self, request: &RotationRequest, node: &str, event: RotationEvent) {
        self.signals.emit(Signal::Rotation { rotation: request.rotation.clone(), node: node.to_owned(), event });
    }

    async fn record(&self, record: &Record) {
        if let Err(error) = self.journal.append(&record.encode()).await {
            // A journal that cannot be written is a broken invariant of the controller host, not a retryable fault.
            panic!("rotation journal write failed: {error}");
        }
    }

    /// The issue: a successor under the rotation's id. A replay (a lost answer, an issue in doubt) answers the same
    /// successor.
    async fn issue(&self, request: &RotationRequest, node: &str) -> Result<IssuedCredential, Failed> {
        let id = request.rotation.as_str();
        self.hub_retrying(request, node, RotationStep::Issue, || self.hub.begin_rotation(node, id))
            .await
            .map_err(|error| Failed::hub(&error))
    }

    /// The install: the successor written atomically into the credential file, mode 0600. Before every re-attempt
    /// (and before the first, when the install is in doubt) the node is observed: its host key is re-checked, and a
    /// file that already holds the successor is the install done.
    async fn install(
        &self,
        request: &RotationRequest,
        endpoint: &Endpoint,
        op_id: &str,
        successor: &mut Option<IssuedCredential>,
        doubtful: bool,
    ) -> Result<(), Failed> {
        let node = endpoint.node.as_str();
        let step = RotationStep::Install;
        let token = match successor {
            Some(issued) => issued.token.clone(),
            // Adopted after the issue: the hub answers the same successor again under the rotation's id.
            None => {
                let issued = self.issue(request, node).await?;
                let token = issued.token.clone();
                *successor = Some(issued);
                token
            }
        };
        let mut attempt = 1;
        let mut look_first = doubtful;
        // Whether a write of the successor may have run: an install in doubt may have.
        let mut ran = doubtful;
        loop {
            if look_first {
                match self.observe(endpoint).await {
                    Ok(credential) if credential.as_ref() == Some(&token) => return Ok(()),
                    // The file does not hold the successor: no earlier write took effect.
                    Ok(_) => ran = false,
                    Err(error) => {
                        ran |= may_have_run(&error);
                        if !self.wait_to_retry(request, node, step, &mut attempt, &error).await {
                            return Err(Failed { failure: ssh_failure(&error), on_node: on_node(ran) });
                        }
                        continue;
                    }
                }
            }
            let write = SshRequest::WriteFileAtomic {
                operation_id: op_id.to_owned(),
                path: CREDENTIAL_FILE.to_owned(),
                content: token.clone(),
                mode: CREDENTIAL_MODE,
            };
            match self.ssh.run(endpoint, write).await {
                Ok(_) => return Ok(()),
                Err(error) => {
                    ran |= may_have_run(&error);
                    if !self.wait_to_retry(request, node, step, &mut attempt, &error).await {
                        return Err(Failed { failure: ssh_failure(&error), on_node: on_node(ran) });
                    }
                    look_first = true;
                }
            }
        }
    }

    /// The node's credential file, as a read-only observation shows it (`None`: no file).
    async fn observe(&self, endpoint: &Endpoint) -> Result<Option<Secret>, SshError> {
        match self.ssh.run(endpoint, SshRequest::Observe).await? {
            SshResponse::Observed(report) => Ok(report.credential.map(|facts| facts.token)),
            SshResponse::Done | SshResponse::StorageProbed(_) => {
                Err(SshError::Refused("observe answered without an observation".into()))
            }
        }
    }

    /// The proof: the hub's account of the rotation shows a heartbeat authenticated by the successor. Read every
    /// `prove_poll_ms` for at most `prove_ms`; a read that fails is read again at the next poll.
    async fn prove(&self, request: &RotationRequest, node: &str) -> Result<(), Failed> {
        let id = request.rotation.as_str();
        let deadline_ms = self.clock.monotonic_ms() + request.prove_ms;
        let mut reauthentications = 0;
        loop {
            match self.hub.rotation_status(node, id).await {
                // Committed: only this rotation commits, and only after a proof (a replay of the revoke's proof).
                Ok(Some(status)) if status.successor_heartbeats > 0 || status.state == RotationState::Committed => {
                    return Ok(());
                }
                Ok(Some(status)) if status.state == RotationState::Aborted => {
                    let error = format!("the hub aborted rotation {id}");
                    return Err(Failed {
                        failure: RotationFailure::HubRefused { error },
                        on_node: OnNode::MaybePresent,
                    });
                }
                Ok(None) => {
                    let error = format!("the hub has no rotation {id}");
                    return Err(Failed {
                        failure: RotationFailure::HubRefused { error },
                        on_node: OnNode::MaybePresent,
                    });
                }
                Err(HubError::Unauthorized(_)) if reauthentications < REAUTHENTICATIONS_MAX => {
                    reauthentications += 1;
                    let _ = self.reauthenticate(request, node).await;
                    continue;
                }
                Ok(Some(_)) | Err(_) => {}
            }
            if self.clock.monotonic_ms() >= deadline_ms {
                let failure = RotationFailure::SuccessorNotProved { waited_ms: request.prove_ms };
                return Err(Failed { failure, on_node: OnNode::MaybePresent });
            }
            self.clock.sleep_ms(request.prove_poll_ms).await;
        }
    }

    /// After failed attempt `attempt` of `step`: when the backoff allows another, reports the retry, waits and counts
    /// it; false when the failure ends the step (exhausted, identity changed, permanent refusal).
    async fn wait_to_retry(
        &self,
        request: &RotationRequest,
        node: &str,
        step: RotationStep,
        attempt: &mut u32,
        error: &SshError,
    ) -> bool {
        self.backoff(request, node, step, attempt, ssh_failure_class(error), &error.to_string()).await
    }

    async fn backoff(
        &self,
        request: &RotationRequest,
        node: &str,
        step: RotationStep,
        attempt: &mut u32,
        failure: AttemptFailure,
        error: &str,
    ) -> bool {
        let RetryDecision::RetryAfter { delay_ms } =
            request.backoff.after_failure(*attempt, failure, self.jitter.draw())
        else {
            return false;
        };
        let event = RotationEvent::Retrying { step, attempt: u64::from(*attempt), delay_ms, error: error.to_owned() };
        self.emit(request, node, event);
        self.clock.sleep_ms(delay_ms).await;
        *attempt += 1;
        true
    }

    /// A hub call of `step` with bounded retry of transient failures, re-authenticating when the hub refuses the
    /// controller's credential.
    async fn hub_retrying<T, F>(
        &self,
        request: &RotationRequest,
        node: &str,
        step: RotationStep,
        mut call: impl FnMut() -> F,
    ) -> Result<T, HubError>
    where
        F: std::future::Future<Output = Result<T, HubError>>,
    {
        let mut attempt = 1;
        let mut reauthentications = 0;
        loop {
            let error = match call().await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let failure = match &error {
                HubError::Transport(_) => AttemptFailure::Transient,
                HubError::Unauthorized(_) if reauthentications < REAUTHENTICATIONS_MAX => {
                    reauthentications += 1;
                    if self.reauthenticate(request, node).await.is_ok() {
                        continue;
                    }
                    return Err(error);
                }
                HubError::Unauthorized(_) | HubError::Rejected(_) | HubError::Fenced(_) => AttemptFailure::Permanent,
            };
            if !self.backoff(request, node, step, &mut attempt, failure, &error.to_string()).await {
                return Err(error);
            }
        }
    }

    /// Reads the controller's current hub credential from the secrets store and presents it to the hub.
    async fn authenticate(&self, request: &RotationRequest, node: &str, announce: bool) -> Result<(), String> {
        let credential = self.secrets.hub_credential().await.map_err(|error| error.to_string())?;
        let expires_at_ms = self.hub.authenticate(&credential).await.map_err(|error| error.to_string())?;
        if announce {
            self.emit(request, node, RotationEvent::Reauthenticated { expires_at_ms });
        }
        Ok(())
    }

    /// After the hub refused the credential: authenticates with the current one, polling the secrets store until it
    /// has been renewed, for at most `credential_wait_ms`.
    async fn reauthenticate(&self, request: &RotationRequest, node: &str) -> Result<(), String> {
        let deadline_ms = self.clock.monotonic_ms() + request.credential_wait_ms;
        let mut delay_ms = request.backoff.base_ms.max(1);
        loop {
            match self.authenticate(request, node, true).await {
                Ok(()) => return Ok(()),
                Err(error) if self.clock.monotonic_ms() + delay_ms > deadline_ms => {
                    return Err(format!("no valid hub credential within {} ms: {error}", request.credential_wait_ms));
                }
                Err(_) => {
                    self.clock.sleep_ms(delay_ms).await;
                    delay_ms = (delay_ms * 2).min(request.backoff.cap_ms.max(1));
                }
            }
        }
    }
}

fn on_node(ran: bool) -> OnNode {
    if ran { OnNode::MaybePresent } else { OnNode::Absent }
}

#[cfg(test)]
mod tests;
