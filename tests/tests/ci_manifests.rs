//! The scale-out manifests run commands that exist: every `fleetsim` subcommand and flag in
//! `.github/workflows/release-gate.yml` and `deploy/kubernetes/campaign-shards.yaml` is on the real command line
//! (each flag on its own subcommand's `--help`), the workflow's shard matrix is `1..=SHARDS`, and the Kubernetes Job is
//! Indexed with `JOB_COMPLETION_INDEX` feeding `--shard K/N`, `N` its `completions`, and a suspended merge-and-gate Job
//! over the same volume after it.
//!
//! The workspace has no YAML crate, so the commands are read from the files' text: `run:` values and container
//! `command`/`args` (flow sequences, plain items and block scalars), each script then split into simple commands the
//! way a shell does (quotes, `$(...)`, `${...}`, `;`, `&&`, `||`, `|`, redirections, comments). `--help` comes from
//! `sim::cli::main_with`, the function the binary's `main` calls, so the flags checked are those of this commit rather
//! than of whatever `target/*/fleetsim` was last built.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sim::model::exit::EXIT_PASS;

#[path = "support/in_process.rs"]
mod in_process;
use in_process::fleetsim;

const WORKFLOW: &str = ".github/workflows/release-gate.yml";
const KUBERNETES: &str = "deploy/kubernetes/campaign-shards.yaml";
const POLICY: &str = "campaigns/release-gate.toml";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

// ---- the command line's own description of itself ----

/// `fleetsim <path…> --help`: it must exist and exit 0.
fn help(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let (code, out, err) = fleetsim(&args);
    assert_eq!(code, EXIT_PASS, "fleetsim {} --help: {err}", path.join(" "));
    out
}

/// The subcommands a help text lists under `Commands:` (lines indented by exactly two spaces).
fn subcommands(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|line| line.trim_end() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The flags a help text defines in its `Options:` section: the leading `-x, --long` tokens of each entry.
fn flags(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    let options = help
        .lines()
        .skip_while(|line| line.trim_end() != "Options:")
        .skip(1)
        .take_while(|line| line.is_empty() || line.starts_with(' '));
    for line in options {
        for token in line.split_whitespace() {
            let token = token.trim_end_matches(',');
            let is_flag = token.starts_with('-')
                && token.trim_start_matches('-').chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
            if !is_flag {
                break;
            }
            flags.insert(token.to_owned());
        }
    }
    assert!(flags.contains("--help"), "no Options section in:\n{help}");
    flags
}

/// One `fleetsim` invocation: its subcommand path (`["report", "merge"]`) and the rest of its words.
#[derive(Debug)]
struct Invocation {
    path: Vec<String>,
    args: Vec<String>,
}

impl Invocation {
    /// The value that follows `flag` (`--flag value` or `--flag=value`).
    fn value(&self, flag: &str) -> Option<&str> {
        self.args.iter().enumerate().find_map(|(i, arg)| {
            if arg == flag {
                self.args.get(i + 1).map(String::as_str)
            } else {
                arg.strip_prefix(flag).and_then(|rest| rest.strip_prefix('='))
            }
        })
    }

    fn has(&self, flag: &str) -> bool {
        self.args.iter().any(|arg| arg == flag || arg.starts_with(&format!("{flag}=")))
    }

    /// The words that are not flags (positional arguments and flag values).
    fn positionals(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).filter(|arg| !arg.starts_with('-')).collect()
    }

    fn is(&self, path: &[&str]) -> bool {
        self.path.iter().map(String::as_str).eq(path.iter().copied())
    }
}

