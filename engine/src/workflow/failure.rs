//! A failed stage attempt and the one classifier of the ports' errors into the recovery matrix's failure classes,
//! for both workflows.
//!
//! The two workflows read every port error alike but one: a MAAS 503 whose message names the BMC ("Failed to power
//! off node: …", "Failed to query node's BMC: …"). That difference is real, so it is a parameter ([`BmcAnswer`]),
//! not a second classifier.

use crate::matrix::FailureClass;
use crate::ports::SecretsError;
use crate::ports::events::Evidence;
use crate::ports::fleet::FleetError;
use crate::ports::site::MaasError;

/// A failed stage attempt, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageFailure {
    pub class: FailureClass,
    pub error: String,
    /// What a person needs to act, beyond the error: the evidence the classification rests on.
    pub evidence: Vec<Evidence>,
    /// The section 6 timeout that ended the attempt, when one did.
    pub timeout: Option<crate::matrix::TimeoutKind>,
}

impl StageFailure {
    pub fn new(class: FailureClass, error: impl Into<String>) -> StageFailure {
        StageFailure { class, error: error.into(), evidence: Vec::new(), timeout: None }
    }

    /// The failure as the end of section 6's `timeout` of `bound_ms`.
    pub fn timed_out(mut self, timeout: crate::matrix::TimeoutKind) -> StageFailure {
        self.timeout = Some(timeout);
        self
    }

    pub fn maas(error: &MaasError, bmc: BmcAnswer) -> StageFailure {
        StageFailure::new(maas_class(error, bmc), error.to_string())
    }

    pub fn secrets(error: &SecretsError) -> StageFailure {
        StageFailure::new(secrets_class(error), error.to_string())
    }

    pub fn fleet(error: &FleetError) -> StageFailure {
        StageFailure::new(fleet_class(error), error.to_string())
    }
}

/// The machine a run works on, which an earlier stage found (or created).
pub fn known_machine(system_id: Option<&str>) -> Result<&str, StageFailure> {
    system_id.ok_or_else(|| StageFailure::new(FailureClass::StateAmbiguity, "no MAAS machine is known for the node"))
}

/// Consecutive failed reads of MAAS (or the hub) a waiting stage tolerates before it calls the service unreachable.
pub const READ_FAILURES_MAX: u32 = 4;

/// Consecutive failed reads of a service, bounded by [`READ_FAILURES_MAX`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadFailures(u32);

impl ReadFailures {
    pub fn handle_read(&mut self) {
        self.0 = 0;
    }

    /// One more failed read; `true` once they are too many (the service is taken as unreachable).
    pub fn handle_failure(&mut self) -> bool {
        self.0 += 1;
        self.0 >= READ_FAILURES_MAX
    }
}

/// A site the secrets store says is disabled is not acted on.
pub fn site_enabled(enabled: bool) -> Result<(), StageFailure> {
    if enabled { Ok(()) } else { Err(StageFailure::new(FailureClass::InputConfigError, "the site is disabled")) }
}

/// What a MAAS 503 whose message names the BMC means to the workflow that called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BmcAnswer {
    /// MAAS's "try again", like any 503: `upstream_transient`. Onboarding's calls that power a machine (create,
    /// commission, deploy) answer before MAAS asks the BMC; a failed power action shows afterwards as an `ERROR`
    /// event, which the onboarding stages read on their own (`bmc_power_failure` from the event).
    Transient,
    /// The BMC's own failure: `bmc_power_failure`. Decommission's `power_off` and `query_power_state` ask the BMC
    /// while the call is open, so MAAS's 503 is the BMC's answer.
    PowerFailure,
}

/// The class of a MAAS error: no answer or 503 is transient (unless it names the BMC and `bmc` says that is the
/// BMC's failure); 401 and 403 a key a person must fix; 404 means the machine went away under the workflow and 409 an
/// illegal transition (MAAS's state is not what the workflow believed), both `state_ambiguity`; any other answer is
/// transient.
pub fn maas_class(error: &MaasError, bmc: BmcAnswer) -> FailureClass {
    match error {
        MaasError::Http { status: 503, message, .. } if bmc == BmcAnswer::PowerFailure && names_the_bmc(message) => {
            FailureClass::BmcPowerFailure
        }
        // A key MAAS does not accept (wrong, regenerated, revoked) or one without the rights: no retry fixes it
        // (`load_site_config`'s manual-intervention boundary, "invalid token").
        MaasError::Http { status: 401 | 403, .. } => FailureClass::InputConfigError,
        MaasError::Http { status: 404 | 409, .. } => FailureClass::StateAmbiguity,
        MaasError::Http { .. } | MaasError::Transport(_) => FailureClass::UpstreamTransient,
    }
}

/// MAAS's words for a BMC it could not drive or read.
fn names_the_bmc(message: &str) -> bool {
    message.starts_with("Failed to power") || message.starts_with("Failed to query node's BMC")
}

/// The class of a secrets-store failure: unreachable or 503 is transient, a missing secret or a refusal is
/// configuration a person must fix, and a policy the store lacks is a site capability missing.
pub fn secrets_class(error: &SecretsError) -> FailureClass {
    match error {
        SecretsError::Transport(_) | SecretsError::Unavailable(_) => FailureClass::UpstreamTransient,
        SecretsError::NotFound(_) | SecretsError::Refused(_) => FailureClass::InputConfigError,
        SecretsError::Unsupported(_) => FailureClass::SiteCapabilityMissing,
    }
}

