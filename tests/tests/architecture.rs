//! Architecture invariants, checked by reading the workspace itself: the crate graph and the house style.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn dependencies(krate: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let mut names = Vec::new();
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(table) = manifest.get(section).and_then(|v| v.as_table()) {
            names.extend(table.keys().cloned());
        }
    }
    names
}

fn forbid(krate: &str, forbidden: &[&str]) {
    let deps = dependencies(krate);
    for name in forbidden {
        assert!(!deps.iter().any(|dep| dep == name), "{krate} must not depend on {name} (docs/ARCHITECTURE.md)");
    }
}

#[test]
fn workspace_members_are_the_documented_crates() {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let members: Vec<&str> =
        manifest["workspace"]["members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(members, ["engine", "fakes", "controller", "sim", "reports", "tests"]);
}

#[test]
fn the_engine_knows_nothing_of_the_simulator() {
    forbid("engine", &["sim", "fakes", "reports", "turmoil", "axum", "wiremock", "tokio"]);
}

#[test]
fn the_controller_binary_is_the_engine_s_alone() {
    forbid("controller", &["sim", "fakes", "reports", "turmoil", "wiremock"]);
    assert!(dependencies("controller").iter().any(|dep| dep == "engine"), "the controller runs the engine");
}

#[test]
fn fakes_do_not_borrow_the_engine_s_types() {
    forbid("fakes", &["engine", "sim", "reports"]);
}

#[test]
fn reports_depend_on_no_workspace_crate() {
    forbid("reports", &["engine", "fakes", "sim"]);
}

#[test]
fn the_simulator_depends_on_the_engine_the_fakes_and_the_reports() {
    let deps = dependencies("sim");
    for name in ["engine", "fakes", "reports"] {
        assert!(deps.iter().any(|dep| dep == name), "sim must depend on {name}");
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "target" && !name.to_string_lossy().starts_with('.')) {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_doc_line() {
    let mut files = Vec::new();
    for krate in ["engine", "fakes", "controller", "sim", "reports", "tests"] {
        rust_files(&root().join(krate), &mut files);
    }
    assert!(files.len() > 20, "found only {} files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("//!"), "{} does not open with a //! line", file.display());
    }
}

#[test]
fn no_silent_lint_allows_and_every_select_is_biased() {
    let mut files = Vec::new();
    for krate in ["engine", "fakes", "controller", "sim", "reports"] {
        rust_files(&root().join(krate), &mut files);
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("#[allow("), "{}: lint exceptions are #[expect(lint, reason = ...)]", file.display());
        for (index, _) in text.match_indices("select! {") {
            let after = text[index..].trim_start_matches("select! {").trim_start();
            assert!(after.starts_with("biased;"), "{}: every select! is biased", file.display());
        }
    }
}