/// Splits `fleetsim`'s arguments into the subcommand path the command line knows and the rest, checking every
/// element of the path is listed by its parent's help and every flag is defined by the subcommand's help.
fn check_invocation(file: &str, words: &[String]) -> Invocation {
    let line = format!("{file}: fleetsim {}", words.join(" "));
    let mut path: Vec<String> = Vec::new();
    let mut rest = words;
    loop {
        let known = subcommands(&help(&path));
        match rest.first() {
            Some(word) if known.contains(word) => {
                path.push(word.clone());
                rest = &rest[1..];
            }
            Some(word) if path.is_empty() => panic!("{line}: no subcommand {word:?}; fleetsim has {known:?}"),
            None if path.is_empty() => panic!("{line}: no subcommand"),
            _ => break,
        }
    }
    let defined = flags(&help(&path));
    for word in rest.iter().filter(|word| word.starts_with('-')) {
        let flag = word.split('=').next().unwrap();
        assert!(
            defined.contains(flag),
            "{line}: `fleetsim {}` has no flag {flag}; its --help defines {defined:?}",
            path.join(" ")
        );
    }
    Invocation { path, args: rest.to_vec() }
}

// ---- shell scripts ----

/// The simple commands of a POSIX shell script, each as its words with quotes removed (expansions kept verbatim),
/// redirections and comments dropped.
fn simple_commands(script: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = script.chars().collect();
    let mut commands = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut redirect = false;
    let mut i = 0;

    fn end_word(word: &mut String, in_word: &mut bool, redirect: &mut bool, command: &mut Vec<String>) {
        if *in_word {
            if !std::mem::take(redirect) {
                command.push(word.clone());
            }
            word.clear();
            *in_word = false;
        }
    }
    fn end_command(command: &mut Vec<String>, commands: &mut Vec<Vec<String>>) {
        if !command.is_empty() {
            commands.push(std::mem::take(command));
        }
    }
    /// The index just past the `close` that balances the `open` at `start`.
    fn balanced(chars: &[char], start: usize, open: char, close: char) -> usize {
        let mut depth = 0;
        for (j, &c) in chars.iter().enumerate().skip(start) {
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
        }
        panic!("unbalanced {open}{close} in {:?}", chars[start..].iter().collect::<String>());
    }

    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if chars.get(i + 1) == Some(&'\n') => i += 2,
            '\\' => {
                word.extend(chars.get(i + 1));
                in_word = true;
                i += 2;
            }
            '\'' => {
                let end = chars[i + 1..].iter().position(|&c| c == '\'').expect("unterminated '") + i + 1;
                word.extend(&chars[i + 1..end]);
                in_word = true;
                i = end + 1;
            }
            '"' => {
                i += 1;
                while chars[i] != '"' {
                    if chars[i] == '\\' && matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
                in_word = true;
                i += 1;
            }
            '$' if matches!(chars.get(i + 1), Some('(' | '{')) => {
                let (open, close) = if chars[i + 1] == '(' { ('(', ')') } else { ('{', '}') };
                let end = balanced(&chars, i + 1, open, close);
                word.extend(&chars[i..end]);
                in_word = true;
                i = end;
            }
            '#' if !in_word => {
                i = chars[i..].iter().position(|&c| c == '\n').map_or(chars.len(), |n| i + n);
            }
            ' ' | '\t' => {
                end_word(&mut word, &mut in_word, &mut redirect, &mut command);
                i += 1;
            }
            '\n' | ';' | '&' | '|' | '(' | ')' => {
                end_word(&mut word, &mut in_word, &mut redirect, &mut command);
                end_command(&mut command, &mut commands);
                i += 1;
            }
            '>' | '<' => {
                // `2>file`: the digits are the descriptor, not a word
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word(&mut word, &mut in_word, &mut redirect, &mut command);
                while matches!(chars.get(i), Some('>' | '<' | '&')) {
                    i += 1;
                }
                redirect = true;
            }
            _ => {
                word.push(c);
                in_word = true;
                i += 1;
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut redirect, &mut command);
    end_command(&mut command, &mut commands);
    commands
}

/// The arguments of every `fleetsim` (or `…/fleetsim`) a script runs: the first word of a simple command after
/// keywords (`if`, `then`, `!`, `exec`…) and variable assignments.
fn fleetsim_commands(script: &str) -> Vec<Vec<String>> {
    const KEYWORDS: &[&str] = &["if", "then", "elif", "else", "do", "while", "until", "!", "{", "exec", "time", "env"];
    simple_commands(script)
        .into_iter()
        .filter_map(|words| {
            let start = words.iter().position(|word| {
                let assignment = word.split_once('=').is_some_and(|(name, _)| {
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                !KEYWORDS.contains(&word.as_str()) && !assignment
            })?;
            let program = &words[start];
            (program == "fleetsim" || program.ends_with("/fleetsim")).then(|| words[start + 1..].to_vec())
        })
        .collect()
}

// ---- the YAML subset these files are written in ----

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A line's key and value (`key: value`, or `- key: value` in a sequence), and the column the key starts at.
fn key_value(line: &str) -> Option<(usize, &str, &str)> {
    let mut column = indent(line);
    let mut text = line.trim_start();
    if let Some(item) = text.strip_prefix("- ") {
        column += 2;
        text = item.trim_start();
    }
    let (key, value) = text.split_once(':')?;
    let plain_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    (plain_key && (value.is_empty() || value.starts_with(' '))).then(|| (column, key, value.trim()))
}

/// A scalar without its trailing comment and quotes.
fn scalar(value: &str) -> String {
    let value = value.split(" #").next().unwrap().trim();
    let unquoted = value.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
    unquoted.or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\''))).unwrap_or(value).to_owned()
}

