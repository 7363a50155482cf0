//! The decommission workflow of the recovery matrix (`seeds/000_85d03426b210b2a0.txt`, section 5): a node taken out
//! of the fleet, `active` → `quarantined` (disabled, no new work) → `retired` → `deleted`. [`stages`] walks its 11
//! stages, [`record`] is its journal, [`judge`] judges what the ports answered (pure), and [`driver`] runs the stages
//! against the ports; the decision after a failed stage is the workflow core's ([`crate::workflow::decide`]), shared
//! with onboarding.
//!
//! - **Refresh before destructive steps** (section 7): the release, the power-off and the delete each read the
//!   machine first, and a stage whose effect is already there is adopted (a late success, an operator's change): a
//!   rerun after a stop or a controller death walks the stages again and redoes nothing that is done.
//! - `release_maas_node` releases with disk erase; after its bounded retries it falls back, once and only if the
//!   site's policy allows, to abort / mark-fixed and a release without erase.
//! - `remove_maas_record` deletes the MAAS record only when the site's policy requires it; otherwise the workflow
//!   completes with a follow-up record naming the retained machine.
//! - **Journal**: a checkpoint per stage attempt (workflow id, run id, stage, attempt), the stop or the completion.
//! - **References** (RCCA replacement plan): a run that begins at `disable_node` first reads what references the
//!   worker — open epochs, holds, its task lease at the hub, a non-terminal rollout in the controller's journal —
//!   and [`references`] refuses it when anything does (or when that cannot be read), before any mutation.

pub mod driver;
pub mod judge;
pub mod record;
pub mod references;
pub mod stages;
