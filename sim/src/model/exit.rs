//! The exit codes of `fleetsim`, one definition for every subcommand (the CLI, `serve`, `drive`, `shrink`); the
//! CLI's `--help` and `docs/formats.md` document them.

/// The run, campaign, check or action passed.
pub const EXIT_PASS: i32 = 0;
/// A run or campaign failed; `diff`: the traces differ; `gate`: a threshold is unmet; `repro`: the replay differs.
pub const EXIT_FAIL: i32 = 1;
/// Bad input: a file that does not read, parse or validate, or a bad command line.
pub const EXIT_BAD_INPUT: i32 = 2;
/// An output could not be written.
pub const EXIT_OUTPUT_ERROR: i32 = 3;
