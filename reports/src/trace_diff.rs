//! The first divergence between two traces (`trace.jsonl`, one JSON event a line), as madsim's determinism check
//! reports it: where two runs that should be equal stop being equal, with a few lines of context from both.
//!
//! Pure functions over the files' text; reading the files and choosing the exit code is the CLI's job.

use std::fmt::Write as _;

/// Lines of common context shown before the first divergence.
pub const CONTEXT_BEFORE: usize = 3;
/// Lines shown from each trace from the first divergence on.
pub const CONTEXT_AFTER: usize = 3;
/// Context lines longer than this are cut (the divergent lines themselves are shown whole).
const CONTEXT_CHARS_MAX: usize = 160;

/// Why a file is not a trace. Displays as one line without the file name; the caller prefixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotATrace {
    Empty,
    /// A 1-based line that is not one JSON object.
    BadLine {
        line: usize,
        reason: String,
    },
}

impl std::fmt::Display for NotATrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotATrace::Empty => write!(f, "empty file: a trace has at least its run.start event"),
            NotATrace::BadLine { line, reason } => {
                write!(f, "line {line} is not a trace event ({reason}): a trace.jsonl has one JSON object a line")
            }
        }
    }
}

/// Checks that `text` is a trace (every line a JSON object) and returns its lines.
pub fn trace_lines(text: &str) -> Result<Vec<&str>, NotATrace> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return Err(NotATrace::Empty);
    }
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(_) => return Err(NotATrace::BadLine { line: index + 1, reason: "not an object".to_owned() }),
            Err(error) => return Err(NotATrace::BadLine { line: index + 1, reason: error.to_string() }),
        }
    }
    Ok(lines)
}

/// The outcome of comparing two traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceDiff {
    Identical {
        events: usize,
    },
    /// The traces agree on lines `1..line` and differ at `line` (1-based); one of them may have ended there.
    Diverged {
        line: usize,
    },
}

/// Compares two traces line by line.
pub fn compare(a: &[&str], b: &[&str]) -> TraceDiff {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(index) => TraceDiff::Diverged { line: index + 1 },
        None if a.len() == b.len() => TraceDiff::Identical { events: a.len() },
        None => TraceDiff::Diverged { line: a.len().min(b.len()) + 1 },
    }
}

fn clipped(line: &str) -> String {
    if line.chars().count() <= CONTEXT_CHARS_MAX {
        line.to_owned()
    } else {
        let mut text: String = line.chars().take(CONTEXT_CHARS_MAX - 1).collect();
        text.push('…');
        text
    }
}

/// The top-level keys whose values differ between two event lines, when both are JSON objects.
fn differing_keys(a: &str, b: &str) -> Vec<String> {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::from_str::<serde_json::Value>(a), serde_json::from_str::<serde_json::Value>(b))
    else {
        return Vec::new();
    };
    let mut keys: Vec<String> = a.keys().chain(b.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|key| a.get(key) != b.get(key))
        .map(|key| match (a.get(&key), b.get(&key)) {
            (Some(x), Some(y)) if !x.is_object() && !y.is_object() => format!("{key} ({x} vs {y})"),
            (Some(_), Some(_)) => key,
            (Some(_), None) => format!("{key} (only in a)"),
            (None, Some(_)) => format!("{key} (only in b)"),
            (None, None) => key,
        })
        .collect()
}

/// Renders the comparison of trace `a` (named `name_a`) with trace `b` for a terminal.
pub fn render(name_a: &str, a: &[&str], name_b: &str, b: &[&str]) -> String {
    let line = match compare(a, b) {
        TraceDiff::Identical { events } => return format!("identical ({events} events)\n"),
        TraceDiff::Diverged { line } => line,
    };
    let mut text = String::new();
    let _ = writeln!(text, "traces differ: first divergence at line {line}");
    let _ = writeln!(text, "  a  {name_a} ({} events)", a.len());
    let _ = writeln!(text, "  b  {name_b} ({} events)", b.len());
    let width = (line + CONTEXT_AFTER).to_string().len();
    let start = line.saturating_sub(CONTEXT_BEFORE).max(1);
    for number in start..line {
        let _ = writeln!(text, "     {number:>width$}  {}", clipped(a[number - 1]));
    }
    for (label, name, lines) in [("a", name_a, a), ("b", name_b, b)] {
        if line > lines.len() {
            let _ = writeln!(text, "  {label}  {:>width$}  (end of trace: {name} has {} events)", line, lines.len());
            continue;
        }
        for number in line..(line + CONTEXT_AFTER).min(lines.len() + 1) {
            let shown = if number == line { lines[number - 1].to_owned() } else { clipped(lines[number - 1]) };
            let _ = writeln!(text, "  {label}  {number:>width$}  {shown}");
        }
    }
    if line <= a.len() && line <= b.len() {
        let keys = differing_keys(a[line - 1], b[line - 1]);
        if !keys.is_empty() {
            let _ = writeln!(text, "  differs in: {}", keys.join(", "));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"{"t_ms":0,"host":"sim","kind":"run.start","seed":1}
{"t_ms":10,"host":"hub","kind":"hub.registered","agent":"node-01"}
{"t_ms":20,"host":"hub","kind":"hub.heartbeat","agent":"node-01"}
{"t_ms":30,"host":"hub","kind":"hub.heartbeat","agent":"node-02"}
{"t_ms":40,"host":"hub","kind":"hub.heartbeat","agent":"node-03"}
"#;

    fn lines(text: &str) -> Vec<&str> {
        trace_lines(text).unwrap()
    }

    #[test]
    fn equal_traces_are_identical_with_their_event_count() {
        assert_eq!(compare(&lines(A), &lines(A)), TraceDiff::Identical { events: 5 });
        assert_eq!(render("a", &lines(A), "b", &lines(A)), "identical (5 events)\n");
    }

    #[test]
    fn the_first_divergent_line_is_shown_from_both_with_context_and_the_keys_that_differ() {
        let b = A.replace(
            r#""t_ms":30,"host":"hub","kind":"hub.heartbeat","agent":"node-02""#,
            r#""t_ms":31,"host":"hub","kind":"hub.heartbeat","agent":"node-02""#,
        );
        insta::assert_snapshot!(render("run1/trace.jsonl", &lines(A), "run2/trace.jsonl", &lines(&b)));
    }

    #[test]
    fn a_trace_that_is_a_prefix_of_the_other_diverges_where_it_ends() {
        let short: Vec<&str> = lines(A)[..3].to_vec();
        assert_eq!(compare(&short, &lines(A)), TraceDiff::Diverged { line: 4 });
        insta::assert_snapshot!(render("short.jsonl", &short, "long.jsonl", &lines(A)));
    }

    #[test]
    fn files_that_are_not_traces_are_refused_with_the_line() {
        assert_eq!(trace_lines(""), Err(NotATrace::Empty));
        let error = trace_lines("{\"t_ms\":0}\nnot json\n").unwrap_err();
        assert!(matches!(error, NotATrace::BadLine { line: 2, .. }), "{error}");
        assert_eq!(
            trace_lines("[1]\n").unwrap_err().to_string(),
            "line 1 is not a trace event (not an object): a trace.jsonl has one JSON object a line"
        );
    }
}