/// The text of the scalar that starts with `value` on line `at`, whose parent node is at column `parent`: a block
/// scalar (`|`, `>`) or a plain scalar with its continuation lines, i.e. the following lines indented past `parent`.
fn scalar_at(lines: &[&str], at: usize, parent: usize, value: &str) -> String {
    let more: Vec<&str> =
        lines[at + 1..].iter().copied().take_while(|line| line.trim().is_empty() || indent(line) > parent).collect();
    let more = &more[..more.iter().rposition(|line| !line.trim().is_empty()).map_or(0, |n| n + 1)];
    if value.starts_with('|') || value.starts_with('>') {
        let dedent = more.iter().filter(|line| !line.trim().is_empty()).map(|line| indent(line)).min().unwrap_or(0);
        let body = more.iter().map(|line| line.get(dedent..).unwrap_or("")).collect::<Vec<_>>();
        body.join(if value.starts_with('|') { "\n" } else { " " })
    } else {
        std::iter::once(value).chain(more.iter().map(|line| line.trim())).collect::<Vec<_>>().join(" ")
    }
}

/// The values of `key` anywhere in `text`, as scalars.
fn values(text: &str, key: &str) -> Vec<String> {
    text.lines().filter_map(key_value).filter(|(_, k, _)| *k == key).map(|(_, _, v)| scalar(v)).collect()
}

/// The one value of `key` in `text`.
fn value(text: &str, key: &str, what: &str) -> String {
    let found = values(text, key);
    assert_eq!(found.len(), 1, "{what}: expected one `{key}:`, found {found:?}");
    found.into_iter().next().unwrap()
}

/// The items of the sequence that is the value of `key:` (at `column`) on line `at`: a flow sequence on that line,
/// or the `- item` lines that follow, at the key's column or deeper (plain, quoted or block scalars).
fn sequence_at(lines: &[&str], at: usize, column: usize, value: &str) -> Vec<String> {
    if let Some(flow) = value.strip_prefix('[') {
        let flow = flow.split(']').next().unwrap();
        return flow.split(',').map(scalar).filter(|item| !item.is_empty()).collect();
    }
    assert!(value.is_empty(), "line {}: expected a sequence, found {value:?}", at + 1);
    let content = |line: &str| !line.trim().is_empty() && !line.trim_start().starts_with('#');
    let Some(first) = lines[at + 1..].iter().find(|line| content(line)) else { return Vec::new() };
    let items_column = indent(first);
    if items_column < column || !first.trim_start().starts_with("- ") {
        return Vec::new();
    }
    let mut items = Vec::new();
    for (i, line) in lines.iter().enumerate().skip(at + 1).filter(|(_, line)| content(line)) {
        let item = line.trim_start().strip_prefix("- ");
        if indent(line) < items_column || (indent(line) == items_column && item.is_none()) {
            break;
        }
        if let Some(item) = item.filter(|_| indent(line) == items_column) {
            let item = item.trim();
            let text = scalar_at(lines, i, items_column, item);
            items.push(if item.starts_with('|') || item.starts_with('>') { text } else { scalar(&text) });
        }
    }
    items
}

