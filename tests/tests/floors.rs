//! Folders are floors (STYLE.md rule 15): inside `sim` and `engine`, each top-level module is a floor that names only
//! floors below it, no import circle joins files of different folders, and no circle joins more than two files
//! anywhere (a folder's `mod.rs` holding its own children is containment, not an import). Checked by reading the `crate::` and
//! `super::` paths of every source file (comments and string literals skipped), as rust-analyzer's tidy tests read
//! the tree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors of `sim`, bottom first: a module may name its own floor and the floors before it, never one after.
const SIM_FLOORS: &[&[&str]] = &[&["model"], &["observe"], &["world"], &["wire"], &["run"], &["live"], &["cli"]];

/// The floors of `engine`, bottom first.
const ENGINE_FLOORS: &[&[&str]] = &[
    &["secret"],
    &["matrix", "ports"],
    &["recovery", "sensor", "workflow"],
    &["decommission", "instance", "onboarding", "rollout", "rotation"],
    &["operator"],
    &["controller"],
    &["adapters"],
];

/// A source file: its module path (`["world", "site"]` for `world/site.rs` or `world/site/mod.rs`) and text.
struct Source {
    module: Vec<String>,
    text: String,
}

fn sources(src: &Path) -> BTreeMap<PathBuf, Source> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<PathBuf, Source>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                // `bin/` holds the binaries' own crate roots, above every floor.
                if path.parent() == Some(src) && path.file_name().is_some_and(|name| name == "bin") {
                    continue;
                }
                walk(&path, src, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path.strip_prefix(src).unwrap();
                let mut module: Vec<String> =
                    relative.with_extension("").iter().map(|part| part.to_string_lossy().into_owned()).collect();
                if module.last().is_some_and(|last| last == "mod" || last == "lib") {
                    module.pop();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                out.insert(relative.to_owned(), Source { module, text });
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The text with comments, string and char literals blanked (so a doc link or an error message names no module).
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |end| end + 2);
            i += end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|c| *c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            let end = rest[body..].find(&close).map_or(rest.len(), |end| body + end + close.len());
            out.push_str("\"\"");
            i += end;
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() {
                match rest.as_bytes()[j] {
                    b'\\' => j += 2,
                    b'"' => break,
                    _ => j += 1,
                }
            }
            out.push_str("\"\"");
            i += (j + 1).min(rest.len());
        } else if let Some(escaped) = rest.strip_prefix("'\\") {
            let end = escaped.find('\'').map_or(rest.len(), |end| end + 3);
            i += end;
        } else if rest.len() >= 3 && rest.starts_with('\'') && rest[1..].chars().nth(1) == Some('\'') {
            i += 1 + rest[1..].chars().next().unwrap().len_utf8() + 1;
        } else {
            let ch = rest.chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The code without its unit tests: a test module tests its file from above and may name any floor (the runner,
/// say, to run a scenario), so `mod tests { … }` blocks under `#[cfg(test)]` are cut out.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(index) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..index]);
        let after = &rest[index..];
        let Some(open) = after.find(['{', ';']) else { return out };
        if after.as_bytes()[open] == b';' {
            rest = &after[open + 1..];
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (offset, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + offset + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every module path a file names from the crate root: `crate::a::b`, the groups of `crate::{a, b::c}`, and
/// `super::` paths resolved against the file's own module. A unit-test file (`tests.rs`) and `#[cfg(test)]` modules
/// name nothing (see [`without_test_modules`]).
fn references(source: &Source) -> Vec<Vec<String>> {
    if source.module.last().is_some_and(|last| last == "tests") {
        return Vec::new();
    }
    let code = without_test_modules(&code_only(&source.text));
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(&source.module))] {
        for (index, _) in code.match_indices(prefix) {
            if code[..index].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base = base.clone();
            let mut rest = &code[index + prefix.len()..];
            while let Some(after) = rest.strip_prefix("super::") {
                base = parent(&base);
                rest = after;
            }
            for path in paths(rest) {
                let mut full = base.clone();
                full.extend(path);
                out.push(full);
            }
        }
    }
    out
}

fn parent(module: &[String]) -> Vec<String> {
    module[..module.len().saturating_sub(1)].to_vec()
}

/// The paths at the start of `rest`: `a::b::C` gives `[a, b, C]`; `{a::x, b}` gives `[a, x]` and `[b]` (nested
/// groups flattened to their first level, which is all the floors need).
fn paths(rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut end = group.len();
        for (index, ch) in group.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    end = index;
                    break;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        let mut out = Vec::new();
        let mut depth = 0;
        let mut start = 0;
        let inner = &group[..end];
        for (index, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.extend(paths(&inner[start..index]));
                    start = index + 1;
                }
                _ => {}
            }
        }
        out.extend(paths(&inner[start..]));
        return out;
    }
    let mut path = Vec::new();
    let mut rest = rest;
    loop {
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        path.push(name);
        match rest.strip_prefix("::") {
            Some(after) if !after.starts_with('{') => rest = after,
            Some(after) => {
                let base = path.clone();
                return paths(after)
                    .into_iter()
                    .map(|tail| base.iter().cloned().chain(tail).collect())
                    .collect::<Vec<_>>()
                    .into_iter()
                    .chain(std::iter::once(base.clone()))
                    .collect();
            }
            None => break,
        }
    }
    if path.is_empty() { Vec::new() } else { vec![path] }
}

