//! The rolling-deployment controller of the 2026-09-21 RCCA (`seeds/003_65d56b75d2c60639.txt`): the synchronous
//! decisions — identity preflight (with its decoder of the canonical and historical identity forms), the node selection (skipped, quarantined, eligible, and the floor's say over
//! repairs), the dispatch holds' owners, lane planning with an availability floor and a duration budget, bounded
//! retry, the per-node state machine and lane verdicts, the all-selected account of every node, and the journal that lets a new controller adopt a dead one's
//! rollout. [`driver`] runs them against the `Ssh`, `Hub`, `Journal`, `Clock`, `Signals`, `Jitter`, `Secrets` and
//! `Artifacts` ports,
//! asking [`rules::Rules`] for each decision.

pub mod account;
pub mod decode;
pub mod driver;
pub mod gate;
pub mod holds;
pub mod identity;
pub mod journal;
pub mod lane;
pub mod plan;
pub mod preflight;
pub mod proof;
pub mod retry;
pub mod rules;
pub mod select;
pub mod storage;