// ---- the GitHub Actions workflow ----

/// Every `run:` script of the workflow.
fn workflow_scripts(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut scripts = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some((column, "run", value)) = key_value(line) {
            scripts.push(scalar_at(&lines, i, column, value));
        }
    }
    scripts
}

/// The workflow's top-level `env:` (`$NAME` in its scripts).
fn workflow_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .skip_while(|line| *line != "env:")
        .skip(1)
        .take_while(|line| line.trim().is_empty() || line.starts_with(' '))
        .filter_map(key_value)
        .map(|(_, key, value)| (key.to_owned(), scalar(value)))
        .collect()
}

/// `$NAME` and `${NAME}` replaced from `env`.
fn expand(word: &str, env: &BTreeMap<String, String>) -> String {
    let mut word = word.to_owned();
    for (name, value) in env {
        word = word.replace(&format!("${{{name}}}"), value).replace(&format!("${name}"), value);
    }
    word
}

/// Every `fleetsim` the scripts run, each checked against the command line; `required` must be among them.
fn invocations(file: &str, scripts: &[String], required: &[&[&str]]) -> Vec<Invocation> {
    let found: Vec<Invocation> = scripts
        .iter()
        .flat_map(|script| fleetsim_commands(script))
        .map(|words| check_invocation(file, &words))
        .collect();
    for path in required {
        assert!(found.iter().any(|inv| inv.is(path)), "{file}: no `fleetsim {}` found in {found:?}", path.join(" "));
    }
    found
}

/// The campaign and policy files the manifests name exist and are valid.
fn check_files(file: &str, paths: &[&str]) {
    let absolute: Vec<String> = paths.iter().map(|path| root().join(path).display().to_string()).collect();
    let mut args = vec!["check"];
    args.extend(absolute.iter().map(String::as_str));
    let (code, out, err) = fleetsim(&args);
    assert_eq!(code, EXIT_PASS, "{file}: fleetsim check {paths:?}: {out}{err}");
}

/// The one gate invocation judges the report the merge wrote, with the release-gate policy.
fn check_merge_then_gate(file: &str, found: &[Invocation]) {
    let merge = found.iter().find(|inv| inv.is(&["report", "merge"])).unwrap();
    let gate: Vec<&Invocation> = found.iter().filter(|inv| inv.is(&["gate"])).collect();
    assert_eq!(gate.len(), 1, "{file}: one gate");
    let merged = merge.value("-o").or_else(|| merge.value("--output")).expect("report merge -o FILE");
    assert_eq!(gate[0].positionals().first().copied(), Some(merged), "{file}: the gate judges the merged report");
    assert_eq!(gate[0].value("--policy"), Some(POLICY), "{file}: the release-gate policy");
}

