//! The seed tree: one `u64` per run feeds one ChaCha8 generator; every consumer gets its own ChaCha *stream* of that
//! key, so no two consumers can ever draw from the same stream, and adding a consumer never shifts another's draws.
//!
//! Stream ids, in the documented order (`docs/ARCHITECTURE.md`, "Determinism"):
//! 1 network, 2 hub, 3 fault plan, 4 engine jitter, 5 campaign run seeds, 6 the MAAS site (its fakes' seed: system
//! ids, hardware, BMC passwords, bootstrap tokens), 7 site faults (the seed of each `mac_drift`, drawn in plan order),
//! 8 the hub's credentials (one draw seeds the successor tokens its rotations mint), 1_000_000 + i node i (1-based).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Who draws from a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Consumer {
    Network,
    Hub,
    FaultPlan,
    EngineJitter,
    CampaignRuns,
    /// The MAAS site of an onboarding run: one draw seeds `fakes::maas::Site`.
    Site,
    /// The site's faults: one draw per `mac_drift` step, in the order the plan applies them.
    SiteFaults,
    /// The hub's credentials: one draw seeds the successor tokens its agent-credential rotations mint.
    HubCredentials,
    /// A node's fakes (agent phase, later its MAAS machine and BMC), 1-based like the host names.
    Node(u32),
}

impl Consumer {
    pub fn stream_id(self) -> u64 {
        match self {
            Consumer::Network => 1,
            Consumer::Hub => 2,
            Consumer::FaultPlan => 3,
            Consumer::EngineJitter => 4,
            Consumer::CampaignRuns => 5,
            Consumer::Site => 6,
            Consumer::SiteFaults => 7,
            Consumer::HubCredentials => 8,
            Consumer::Node(index) => 1_000_000 + u64::from(index),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedTree {
    seed: u64,
}

impl SeedTree {
    pub fn new(seed: u64) -> SeedTree {
        SeedTree { seed }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The generator for one consumer: the run's key, on the consumer's own stream.
    pub fn rng(&self, consumer: Consumer) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(consumer.stream_id());
        rng
    }

    /// The seed of run `index` of a campaign whose seed is this tree's: the index-th word pair of the campaign-runs
    /// stream, so run K's seed does not depend on how many runs the campaign has or which shard computes it.
    pub fn campaign_run_seed(&self, index: u64) -> u64 {
        use rand::RngCore;
        let mut rng = self.rng(Consumer::CampaignRuns);
        rng.set_word_pos(u128::from(index) * 2);
        rng.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    fn first_words(mut rng: ChaCha8Rng) -> [u64; 4] {
        [rng.next_u64(), rng.next_u64(), rng.next_u64(), rng.next_u64()]
    }

    #[test]
    fn the_same_seed_gives_the_same_streams() {
        let a = SeedTree::new(42);
        let b = SeedTree::new(42);
        assert_eq!(first_words(a.rng(Consumer::Network)), first_words(b.rng(Consumer::Network)));
        assert_ne!(first_words(a.rng(Consumer::Network)), first_words(SeedTree::new(43).rng(Consumer::Network)));
    }

    #[test]
    fn campaign_run_seeds_are_indexed_not_sequential() {
        let tree = SeedTree::new(1);
        let seeds: Vec<u64> = (0..5).map(|i| tree.campaign_run_seed(i)).collect();
        assert_eq!(tree.campaign_run_seed(3), seeds[3], "run 3's seed is computed alone, as a shard would");
        let distinct: std::collections::BTreeSet<_> = seeds.iter().collect();
        assert_eq!(distinct.len(), 5);
    }

    proptest::proptest! {
        /// No two consumers are ever handed the same stream: their first draws differ for any seed.
        #[test]
        fn no_two_consumers_share_a_stream(seed in proptest::prelude::any::<u64>(), a in 0u32..200, b in 0u32..200) {
            let tree = SeedTree::new(seed);
            let fixed = [
                Consumer::Network,
                Consumer::Hub,
                Consumer::FaultPlan,
                Consumer::EngineJitter,
                Consumer::CampaignRuns,
                Consumer::Site,
                Consumer::SiteFaults,
                Consumer::HubCredentials,
            ];
            let mut consumers: Vec<Consumer> = fixed.to_vec();
            consumers.push(Consumer::Node(a));
            if a != b {
                consumers.push(Consumer::Node(b));
            }
            let mut seen = std::collections::BTreeSet::new();
            for consumer in consumers {
                proptest::prop_assert!(seen.insert(first_words(tree.rng(consumer))), "{consumer:?} repeats a stream");
            }
        }
    }
}
