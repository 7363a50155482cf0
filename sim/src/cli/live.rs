//! `fleetsim serve` and `fleetsim drive`: the command line of [`crate::live`].

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::model::spec::{self, SpecError};

use super::*;

pub(super) const SERVE_HELP: &str = "\
The services, on consecutive ports from --port (default 5240):
  MAAS     /MAAS/api/2.0/ with OAuth 1.0 PLAINTEXT (the printed API key)
  Redfish  /redfish/v1/Systems/{machine} with HTTP Basic (each BMC's login is in the secrets store)
  secrets  /v1/... with X-Vault-Token (the printed token)
  hub      /v1/hub/..., the inventory /v1/inventory/... and the cloud provider /v1/regions/region-local/vms
           (Bearer provider token)
  DNS      the rack resolver, over UDP and TCP
  admin    /admin/state (machines, statuses, transition counts) and POST /admin/faults (Bearer admin token)

Credentials are random at every start and printed; --seed N makes them reproducible (the banner says so); \
--credentials DIR serves the ones in DIR. A --bind address that is not loopback needs --credentials.

Every HTTP service caps its open connections (--connections-max, default 512; at the cap a new connection \
takes the place of the one idle or stalled in a request body longest), closes a connection that takes longer \
than --header-timeout-s (default 10) to send a request's headers or sits idle that long after an answer, cuts a \
body that takes over 10 s or arrives slower than 1,024 bytes a second, and answers 408 to a request that takes \
longer than 30 s; bodies past each route's limit get 413. Every route checks its credential from the headers \
before it reads a body.

Faults while it runs, e.g.:
  curl -X POST localhost:5245/admin/faults -H \"Authorization: Bearer $ADMIN_TOKEN\" \\
    -H 'content-type: application/json' -d '{\"fault\":\"maas_503\",\"count\":3}'
See docs/serve.md for every fault, and for curl, dig, python-libmaas and sushy against it.

Examples:
  fleetsim serve
  fleetsim serve --speed 60 --write-site /tmp/site     # then: fleetsim drive onboard --site /tmp/site/site.toml
  fleetsim serve --scenario scenarios/maas-commissioning-2026-07-20.toml --port 0";

pub(super) const DRIVE_HELP: &str = "\
The site file names the MAAS region, the secrets store, the hub and inventory, the rack resolver,
the SSH command, the journal and the audit log, and the nodes (docs/serve.md). Credential files
must be mode 0600: a file others can read is refused.

Every workflow is journaled in SQLite (default fleetsim-journal.sqlite beside the site file).
Kill `drive` at any point and run the same command again: completed workflows are not run
twice, unfinished ones resume with status-aware adoption, and no machine is commissioned or
deployed twice. Operator actions are audited (journal and audit log) before they act.

Exit codes: 0 every workflow completed (or the action was accepted), 1 one did not, 2 bad input.

Examples:
  fleetsim drive onboard --site site.toml --nodes gpu-01,gpu-02
  fleetsim drive status --site site.toml
  fleetsim drive resume --site site.toml --workflow onboarding --node gpu-01 --actor alice --reason 'MAC re-registered'
  fleetsim drive decommission --site site.toml --nodes gpu-02";

#[expect(clippy::too_many_arguments, reason = "one argument per `fleetsim serve` flag")]
pub(super) fn serve(
    scenario: Option<&Path>,
    seed: Option<u64>,
    machines: u32,
    bind: std::net::IpAddr,
    port: u16,
    speed: u32,
    write_site: Option<PathBuf>,
    credentials: Option<PathBuf>,
    limits: crate::live::listen::Limits,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, CliError> {
    let (names, scenario_seed) = match scenario {
        Some(path) => {
            let scenario = spec::load_scenario(path)?;
            let Some(onboarding) = &scenario.run.onboarding else {
                return Err(CliError::BadInput(SpecError {
                    path: path.display().to_string(),
                    position: None,
                    message: "onboarding: the scenario has no [onboarding] table, so no MAAS site to serve".into(),
                }));
            };
            (onboarding.machines.clone(), Some(scenario.seed))
        }
        None => (crate::live::serve::machine_names(machines), None),
    };
    let config = crate::live::serve::ServeConfig {
        seed: seed.or(scenario_seed).unwrap_or(1),
        machines: names,
        bind,
        port,
        speed,
        write_site,
        // Fresh credentials at every start, unless --seed asks for reproducible ones or a directory names them.
        secrets: match (credentials, seed) {
            (Some(dir), _) => crate::live::serve::SecretSource::Files(dir),
            (None, Some(_)) => crate::live::serve::SecretSource::Seeded,
            (None, None) => crate::live::serve::SecretSource::Random,
        },
        limits,
    };
    Ok(crate::live::serve::command(&config, out, err))
}

pub(super) fn drive(action: DriveAction, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CliError> {
    use crate::live::drive::DriveCommand;
    // Every credential this process reads or is given from here on is remembered, and redacted by its value from
    // every journal row, audit record, log line, error and printed line (docs/serve.md, "Secrets").
    engine::secret::remember_every_secret();
    let site_path = match &action {
        DriveAction::Onboard(args) | DriveAction::Decommission(args) | DriveAction::Status(args) => args.site.clone(),
        DriveAction::RetryStage(args)
        | DriveAction::Resume(args)
        | DriveAction::Rerun(args)
        | DriveAction::RestartClean(args)
        | DriveAction::Cancel(args)
        | DriveAction::AdoptObservedState(args)
        | DriveAction::MarkManualInterventionRequired(args) => args.site.clone(),
    };
    let site = crate::live::drive::load_site(&site_path)?;
    // The MAAS key's secret part travels alone in every OAuth header.
    if let Some(token_secret) = site.maas_api_key.expose().rsplit(':').next() {
        engine::secret::remember(token_secret);
    }
    let parse_action = |args: DriveActionArgs, action: engine::matrix::RecoveryAction| {
        let workflow = match args.workflow.as_str() {
            "decommission" => engine::matrix::Workflow::Decommission,
            _ => engine::matrix::Workflow::Onboarding,
        };
        let role = engine::recovery::ActorRole::ALL
            .into_iter()
            .find(|role| role.as_str() == args.role)
            .unwrap_or(engine::recovery::ActorRole::Operator);
        // A credential the site holds, pasted into the request's free text, is shown to the engine as the marker, so
        // the engine's rule refuses the request as it refuses a pasted marker; the audit withholds the text.
        DriveCommand::Action {
            action,
            workflow,
            node: args.node,
            actor: engine::secret::mark_known_secrets(&args.actor),
            role,
            reason: engine::secret::mark_known_secrets(&args.reason),
            resolves_freeze: args.resolves_freeze,
        }
    };
    use engine::matrix::RecoveryAction as A;
    let command = match action {
        DriveAction::Onboard(args) => DriveCommand::Onboard { nodes: args.nodes },
        DriveAction::Decommission(args) => DriveCommand::Decommission { nodes: args.nodes },
        DriveAction::Status(args) => DriveCommand::Status { nodes: args.nodes },
        DriveAction::RetryStage(args) => parse_action(args, A::RetryStage),
        DriveAction::Resume(args) => parse_action(args, A::Resume),
        DriveAction::Rerun(args) => parse_action(args, A::Rerun),
        DriveAction::RestartClean(args) => parse_action(args, A::RestartClean),
        DriveAction::Cancel(args) => parse_action(args, A::Cancel),
        DriveAction::AdoptObservedState(args) => parse_action(args, A::AdoptObservedState),
        DriveAction::MarkManualInterventionRequired(args) => parse_action(args, A::MarkManualInterventionRequired),
    };
    let (mut out, mut err) =
        (crate::observe::logging::Redacting::new(out), crate::observe::logging::Redacting::new(err));
    Ok(crate::live::drive::command(site, command, &mut out, &mut err))
}