#[test]
fn the_workflow_runs_existing_commands_and_a_shard_per_matrix_entry() {
    let text = read(WORKFLOW);
    let env = workflow_env(&text);
    let scripts = workflow_scripts(&text);
    let found = invocations(WORKFLOW, &scripts, &[&["campaign"], &["report", "merge"], &["gate"]]);

    let shards: u64 = env["SHARDS"].parse().expect("env SHARDS is a number");
    let matrix: Vec<u64> = values(&text, "shard")
        .iter()
        .find_map(|value| value.strip_prefix('['))
        .expect("a `shard: [...]` matrix")
        .trim_end_matches(']')
        .split(',')
        .map(|k| k.trim().parse().unwrap())
        .collect();
    assert_eq!(matrix, (1..=shards).collect::<Vec<_>>(), "{WORKFLOW}: the matrix is the shards 1..=SHARDS");

    let campaigns: Vec<&Invocation> = found.iter().filter(|inv| inv.is(&["campaign"])).collect();
    assert_eq!(campaigns.len(), 1, "{WORKFLOW}: one campaign command, the same on every shard");
    let campaign = campaigns[0];
    let shard = expand(campaign.value("--shard").expect("--shard K/N"), &env);
    assert_eq!(shard, format!("${{{{ matrix.shard }}}}/{shards}"), "{WORKFLOW}: --shard is the matrix entry of SHARDS");
    assert!(campaign.has("--resume") && campaign.has("--out") && campaign.has("--runs"), "{campaign:?}");
    let script = scripts.iter().find(|script| script.contains(" campaign ")).unwrap();
    assert!(script.contains("|| test $? -eq 1"), "{WORKFLOW}: a failing run (exit 1) keeps the report: {script}");

    let campaign_file = expand(campaign.positionals()[0], &env);
    check_files(WORKFLOW, &[&campaign_file, POLICY]);
    check_merge_then_gate(WORKFLOW, &found);
}

// ---- the Kubernetes manifest ----

/// One document of the multi-document manifest, with the argv of each of its containers.
#[derive(Debug)]
struct Document {
    kind: String,
    name: String,
    text: String,
    containers: Vec<Vec<String>>,
}

fn documents(text: &str) -> Vec<Document> {
    text.split("\n---\n")
        .map(|doc| {
            let lines: Vec<&str> = doc.lines().collect();
            let mut containers: Vec<Vec<String>> = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                if let Some((column, key @ ("command" | "args"), value)) = key_value(line) {
                    let items = sequence_at(&lines, i, column, value);
                    if key == "command" || containers.is_empty() {
                        containers.push(items);
                    } else {
                        containers.last_mut().unwrap().extend(items);
                    }
                }
            }
            let name = doc.lines().skip_while(|line| *line != "metadata:").find_map(|line| {
                key_value(line).filter(|(column, key, _)| *column == 2 && *key == "name").map(|(_, _, v)| scalar(v))
            });
            Document {
                kind: value(doc, "kind", "a document"),
                name: name.expect("metadata.name"),
                text: doc.to_owned(),
                containers,
            }
        })
        .collect()
}

/// The scripts a container runs: `sh -c SCRIPT` or `bash -c SCRIPT`, or its argv itself as one command line.
fn container_scripts(argv: &[String]) -> Vec<String> {
    let shell = argv.first().is_some_and(|p| p.ends_with("sh")) && argv.get(1).is_some_and(|flag| flag == "-c");
    if shell {
        vec![argv[2].clone()]
    } else {
        vec![argv.iter().map(|word| format!("'{word}'")).collect::<Vec<_>>().join(" ")]
    }
}