/// The file a module path lands in: the longest prefix of `path` that is a source file's module.
fn file_of<'a>(files: &'a BTreeMap<Vec<String>, PathBuf>, path: &[String]) -> Option<&'a PathBuf> {
    (1..=path.len()).rev().find_map(|len| files.get(&path[..len]))
}

/// The violations of the floors in one crate's `src`: edges that run up a floor, modules on no floor, and circles
/// joining files of different folders.
fn violations(sources: &BTreeMap<PathBuf, Source>, floors: &[&[&str]]) -> Vec<String> {
    let floor_of = |module: &[String]| -> Option<usize> {
        let top = module.first()?;
        floors.iter().position(|floor| floor.contains(&top.as_str()))
    };
    let files: BTreeMap<Vec<String>, PathBuf> =
        sources.iter().map(|(path, source)| (source.module.clone(), path.clone())).collect();
    let mut problems = Vec::new();
    let mut edges: BTreeMap<&PathBuf, BTreeSet<&PathBuf>> = BTreeMap::new();
    for (path, source) in sources {
        if source.module.is_empty() {
            continue; // lib.rs: declares the floors
        }
        let Some(own) = floor_of(&source.module) else {
            problems.push(format!("{}: module `{}` is on no floor", path.display(), source.module[0]));
            continue;
        };
        for reference in references(source) {
            let Some(target) = file_of(&files, &reference) else { continue };
            if target == path {
                continue;
            }
            // A module naming its own submodules (`mod.rs` and its children) is the folder's containment, not an
            // import: the children name their parent, and the parent holds them.
            let target_module = &sources[target].module;
            if target_module.len() > source.module.len() && target_module.starts_with(&source.module) {
                continue;
            }
            edges.entry(path).or_default().insert(target);
            if let Some(floor) = floor_of(&reference) {
                if floor > own {
                    problems.push(format!(
                        "{}: names `{}` (floor {}), above its own floor {} ({})",
                        path.display(),
                        reference.join("::"),
                        floor,
                        own,
                        floors[own].join(", ")
                    ));
                }
            }
        }
    }
    for component in strongly_connected(&edges) {
        let names: Vec<String> = component.iter().map(|path| path.display().to_string()).collect();
        let folders: BTreeSet<_> = component.iter().map(|path| path.parent().map(Path::to_owned)).collect();
        if folders.len() > 1 {
            problems.push(format!("an import circle across folders: {}", names.join(" → ")));
        } else if component.len() > 2 {
            problems.push(format!("an import circle of {} files: {}", component.len(), names.join(" → ")));
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// Tarjan's strongly connected components of more than one file.
fn strongly_connected<'a>(edges: &BTreeMap<&'a PathBuf, BTreeSet<&'a PathBuf>>) -> Vec<Vec<&'a PathBuf>> {
    struct State<'a> {
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<&'a PathBuf>>,
    }
    fn visit<'a>(node: &'a PathBuf, edges: &BTreeMap<&'a PathBuf, BTreeSet<&'a PathBuf>>, state: &mut State<'a>) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        for target in edges.get(node).into_iter().flatten() {
            if !state.index.contains_key(target) {
                visit(target, edges, state);
                let low = state.low[target].min(state.low[node]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.index[target].min(state.low[node]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top);
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.out.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(node, edges, &mut state);
        }
    }
    state.out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

#[test]
fn the_simulator_s_folders_are_floors_with_no_edge_running_up_and_no_circle_across_folders() {
    let sources = sources(&root().join("sim/src"));
    assert!(sources.len() > 20, "found only {} files", sources.len());
    let problems = violations(&sources, SIM_FLOORS);
    assert!(problems.is_empty(), "sim/src (docs/ARCHITECTURE.md, \"The layers\"):\n{}", problems.join("\n"));
}

#[test]
fn the_engine_s_folders_are_floors_with_no_edge_running_up_and_no_circle_across_folders() {
    let sources = sources(&root().join("engine/src"));
    assert!(sources.len() > 20, "found only {} files", sources.len());
    let problems = violations(&sources, ENGINE_FLOORS);
    assert!(problems.is_empty(), "engine/src (docs/ARCHITECTURE.md, \"The layers\"):\n{}", problems.join("\n"));
}

/// The checker can fail: an edge up a floor, a module on no floor, a circle across folders and a circle of three files
/// in one folder are each found, and names in comments and strings are not edges.
#[test]
fn the_floor_checker_finds_an_edge_up_a_circle_across_folders_and_ignores_comments_and_strings() {
    let source = |module: &[&str], text: &str| Source {
        module: module.iter().map(|part| (*part).to_owned()).collect(),
        text: text.to_owned(),
    };
    let floors: &[&[&str]] = &[&["side"], &["low"], &["high"]];
    let mut tree = BTreeMap::new();
    tree.insert(PathBuf::from("low/a.rs"), source(&["low", "a"], "//! a\nuse crate::high::b::Thing;\n"));
    tree.insert(PathBuf::from("high/b.rs"), source(&["high", "b"], "//! b\nuse crate::{low::a, side};\n"));
    tree.insert(PathBuf::from("side.rs"), source(&["side"], "//! see crate::high::b\nfn f() { \"crate::high\"; }\n"));
    tree.insert(PathBuf::from("stray.rs"), source(&["stray"], "//! on no floor\n"));
    let problems = violations(&tree, floors);
    assert!(problems.iter().any(|p| p.starts_with("low/a.rs: names `high::b::Thing`")), "{problems:#?}");
    assert!(problems.iter().any(|p| p.contains("circle across folders: high/b.rs → low/a.rs")), "{problems:#?}");
    assert!(problems.iter().any(|p| p.contains("`stray` is on no floor")), "{problems:#?}");
    assert!(!problems.iter().any(|p| p.starts_with("side.rs")), "comments and strings are no edges: {problems:#?}");
    assert_eq!(problems.len(), 3, "{problems:#?}");

    // Inside one folder: a circle of three files is refused, two files naming each other are one concept split for
    // size, and a folder's `mod.rs` holding its children is containment, not an import.
    let mut folder = BTreeMap::new();
    folder.insert(
        PathBuf::from("low/mod.rs"),
        source(
            &["low"],
            "//! low
use crate::low::{x::X, y::Y, z::Z};
",
        ),
    );
    folder.insert(
        PathBuf::from("low/x.rs"),
        source(
            &["low", "x"],
            "//! x
use super::y::Y; use crate::low::Core;
",
        ),
    );
    folder.insert(
        PathBuf::from("low/y.rs"),
        source(
            &["low", "y"],
            "//! y
use super::z::Z;
",
        ),
    );
    folder.insert(
        PathBuf::from("low/z.rs"),
        source(
            &["low", "z"],
            "//! z
use super::x::X;
",
        ),
    );
    folder.insert(
        PathBuf::from("low/p.rs"),
        source(
            &["low", "p"],
            "//! p
use super::q::Q;
",
        ),
    );
    folder.insert(
        PathBuf::from("low/q.rs"),
        source(
            &["low", "q"],
            "//! q
use super::p::P;
",
        ),
    );
    let problems = violations(&folder, floors);
    assert_eq!(problems, ["an import circle of 3 files: low/x.rs → low/y.rs → low/z.rs"], "{problems:#?}");

    let nested = source(&["high", "b", "inner"], "use super::super::c::D; use crate::low::{x::{y, z}, w};");
    let names: Vec<String> = references(&nested).iter().map(|path| path.join("::")).collect();
    assert_eq!(names, ["low::x::y", "low::x::z", "low::x", "low::w", "low", "high::c::D"]);

    let tested =
        source(&["low", "a"], "use crate::low::b;\n#[cfg(test)]\nmod tests { use crate::high::c; }\nuse crate::side;");
    let names: Vec<String> = references(&tested).iter().map(|path| path.join("::")).collect();
    assert_eq!(names, ["low::b", "side"], "unit tests may name any floor");
    assert!(references(&source(&["low", "a", "tests"], "use crate::high::c;")).is_empty());
}

/// What only the engine's controller does: run a driver, admit work under a limit, run a stopped workflow again.
const CONTROLLER_ONLY: &[&str] = &[
    "run_onboarding(",
    "run_decommission(",
    "run_decommission_from(",
    "compensate_cancelled(",
    "record_cancel_uncompensated(",
    "run_rollout(",
    "run_rotation(",
    "run_instance_status_sensor(",
    "apply_operator_action(",
    "settle_after_run(",
    "InstanceDriver::open(",
    "Semaphore",
    "RERUN_DELAY",
    "RUNS_PER_REQUEST",
    "FAILED_RUNS_MAX",
];

/// Where a source tree decides something for the controller: each file (unit tests aside) and what it names of
/// [`CONTROLLER_ONLY`].
fn controller_decisions(sources: &BTreeMap<PathBuf, Source>) -> Vec<String> {
    let mut found = Vec::new();
    for (path, source) in sources {
        if source.module.last().is_some_and(|last| last == "tests") {
            continue;
        }
        let code = without_test_modules(&code_only(&source.text));
        for name in CONTROLLER_ONLY.iter().filter(|name| code.contains(**name)) {
            found.push(format!("{}: {name}", path.display()));
        }
    }
    found
}

/// The simulator hosts the controller and decides nothing for it (docs/ARCHITECTURE.md, "the world only hosts the
/// controller"): no file of `sim/src` runs a driver — only `engine::controller`'s service does — or keeps an
/// admission limit or a rerun rule of its own.
#[test]
fn the_simulator_decides_nothing_for_the_controller() {
    let sources = sources(&root().join("sim/src"));
    let found = controller_decisions(&sources);
    assert!(found.is_empty(), "sim/src decides for the controller:\n{}", found.join("\n"));
}

/// The check can fail: a world part that runs a workflow with its own rerun rule is found; the same names in a
/// comment, a string or a unit test are not.
#[test]
fn a_world_part_that_runs_a_driver_or_keeps_a_rerun_rule_is_found() {
    let source = |module: &[&str], text: &str| Source {
        module: module.iter().map(|part| (*part).to_owned()).collect(),
        text: text.to_owned(),
    };
    let mut tree = BTreeMap::new();
    tree.insert(
        PathBuf::from("world/site.rs"),
        source(
            &["world", "site"],
            "//! the site\nconst RERUN_DELAY_MS: u64 = 60_000;\nasync fn f() { ports.run_onboarding(&request).await; }\n",
        ),
    );
    tree.insert(
        PathBuf::from("world/quiet.rs"),
        source(
            &["world", "quiet"],
            "//! says run_onboarding( in a comment\nfn g() { \"Semaphore\"; }\n#[cfg(test)]\nmod tests { fn t() { run_rollout(x); } }\n",
        ),
    );
    let found = controller_decisions(&tree);
    assert_eq!(found, ["world/site.rs: run_onboarding(", "world/site.rs: RERUN_DELAY"]);
}
