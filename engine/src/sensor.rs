//! The instance-status sensor of the node runbook (`seeds/004_c1eb714c76320200.txt`, Phase 4): every 60 s it reads
//! the last heartbeats; an instance with no heartbeat for more than 3 minutes raises `instance_silent` once, and
//! `instance_recovered` when heartbeats return.
//!
//! [`SilenceSensor`] is the synchronous decision (snapshot in, signals out); [`run_instance_status_sensor`] is the
//! driver that awaits the `Clock`, `Hub` and `Journal` ports. The set of instances reported silent is journaled, so a
//! restarted controller neither forgets to report a recovery nor repeats a silence it already raised.

use std::collections::BTreeSet;

use crate::ports::{Clock, HeartbeatSnapshot, Hub, Journal, Signal, Signals};

const JOURNAL_SILENT: &str = "sensor.silent ";
const JOURNAL_RECOVERED: &str = "sensor.recovered ";

/// `InstanceStatusSensor::SILENT_THRESHOLD = 3.minutes`.
pub const SILENT_THRESHOLD_MS: u64 = 180_000;
/// The sensor runs every 60 s.
pub const SENSOR_PERIOD_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SensorConfig {
    pub period_ms: u64,
    pub silent_threshold_ms: u64,
}

impl Default for SensorConfig {
    fn default() -> Self {
        SensorConfig { period_ms: SENSOR_PERIOD_MS, silent_threshold_ms: SILENT_THRESHOLD_MS }
    }
}

/// The sensor's memory: which instances it has reported silent and not yet recovered.
#[derive(Debug, Clone, Default)]
pub struct SilenceSensor {
    silent_threshold_ms: u64,
    silent: BTreeSet<String>,
}

impl SilenceSensor {
    pub fn new(silent_threshold_ms: u64) -> SilenceSensor {
        SilenceSensor { silent_threshold_ms, silent: BTreeSet::new() }
    }

    pub fn silent_instances(&self) -> impl Iterator<Item = &str> {
        self.silent.iter().map(String::as_str)
    }

    /// Rebuilds the sensor from its journal records (other records are ignored).
    pub fn replay<'a>(silent_threshold_ms: u64, records: impl IntoIterator<Item = &'a str>) -> SilenceSensor {
        let mut sensor = SilenceSensor::new(silent_threshold_ms);
        for record in records {
            if let Some(instance) = record.strip_prefix(JOURNAL_SILENT) {
                sensor.silent.insert(instance.to_owned());
            } else if let Some(instance) = record.strip_prefix(JOURNAL_RECOVERED) {
                sensor.silent.remove(instance);
            }
        }
        sensor
    }

    /// The journal record that makes `signal` survive a restart.
    pub fn journal_record(signal: &Signal) -> Option<String> {
        match signal {
            Signal::InstanceSilent { instance, .. } => Some(format!("{JOURNAL_SILENT}{instance}")),
            Signal::InstanceRecovered { instance, .. } => Some(format!("{JOURNAL_RECOVERED}{instance}")),
            Signal::HubReadFailed { .. }
            | Signal::Rollout { .. }
            | Signal::Onboarding { .. }
            | Signal::Decommission { .. }
            | Signal::Rotation { .. } => None,
        }
    }

    /// Compares each instance's last heartbeat with the hub's own clock and returns the signals to raise, in
    /// instance order. Each silence is raised once; recovery is raised once when heartbeats are fresh again.
    pub fn handle_snapshot(&mut self, snapshot: &HeartbeatSnapshot) -> Vec<Signal> {
        let mut signals = Vec::new();
        for row in &snapshot.instances {
            let silent_for_ms = snapshot.hub_now_ms.saturating_sub(row.last_heartbeat_ms);
            let silent_now = silent_for_ms > self.silent_threshold_ms;
            let reported = self.silent.contains(&row.instance);
            if silent_now && !reported {
                self.silent.insert(row.instance.clone());
                signals.push(Signal::InstanceSilent { instance: row.instance.clone(), silent_for_ms });
            } else if !silent_now && reported {
                self.silent.remove(&row.instance);
                signals.push(Signal::InstanceRecovered { instance: row.instance.clone(), silent_for_ms });
            }
        }
        signals
    }
}