#[test]
fn the_kubernetes_job_is_indexed_and_its_index_is_the_shard() {
    let text = read(KUBERNETES);
    let docs = documents(&text);
    let kinds: Vec<&str> = docs.iter().map(|doc| doc.kind.as_str()).collect();
    assert_eq!(kinds, ["PersistentVolumeClaim", "Job", "Job"], "{KUBERNETES}");
    let claim = &docs[0].name;
    let (shards_job, gate_job) = (&docs[1], &docs[2]);

    for job in [shards_job, gate_job] {
        assert_eq!(value(&job.text, "apiVersion", &job.name), "batch/v1");
        assert_eq!(&value(&job.text, "claimName", &job.name), claim, "{}: results on the claim", job.name);
        assert_eq!(job.containers.len(), 1, "{}: one container: {:?}", job.name, job.containers);
        assert_eq!(value(&job.text, "restartPolicy", &job.name), "Never");
    }
    assert_eq!(
        value(&shards_job.text, "image", &shards_job.name),
        value(&gate_job.text, "image", &gate_job.name),
        "one build: the gate replays runs with the binary that wrote them"
    );
    let mount = value(&shards_job.text, "mountPath", &shards_job.name);
    assert_eq!(mount, value(&gate_job.text, "mountPath", &gate_job.name));

    // The shards: an Indexed Job whose index is the shard and whose completions are the shard count.
    assert_eq!(value(&shards_job.text, "completionMode", &shards_job.name), "Indexed");
    let completions: u64 = value(&shards_job.text, "completions", &shards_job.name).parse().unwrap();
    let parallelism: u64 = value(&shards_job.text, "parallelism", &shards_job.name).parse().unwrap();
    assert!((1..=completions).contains(&parallelism), "parallelism {parallelism} of {completions}");
    let scripts = container_scripts(&shards_job.containers[0]);
    let found = invocations(KUBERNETES, &scripts, &[&["campaign"]]);
    let campaign = found.iter().find(|inv| inv.is(&["campaign"])).unwrap();
    let shard = campaign.value("--shard").expect("--shard K/N").replace(' ', "");
    let (k, n) = shard.rsplit_once('/').unwrap();
    assert_eq!(k, "$((JOB_COMPLETION_INDEX+1))", "{KUBERNETES}: K is the pod's index + 1 (shards count from 1)");
    assert_eq!(n.parse::<u64>().ok(), Some(completions), "{KUBERNETES}: --shard {shard} against completions");
    let out = campaign.value("--out").expect("--out DIR");
    assert!(out.starts_with(&format!("{mount}/")) && out.contains("JOB_COMPLETION_INDEX"), "a directory per shard");
    assert!(campaign.has("--resume"), "a retried pod resumes from the volume");
    assert!(scripts[0].contains("-eq 1"), "a failing run (exit 1) keeps the pod and its report: {}", scripts[0]);

    // The merge-and-gate Job: created suspended, started once the shards are complete, over their reports.
    assert_eq!(value(&gate_job.text, "suspend", &gate_job.name), "true", "{}: started after the shards", gate_job.name);
    let found =
        invocations(KUBERNETES, &container_scripts(&gate_job.containers[0]), &[&["report", "merge"], &["gate"]]);
    let merge = found.iter().find(|inv| inv.is(&["report", "merge"])).unwrap();
    let inputs: Vec<&str> = merge.positionals().into_iter().filter(|arg| arg.ends_with("report.json")).collect();
    let shard_dir = out.split("$((").next().unwrap();
    assert!(inputs.iter().any(|input| input.starts_with(shard_dir)), "merges the shards' reports: {inputs:?}");
    check_merge_then_gate(KUBERNETES, &found);
    check_files(KUBERNETES, &[campaign.positionals()[0], POLICY]);
}

#[test]
fn scripts_split_like_a_shell() {
    let script = "K=1 ./fleetsim campaign \"$C\" --shard \"$((I + 1))/4\" --out ${{ x }} || test $? -eq 1 # c\n\
                  if fleetsim gate r.json --policy 'p q'; then echo ok >> \"$F\"; fi\n\
                  fleetsim report a \\\n  --format md 2>/dev/null | tee out; chmod +x fleetsim";
    let found = fleetsim_commands(script);
    assert_eq!(
        found,
        [
            vec!["campaign", "$C", "--shard", "$((I + 1))/4", "--out", "${{ x }}"],
            vec!["gate", "r.json", "--policy", "p q"],
            vec!["report", "a", "--format", "md"],
        ]
    );
    let campaign = help(&["campaign".to_owned()]);
    assert!(flags(&campaign).is_superset(&BTreeSet::from(["--shard".to_owned(), "--resume".to_owned()])));
    assert!(subcommands(&help(&["report".to_owned()])).contains("merge"));
}
