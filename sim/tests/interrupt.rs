//! A real `fleetsim campaign` process killed mid-way leaves its finished runs and no report; `--resume` finishes it
//! into the report.json an uninterrupted campaign writes. (The binary is only reachable from this package's tests.)

#[path = "../../tests/tests/support/small_campaign.rs"]
mod small_campaign;
use small_campaign::{SSH_TIMEOUTS, small_campaign};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn fleetsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fleetsim"))
}

/// Forty short runs on one thread: long enough that the process is still running when its first run is on disk.
fn campaign_text() -> String {
    small_campaign("interrupt test", 5, 40, &[SSH_TIMEOUTS], &[])
}

fn run_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".json") && !name.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_killed_campaign_resumes_into_the_uninterrupted_report() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("c.toml");
    std::fs::write(&campaign, campaign_text()).unwrap();
    let killed = dir.path().join("killed");
    let mut child = fleetsim()
        .args(["campaign", campaign.to_str().unwrap(), "--jobs", "1", "--out", killed.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Poll (no fixed wait) until the first run is on disk, then kill the process.
    let mut polls = 0;
    while run_files(&killed).is_empty() {
        assert!(child.try_wait().unwrap().is_none(), "the campaign ended before its first run was written");
        polls += 1;
        assert!(polls < 60_000, "no run file after a minute");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(child.try_wait().unwrap().is_none(), "still running when killed");
    child.kill().unwrap();
    child.wait().unwrap();
    let left = run_files(&killed);
    assert!(!left.is_empty() && left.len() < 40, "{} runs on disk", left.len());
    assert!(!killed.join("report.json").exists(), "no report from a killed campaign");

    let resumed = fleetsim()
        .args(["campaign", campaign.to_str().unwrap(), "--jobs", "2", "--out", killed.to_str().unwrap(), "--resume"])
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(stdout.contains(&format!("  resumed       {} runs read from ", left.len())), "{stdout}");

    let whole = dir.path().join("whole");
    let output = fleetsim()
        .args(["campaign", campaign.to_str().unwrap(), "--jobs", "2", "--out", whole.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(killed.join("report.json")).unwrap(),
        std::fs::read_to_string(whole.join("report.json")).unwrap()
    );
}