/// Runs the sensor forever: replay the journal, then read the hub every period of the monotonic clock and raise what
/// the snapshot shows. A signal is emitted before it is journaled: after a crash between the two, the restarted sensor
/// raises it again (at least once), rather than never.
pub async fn run_instance_status_sensor<C: Clock, H: Hub, S: Signals, J: Journal>(
    clock: &C,
    hub: &H,
    signals: &S,
    journal: &J,
    config: SensorConfig,
) {
    let records = match journal.replay().await {
        Ok(records) => records,
        Err(error) => {
            tracing::error!(%error, "instance status sensor starts without its journal");
            Vec::new()
        }
    };
    let mut sensor = SilenceSensor::replay(config.silent_threshold_ms, records.iter().map(String::as_str));
    let mut next_tick_ms = clock.monotonic_ms();
    loop {
        let now_ms = clock.monotonic_ms();
        if next_tick_ms > now_ms {
            clock.sleep_ms(next_tick_ms - now_ms).await;
        }
        match hub.read_heartbeats().await {
            Ok(snapshot) => {
                for signal in sensor.handle_snapshot(&snapshot) {
                    tracing::info!(?signal, "instance status changed");
                    let record = SilenceSensor::journal_record(&signal);
                    signals.emit(signal);
                    if let Some(record) = record {
                        if let Err(error) = journal.append(&record).await {
                            tracing::error!(%error, "instance status not journaled; a restart will raise it again");
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "instance status sensor could not read the hub");
                signals.emit(Signal::HubReadFailed { error });
            }
        }
        // Ticks stay on the period grid even when a read is slow, so detection latency stays bounded by one period.
        let now_ms = clock.monotonic_ms();
        while next_tick_ms <= now_ms {
            next_tick_ms += config.period_ms;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::InstanceHeartbeat;

    fn snapshot(now: u64, rows: &[(&str, u64)]) -> HeartbeatSnapshot {
        HeartbeatSnapshot {
            hub_now_ms: now,
            instances: rows
                .iter()
                .map(|(name, last)| InstanceHeartbeat {
                    instance: (*name).into(),
                    last_heartbeat_ms: *last,
                    registered: true,
                    revision: None,
                })
                .collect(),
        }
    }

    #[test]
    fn silence_is_raised_once_past_the_threshold_and_recovery_once_when_heartbeats_return() {
        let mut sensor = SilenceSensor::new(SILENT_THRESHOLD_MS);
        assert!(
            sensor.handle_snapshot(&snapshot(180_000, &[("a", 0)])).is_empty(),
            "exactly 3 min is not more than 3 min"
        );
        let raised = sensor.handle_snapshot(&snapshot(180_001, &[("a", 0), ("b", 170_000)]));
        assert_eq!(raised, vec![Signal::InstanceSilent { instance: "a".into(), silent_for_ms: 180_001 }]);
        assert!(sensor.handle_snapshot(&snapshot(240_000, &[("a", 0)])).is_empty(), "raised once per silence");
        let recovered = sensor.handle_snapshot(&snapshot(300_000, &[("a", 290_000)]));
        assert_eq!(recovered, vec![Signal::InstanceRecovered { instance: "a".into(), silent_for_ms: 10_000 }]);
        assert_eq!(sensor.silent_instances().count(), 0);
    }

    #[test]
    fn replaying_the_journal_restores_the_silent_set() {
        let mut sensor = SilenceSensor::new(SILENT_THRESHOLD_MS);
        let signals = sensor.handle_snapshot(&snapshot(400_000, &[("a", 0), ("b", 0), ("c", 399_000)]));
        let mut records: Vec<String> = signals.iter().filter_map(SilenceSensor::journal_record).collect();
        let recovered = sensor.handle_snapshot(&snapshot(500_000, &[("a", 490_000), ("b", 0)]));
        records.extend(recovered.iter().filter_map(SilenceSensor::journal_record));
        records.push("rollout.intent node-1".into());
        let mut restarted = SilenceSensor::replay(SILENT_THRESHOLD_MS, records.iter().map(String::as_str));
        assert_eq!(restarted.silent_instances().collect::<Vec<_>>(), ["b"]);
        assert!(restarted.handle_snapshot(&snapshot(600_000, &[("b", 0)])).is_empty(), "b is not raised twice");
    }

    proptest::proptest! {
        /// Whatever the sequence of snapshots, signals for one instance alternate silent/recovered, starting silent,
        /// and a silence is raised only when the hub's own clock shows more than the threshold.
        #[test]
        fn signals_alternate_and_are_justified(steps in proptest::collection::vec((0u64..400_000, 0u64..400_000), 1..40)) {
            let mut sensor = SilenceSensor::new(SILENT_THRESHOLD_MS);
            let mut last_was_silent = false;
            for (now, age) in steps {
                let last = now.saturating_sub(age);
                for signal in sensor.handle_snapshot(&snapshot(now, &[("x", last)])) {
                    match signal {
                        Signal::InstanceSilent { silent_for_ms, .. } => {
                            proptest::prop_assert!(!last_was_silent);
                            proptest::prop_assert!(silent_for_ms > SILENT_THRESHOLD_MS);
                            last_was_silent = true;
                        }
                        Signal::InstanceRecovered { silent_for_ms, .. } => {
                            proptest::prop_assert!(last_was_silent);
                            proptest::prop_assert!(silent_for_ms <= SILENT_THRESHOLD_MS);
                            last_was_silent = false;
                        }
                        Signal::HubReadFailed { .. }
            | Signal::Rollout { .. }
            | Signal::Onboarding { .. }
            | Signal::Decommission { .. }
            | Signal::Rotation { .. } => {
                            proptest::prop_assert!(false, "only silence signals here")
                        }
                    }
                }
            }
        }
    }
}