/// The class of an inventory failure: unreachable or 503 is transient, a missing record or a refused transition is
/// an ambiguity (the inventory is not what the workflow believed), and an agent that does not answer is the node
/// agent's failure.
pub fn fleet_class(error: &FleetError) -> FailureClass {
    match error {
        FleetError::Transport(_) | FleetError::Unavailable { .. } => FailureClass::UpstreamTransient,
        FleetError::NotFound(_) | FleetError::Conflict(_) => FailureClass::StateAmbiguity,
        FleetError::AgentUnreachable(_) => FailureClass::AgentEnrollmentFailure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::TransportError;

    fn http(status: u16, message: &str) -> MaasError {
        MaasError::Http { status, message: message.into(), retry_after_s: Some(5) }
    }

    #[test]
    fn maas_errors_are_classified_by_what_they_mean_and_only_the_bmc_answer_differs() {
        use BmcAnswer::{PowerFailure, Transient};
        use FailureClass as F;
        let power_off = "Failed to power off node: BMC unreachable";
        let query = "Failed to query node's BMC: timed out";
        let cases = [
            (http(503, "busy"), F::UpstreamTransient, F::UpstreamTransient),
            (http(503, power_off), F::UpstreamTransient, F::BmcPowerFailure),
            (http(503, query), F::UpstreamTransient, F::BmcPowerFailure),
            // Only a 503 names the BMC: the same words in a refusal are the refusal.
            (http(409, power_off), F::StateAmbiguity, F::StateAmbiguity),
            (http(404, "No Machine matches the given query."), F::StateAmbiguity, F::StateAmbiguity),
            (http(409, "cannot commission a deployed machine"), F::StateAmbiguity, F::StateAmbiguity),
            (http(400, "Failed to render preseed"), F::UpstreamTransient, F::UpstreamTransient),
            (http(500, "internal error"), F::UpstreamTransient, F::UpstreamTransient),
            (http(401, "Authorization Error: Invalid API key."), F::InputConfigError, F::InputConfigError),
            (http(403, "Forbidden"), F::InputConfigError, F::InputConfigError),
            (MaasError::Transport(TransportError::Timeout), F::UpstreamTransient, F::UpstreamTransient),
            (MaasError::Transport(TransportError::ConnectionRefused), F::UpstreamTransient, F::UpstreamTransient),
        ];
        for (error, transient, power_failure) in cases {
            assert_eq!(maas_class(&error, Transient), transient, "{error}");
            assert_eq!(maas_class(&error, PowerFailure), power_failure, "{error}");
        }
    }

    #[test]
    fn a_run_without_its_machine_is_ambiguous_and_a_disabled_site_is_configuration() {
        assert_eq!(known_machine(Some("abc")), Ok("abc"));
        assert_eq!(known_machine(None).unwrap_err().class, FailureClass::StateAmbiguity);
        assert_eq!(site_enabled(true), Ok(()));
        let disabled = site_enabled(false).unwrap_err();
        assert_eq!((disabled.class, disabled.error.as_str()), (FailureClass::InputConfigError, "the site is disabled"));
    }

    #[test]
    fn reads_fail_a_bounded_number_of_times_in_a_row() {
        let mut read_failures = ReadFailures::default();
        assert!(!read_failures.handle_failure() && !read_failures.handle_failure() && !read_failures.handle_failure());
        read_failures.handle_read();
        let exhausted: Vec<bool> = (0..READ_FAILURES_MAX).map(|_| read_failures.handle_failure()).collect();
        assert_eq!(exhausted.iter().filter(|&&out| out).count(), 1, "the fourth in a row, after a good read");
        assert!(exhausted[READ_FAILURES_MAX as usize - 1]);
    }

    #[test]
    fn secrets_errors_are_classified_by_what_they_mean() {
        use FailureClass as F;
        let cases = [
            (SecretsError::Transport(TransportError::ConnectionReset), F::UpstreamTransient),
            (SecretsError::Unavailable("sealed".into()), F::UpstreamTransient),
            (SecretsError::NotFound("node-01".into()), F::InputConfigError),
            (SecretsError::Refused("site disabled".into()), F::InputConfigError),
            (SecretsError::Unsupported("bootstrap tokens".into()), F::SiteCapabilityMissing),
        ];
        for (error, class) in cases {
            assert_eq!(secrets_class(&error), class, "{error}");
        }
    }

    #[test]
    fn fleet_errors_are_classified_by_what_they_mean() {
        use FailureClass as F;
        let cases = [
            (FleetError::Transport(TransportError::Timeout), F::UpstreamTransient),
            (FleetError::Unavailable { retry_after_s: 5 }, F::UpstreamTransient),
            (FleetError::NotFound("node-02".into()), F::StateAmbiguity),
            (FleetError::Conflict("x".into()), F::StateAmbiguity),
            (FleetError::AgentUnreachable("no answer".into()), F::AgentEnrollmentFailure),
        ];
        for (error, class) in cases {
            assert_eq!(fleet_class(&error), class, "{error}");
        }
    }
}
