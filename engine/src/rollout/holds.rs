//! The dispatch holds a rollout places, named by their owner: which are this rollout's to release, and which belong
//! to someone else (an operator, another rollout) and are never touched.

/// The kinds of dispatch hold a rollout places, by owner prefix (RCCA "Every deployment-owned hold, successor
/// hold, and pre-existing operator hold is accounted for"): `deploy:` fences a node while its lane (or its repair)
/// runs and is released when it proves the successor; `quarantine:` keeps an incoherent node out of dispatch and is
/// never released by the rollout; `successor:` supersedes the authority of an untouched participant whose principal
/// is gone, so that the epoch can be aborted. Any other owner (an operator's) is never released by a rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldOwner {
    Deployment { rollout: String },
    Quarantine { rollout: String },
    Successor { rollout: String },
    Other { owner: String },
}

const DEPLOY_HOLD_PREFIX: &str = "deploy:";
const QUARANTINE_HOLD_PREFIX: &str = "quarantine:";
const SUCCESSOR_HOLD_PREFIX: &str = "successor:";

impl HoldOwner {
    pub fn parse(owner: &str) -> HoldOwner {
        let rollout = |prefix: &str| owner.strip_prefix(prefix).map(str::to_owned);
        if let Some(rollout) = rollout(DEPLOY_HOLD_PREFIX) {
            HoldOwner::Deployment { rollout }
        } else if let Some(rollout) = rollout(QUARANTINE_HOLD_PREFIX) {
            HoldOwner::Quarantine { rollout }
        } else if let Some(rollout) = rollout(SUCCESSOR_HOLD_PREFIX) {
            HoldOwner::Successor { rollout }
        } else {
            HoldOwner::Other { owner: owner.to_owned() }
        }
    }

    /// Whether `rollout` placed this hold.
    pub fn is_owned_by(&self, rollout: &str) -> bool {
        match self {
            HoldOwner::Deployment { rollout: owner }
            | HoldOwner::Quarantine { rollout: owner }
            | HoldOwner::Successor { rollout: owner } => owner == rollout,
            HoldOwner::Other { .. } => false,
        }
    }
}

impl std::fmt::Display for HoldOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HoldOwner::Deployment { rollout } => write!(f, "{DEPLOY_HOLD_PREFIX}{rollout}"),
            HoldOwner::Quarantine { rollout } => write!(f, "{QUARANTINE_HOLD_PREFIX}{rollout}"),
            HoldOwner::Successor { rollout } => write!(f, "{SUCCESSOR_HOLD_PREFIX}{rollout}"),
            HoldOwner::Other { owner } => f.write_str(owner),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_names_its_kind_and_rollout_and_reads_back_as_written() {
        let cases = [
            ("deploy:r1", HoldOwner::Deployment { rollout: "r1".into() }, true),
            ("quarantine:r1", HoldOwner::Quarantine { rollout: "r1".into() }, true),
            ("successor:r1", HoldOwner::Successor { rollout: "r1".into() }, true),
            ("deploy:r2", HoldOwner::Deployment { rollout: "r2".into() }, false),
            ("operator:alice", HoldOwner::Other { owner: "operator:alice".into() }, false),
        ];
        for (text, owner, ours) in cases {
            assert_eq!(HoldOwner::parse(text), owner, "{text}");
            assert_eq!(owner.is_owned_by("r1"), ours, "{text}");
            assert_eq!(owner.to_string(), text);
        }
    }
}
