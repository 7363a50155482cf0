//! End to end over real loopback TCP: `fleetsim serve` racks two machines; `fleetsim drive onboard` starts onboarding
//! them through the engine's real adapters and is killed (SIGKILL) mid-way; the same command run again resumes from
//! the SQLite journal and completes; the served MAAS shows each machine commissioned once and deployed once. A
//! decommission is refused while an operator's hold at the hub references its node, and proceeds once it is gone.
//! (The binary is only reachable from this package's tests.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use engine::ports::Journal;

fn fleetsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fleetsim"))
}

/// Kills the served fakes when the test ends, whatever happens.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `fleetsim serve` on ephemeral ports and reads its banner: the admin address.
fn serve(dir: &Path) -> (Serve, SocketAddr) {
    serve_with(dir, &["--seed", "11"])
}

/// [`serve`] with its credentials chosen by `credentials` (`--seed N`, or `--credentials DIR`).
fn serve_with(dir: &Path, credentials: &[&str]) -> (Serve, SocketAddr) {
    let mut child = fleetsim()
        .args(["serve", "--port", "0", "--machines", "2", "--speed", "60"])
        .args(credentials)
        .arg("--write-site")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("serve.stderr")).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let served = Serve(child);
    let mut admin = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        // The admin line with its URL (the admin token's line follows it).
        if let Some(url) = line.trim().strip_prefix("admin").filter(|rest| rest.trim_start().starts_with("http://")) {
            let url = url.trim().trim_start_matches("http://").trim_end_matches("/admin/state");
            admin = Some(url.parse().unwrap());
        }
        if line.starts_with("Ctrl-C stops") {
            break;
        }
    }
    let Some(admin) = admin else {
        let stderr = std::fs::read_to_string(dir.join("serve.stderr")).unwrap_or_default();
        panic!("the banner names no admin API; fleetsim serve said: {stderr}");
    };
    (served, admin)
}

fn get(addr: SocketAddr, path: &str) -> serde_json::Value {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {response}"))
}

