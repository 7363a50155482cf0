//! Logs for people, through `tracing` (`RUST_LOG` chooses the level, default `error`: simulated faults make the engine
//! warn constantly), stamped with the virtual time of
//! the run executing on the thread. Logs are separate from the trace: they are never digested.
//!
//! Every log line, and every line a live command prints through [`Redacting`], is redacted before it is written: a
//! word carrying the credential marker, and every credential value the process knows (`engine::secret::redact`; the
//! live commands remember theirs), reads `[redacted]`.

use std::fmt;
use std::io::Write;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

thread_local! {
    /// Virtual-time origin of the run executing on this thread, for log timestamps (the runner sets and clears it).
    pub(crate) static RUN_START: std::cell::RefCell<Option<tokio::time::Instant>> = const { std::cell::RefCell::new(None) };
}

/// Prints `t=+<virtual ms>ms` inside a simulated run and `t=-` outside one.
struct VirtualTime;

impl FormatTime for VirtualTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let start = RUN_START.with(|cell| *cell.borrow());
        match start {
            Some(start) => write!(w, "t=+{}ms", tokio::time::Instant::now().duration_since(start).as_millis()),
            None => write!(w, "t=-"),
        }
    }
}

/// Installs the log subscriber on stderr. Safe to call more than once.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(VirtualTime)
        .with_writer(|| Redacting::new(std::io::stderr()))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// A writer that redacts credentials line by line: whole lines are held until their newline (or a flush, or the
/// writer's end), so a credential split over two writes is still seen whole.
pub struct Redacting<W: Write> {
    inner: W,
    line: Vec<u8>,
}

impl<W: Write> Redacting<W> {
    pub fn new(inner: W) -> Redacting<W> {
        Redacting { inner, line: Vec::new() }
    }

    fn emit(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(bytes);
        self.inner.write_all(engine::secret::redact(&text).as_bytes())
    }
}

impl<W: Write> Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        if let Some(end) = self.line.iter().rposition(|byte| *byte == b'\n') {
            let lines: Vec<u8> = self.line.drain(..=end).collect();
            self.emit(&lines)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.line);
        if !rest.is_empty() {
            self.emit(&rest)?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Redacting<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_split_over_writes_is_redacted_whole() {
        let mut written = Vec::new();
        {
            let mut out = Redacting::new(&mut written);
            write!(out, "refused: fleetsim-secret-").unwrap();
            write!(out, "abc123 by alice\nnext line fleetsim-secret-z").unwrap();
        }
        assert_eq!(String::from_utf8(written).unwrap(), "refused: [redacted] by alice\nnext line [redacted]");
    }
}