/// A controller call to the served hub (the site file's `[hub]` URL, principal and credential file): the status line
/// of its answer.
fn hub_call(site_dir: &Path, method: &str, path: &str) -> String {
    let site: toml::Value = toml::from_str(&std::fs::read_to_string(site_dir.join("site.toml")).unwrap()).unwrap();
    let hub = &site["hub"];
    let addr = hub["url"].as_str().unwrap().trim_start_matches("http://").trim_end_matches('/').to_owned();
    let principal = hub["principal"].as_str().unwrap();
    let credential = std::fs::read_to_string(site_dir.join(hub["credential_file"].as_str().unwrap())).unwrap();
    let mut stream = TcpStream::connect(addr.as_str()).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nX-Fleet-Principal: {principal}\r\nX-Fleet-Token: {}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n",
        credential.trim()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

/// The stages the journal shows begun, for any workflow.
fn checkpoints(journal: &Path) -> Vec<String> {
    let Ok(journal) = engine::adapters::sqlite::SqliteJournal::open(journal) else { return Vec::new() };
    let lines = futures_util::FutureExt::now_or_never(journal.replay()).unwrap().unwrap_or_default();
    lines
        .iter()
        .filter_map(|line| match engine::onboarding::record::OnboardRecord::decode(line)? {
            Ok(engine::onboarding::record::OnboardRecord::Checkpoint { stage, .. }) => Some(stage.as_str().to_owned()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_drive_killed_mid_onboarding_resumes_from_its_journal_without_a_second_commission_or_deploy() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, admin) = serve(dir.path());
    let site = dir.path().join("site.toml");
    let journal = dir.path().join("fleetsim-journal.sqlite");
    let onboard = || {
        let mut command = fleetsim();
        command.args(["drive", "onboard", "--site"]).arg(&site).stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    };

    // Kill the driver once a machine is deploying: past its commission, before its agent enrols.
    let mut first = onboard().spawn().unwrap();
    let mut polls = 0;
    while !checkpoints(&journal).iter().any(|stage| stage == "wait_for_deployed") {
        if let Some(status) = first.try_wait().unwrap() {
            let mut err = String::new();
            first.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("drive ended ({status}) before any machine was deploying: {err}");
        }
        polls += 1;
        assert!(polls < 120_000, "no machine deploying after two minutes");
        std::thread::sleep(Duration::from_millis(1));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let state = get(admin, "/admin/state");
    assert!(
        state["machines"].as_array().unwrap().iter().any(|m| m["agent_enrolled"] == false),
        "the kill came too late to test a resume: {state}"
    );

    // The same command again: it resumes from the journal and completes.
    let second = onboard().output().unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&second.stderr));
    assert!(stdout.contains("gpu-01: completed") && stdout.contains("gpu-02: completed"), "{stdout}");

    let state = get(admin, "/admin/state");
    for machine in state["machines"].as_array().unwrap() {
        assert_eq!(machine["status"], "Deployed", "{state}");
        assert_eq!(machine["agent_enrolled"], true, "{state}");
    }
    let entered = state["entered"].as_object().unwrap();
    assert_eq!(entered.len(), 2, "one MAAS machine per node: {state}");
    for (system_id, statuses) in entered {
        assert_eq!(statuses["Commissioning"], 1, "{system_id} commissioned more than once: {state}");
        assert_eq!(statuses["Deploying"], 1, "{system_id} deployed more than once: {state}");
    }

    // A third run finds both workflows completed in the journal and runs nothing.
    let third = onboard().output().unwrap();
    let stdout = String::from_utf8_lossy(&third.stdout);
    assert!(third.status.success() && stdout.matches("by an earlier run").count() == 2, "{stdout}");
}

#[test]
fn drive_refuses_a_credential_file_others_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, _admin) = serve(dir.path());
    let key = dir.path().join("maas-api-key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let output = fleetsim().args(["drive", "status", "--site"]).arg(dir.path().join("site.toml")).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("maas.api_key_file") && stderr.contains("chmod 600"), "{stderr}");
    let key_text = std::fs::read_to_string(&key).unwrap();
    let secret = key_text.trim().rsplit(':').next().unwrap();
    assert!(!stderr.contains(secret), "the refusal printed the key: {stderr}");
}

#[test]
fn drive_decommissions_an_onboarded_node_and_audits_a_refused_operator_action() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, admin) = serve(dir.path());
    let site = dir.path().join("site.toml");
    let drive = |args: &[&str]| {
        let output = fleetsim().arg("drive").args(args).arg("--site").arg(&site).output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = drive(&["onboard", "--nodes", "gpu-01"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");

    // Resuming a completed workflow is refused, and the refusal is audited (journal and audit log) with its reason.
    let (code, stdout, _) = drive(&[
        "resume",
        "--workflow",
        "onboarding",
        "--node",
        "gpu-01",
        "--actor",
        "alice",
        "--reason",
        "checking the audit trail",
    ]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("gpu-01: resume refused"), "{stdout}");
    let audit = std::fs::read_to_string(dir.path().join("fleetsim-audit.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = audit.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(records.len(), 2, "the request, then its settlement: {audit}");
    assert_eq!(records[0]["actor_id"], "alice");
    assert_eq!(records[0]["reason"], "checking the audit trail");
    assert_eq!(records[0]["outcome"]["outcome"], "refused");
    assert!(records[1]["actual_next_state"].is_string(), "{audit}");

    // An operator's dispatch hold on gpu-01's agent at the hub: the decommission is refused and changes nothing.
    let hold = "/v1/hub/holds/gpu-01/operator:maintenance";
    assert!(hub_call(dir.path(), "PUT", hold).contains(" 200 "), "the hold is placed");
    let (code, stdout, stderr) = drive(&["decommission", "--nodes", "gpu-01"]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.trim_end(),
        "gpu-01: failed_retryable at disable_node (state_ambiguity): refused, nothing changed: dispatch hold \
         operator:maintenance"
    );
    assert_eq!(get(admin, "/admin/state")["machines"][0]["status"], "Deployed", "nothing was released");
    assert!(hub_call(dir.path(), "DELETE", hold).contains(" 200 "), "the hold is released");

    // The decommission: drained, cleaned, released with erase, and gone from the inventory.
    let (code, stdout, stderr) = drive(&["decommission", "--nodes", "gpu-01"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("gpu-01: completed"), "{stdout}");
    let state = get(admin, "/admin/state");
    let machine = &state["machines"][0];
    assert_eq!(machine["name"], "gpu-01");
    assert_ne!(machine["status"], "Deployed", "{state}");
    let (_, status, _) = drive(&["status", "--nodes", "gpu-01"]);
    assert!(
        status.contains("onboard-gpu-01: completed") && status.contains("decommission-gpu-01: completed"),
        "{status}"
    );
}

/// Credentials for `fleetsim serve --credentials`, in 0600 files: some carrying the marker, some plain, as a real
/// site's would. Returns the kinds `drive` loads (and the MAAS key's secret part, alone as an OAuth header carries it)
/// with their values.
fn credential_files(dir: &Path) -> Vec<(&'static str, String)> {
    use std::os::unix::fs::PermissionsExt;
    let credentials = [
        ("maas-api-key", "ck5d1e0a7c33:tk9b27f4e610:plain-maas-secret-7e3c9a1f0b"),
        ("secrets-token", "hvs.PlainVaultToken4c8e21d9"),
        ("hub-credential", "fleetsim-secret-hub-5a0f3b7d1c9e"),
        ("inventory-token", "inv-plain-bearer-0d4c6e8a2f"),
        ("admin-token", "admin-plain-token-61b8e0c4d2"),
        ("redfish-password", "redfish-plain-pw-93a7c1e5f0"),
        ("provider-token", "provider-plain-token-2e6a4c8b0d"),
    ];
    std::fs::create_dir_all(dir).unwrap();
    for (name, value) in credentials {
        std::fs::write(dir.join(name), format!("{value}\n")).unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut kinds: Vec<(&str, String)> =
        credentials[..4].iter().map(|(name, value)| (*name, (*value).to_owned())).collect();
    kinds.push(("maas-token-secret", "plain-maas-secret-7e3c9a1f0b".to_owned()));
    kinds
}

#[test]
fn every_credential_planted_in_every_free_text_field_of_every_action_reaches_no_file_or_output() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let kinds = credential_files(&dir.path().join("given"));
    let given = dir.path().join("given").display().to_string();
    let (_serve, _admin) = serve_with(dir.path(), &["--credentials", &given]);
    // A journal and an audit log left 0644 by an earlier tool: drive tightens them before it writes.
    for name in ["fleetsim-journal.sqlite", "fleetsim-audit.jsonl"] {
        std::fs::write(dir.path().join(name), "").unwrap();
        std::fs::set_permissions(dir.path().join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let site = dir.path().join("site.toml");
    let actions = [
        "retry-stage",
        "resume",
        "rerun",
        "restart-clean",
        "cancel",
        "adopt-observed-state",
        "mark-manual-intervention-required",
    ];
    let mut printed = String::new();
    let mut requests = 0;
    for (kind, value) in &kinds {
        // The actor alone, the reason alone, both (the engine names only the first), and a blank actor (refused for
        // that) with the credential in the reason.
        let plantings = [
            (format!("alice {value}"), "disk replaced".to_owned()),
            ("alice".to_owned(), format!("token was {value} per the ticket")),
            (value.clone(), format!("again {value}")),
            (" ".to_owned(), format!("pasted {value}")),
        ];
        for action in actions {
            for (actor, reason) in &plantings {
                let output = fleetsim()
                    .env("RUST_LOG", "debug")
                    .args(["drive", action, "--site"])
                    .arg(&site)
                    .args(["--workflow", "onboarding", "--node", "gpu-01", "--actor", actor, "--reason", reason])
                    .output()
                    .unwrap();
                let (stdout, stderr) =
                    (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
                assert_eq!(output.status.code(), Some(1), "{kind} {action} refused: {stdout}{stderr}");
                assert!(stdout.contains("refused"), "{kind} {action}: {stdout}{stderr}");
                printed.push_str(&stdout);
                printed.push_str(&stderr);
                requests += 1;
            }
        }
    }
    // Every file drive wrote (the journal, its -wal and -shm, the audit log) and everything it printed.
    let mut written = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("fleetsim-") {
            continue; // the site file, the credential files serve wrote, serve's own output
        }
        let bytes = std::fs::read(&path).unwrap();
        for (kind, value) in &kinds {
            assert!(
                !bytes.windows(value.len()).any(|window| window == value.as_bytes()),
                "{name} holds the {kind} credential"
            );
        }
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name} is {mode:04o}");
        written.push(name);
    }
    assert!(written.iter().any(|name| name == "fleetsim-journal.sqlite"), "{written:?}");
    for (kind, value) in &kinds {
        assert!(!printed.contains(value.as_str()), "drive printed the {kind} credential");
    }
    // Every request was audited, its planted texts withheld.
    let audit = std::fs::read_to_string(dir.path().join("fleetsim-audit.jsonl")).unwrap();
    assert_eq!(audit.lines().count(), 2 * requests, "each request and its settlement");
    assert!(audit.lines().all(|line| line.contains("[withheld: it carried a credential]")), "{audit}");
}
