//! The fake SSH endpoint of one host (each worker, and the hub host): its host-key identity, its storage health and
//! the typed operations a deployment runs over it (`seeds/003_65d56b75d2c60639.txt`: endpoint identity, atomic
//! owner-only writes with fsync, pre-staged capsules, journal operation ids, non-returning storage).
//!
//! The endpoint executes and records; it never judges. Whether an operation was allowed by the deployment protocol
//! (a fetch after quiescence, an install on a running worker, a replay of an operation id) is for the oracles to read
//! from [`SshEndpoint::ops_log`] and the events.
//!
//! Order of checks for every operation: endpoint identity, then the operation's own reads (lstat of the path, the
//! staged set, the install), then storage. A careful remote writer looks before it writes, so an unsafe path is
//! refused even on a full or hung disk, and only an operation that got as far as writing meets the storage fault.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::artifacts::Capsule;
use crate::worker::{FileEntry, FileKind, FileStat, Installed, Observation, SERVICE_UNIT, ServiceState, Worker};

/// The health of the host's storage (RCCA: "make storage health an admission gate", "fence non-returning storage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Storage {
    Healthy,
    /// A write, fsync, rename or unlink never returns: the operation hangs with no effect, and the caller gets no
    /// answer, ever. Recoverable only by [`SshEndpoint::set_storage`] back to healthy; the hung call stays hung.
    NonReturning,
    /// No space left: operations that write data fail at once with no effect. Unlinking still works, as on a real
    /// full filesystem.
    Full,
}

/// One operation over SSH. Every operation that mutates carries the journal's `operation_id`.
#[derive(Clone, PartialEq, Eq)]
pub enum SshOp {
    /// The read-only preflight: every identity surface.
    Observe,
    ReadFile {
        path: String,
    },
    /// Write a temporary file, fsync it, rename it over `path` and fsync the directory: the result is a regular file
    /// with one link and exactly the given mode and owner. `content` may carry the attestation key; `Debug` redacts it.
    WriteFileAtomic {
        operation_id: String,
        path: String,
        content: String,
        mode: u32,
        owner: String,
    },
    Remove {
        operation_id: String,
        path: String,
    },
    StopService {
        operation_id: String,
    },
    StartService {
        operation_id: String,
    },
    ServiceStatus,
    /// Store a capsule the simulator fetched from the artifact store in the worker's local staging area.
    StageArtifact {
        operation_id: String,
        capsule: Capsule,
    },
    /// The storage admission probe: write a probe file in the staging area, fsync it, rename it into place, fsync the
    /// directory, remove it; report each check and the free space. Leaves nothing behind, so it is no mutation.
    ProbeStorage {
        operation_id: String,
    },
    /// Put back the install the last installer run replaced (it must be exactly `revision` at `generation`): source,
    /// venv, the release's signed manifest and the barrier, from the worker's own disk. Nothing is fetched.
    RestorePrevious {
        operation_id: String,
        revision: String,
        generation: u64,
    },
    /// Install source and venv for `revision` from staged capsules only, and pass the barrier at `generation`.
    RunInstaller {
        operation_id: String,
        revision: String,
        generation: u64,
        required_digests: Vec<String>,
        /// The frozen route bundle the generated runtime configuration names.
        route_digest: String,
    },
}

impl SshOp {
    /// The operation's name in records and events.
    pub fn kind(&self) -> &'static str {
        match self {
            SshOp::Observe => "observe",
            SshOp::ReadFile { .. } => "read_file",
            SshOp::WriteFileAtomic { .. } => "write_file_atomic",
            SshOp::Remove { .. } => "remove",
            SshOp::StopService { .. } => "stop_service",
            SshOp::StartService { .. } => "start_service",
            SshOp::ServiceStatus => "service_status",
            SshOp::StageArtifact { .. } => "stage_artifact",
            SshOp::ProbeStorage { .. } => "probe_storage",
            SshOp::RestorePrevious { .. } => "restore_previous",
            SshOp::RunInstaller { .. } => "run_installer",
        }
    }

    /// The journal operation id of a mutating operation; `None` for a read.
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            SshOp::Observe | SshOp::ReadFile { .. } | SshOp::ServiceStatus => None,
            SshOp::WriteFileAtomic { operation_id, .. }
            | SshOp::Remove { operation_id, .. }
            | SshOp::StopService { operation_id }
            | SshOp::StartService { operation_id }
            | SshOp::StageArtifact { operation_id, .. }
            | SshOp::ProbeStorage { operation_id }
            | SshOp::RestorePrevious { operation_id, .. }
            | SshOp::RunInstaller { operation_id, .. } => Some(operation_id),
        }
    }
}

impl std::fmt::Debug for SshOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SshOp::Observe => write!(f, "Observe"),
            SshOp::ReadFile { path } => write!(f, "ReadFile {{ path: {path:?} }}"),
            SshOp::WriteFileAtomic { operation_id, path, content, mode, owner } => write!(
                f,
                "WriteFileAtomic {{ operation_id: {operation_id:?}, path: {path:?}, content: [redacted; {} bytes], \
                 mode: {mode:#o}, owner: {owner:?} }}",
                content.len()
            ),
            SshOp::Remove { operation_id, path } => {
                write!(f, "Remove {{ operation_id: {operation_id:?}, path: {path:?} }}")
            }
            SshOp::StopService { operation_id } => write!(f, "StopService {{ operation_id: {operation_id:?} }}"),
            SshOp::StartService { operation_id } => write!(f, "StartService {{ operation_id: {operation_id:?} }}"),
            SshOp::ServiceStatus => write!(f, "ServiceStatus"),
            SshOp::StageArtifact { operation_id, capsule } => {
                write!(f, "StageArtifact {{ operation_id: {operation_id:?}, capsule: {capsule:?} }}")
            }
            SshOp::ProbeStorage { operation_id } => write!(f, "ProbeStorage {{ operation_id: {operation_id:?} }}"),
            SshOp::RestorePrevious { operation_id, revision, generation } => write!(
                f,
                "RestorePrevious {{ operation_id: {operation_id:?}, revision: {revision:?}, generation: {generation} }}"
            ),
            SshOp::RunInstaller { operation_id, revision, generation, required_digests, route_digest } => write!(
                f,
                "RunInstaller {{ operation_id: {operation_id:?}, revision: {revision:?}, generation: {generation}, \
                 required_digests: {required_digests:?}, route_digest: {route_digest:?} }}"
            ),
        }
    }
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshReply {
    /// Boxed: an observation is several times the size of every other answer.
    Observation(Box<Observation>),
    File(FileStat),
    Done,
    Status(ServiceState),
    Probe(StorageProbe),
}

/// Free space in a healthy worker's staging area: 64 GiB.
pub const HEALTHY_FREE_BYTES: u64 = 64 << 30;

/// One check of the storage probe: `None` when not attempted (an earlier one failed), else its result.
pub type ProbeCheck = Option<Result<(), String>>;

/// What the storage probe found, check by check, and the free space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageProbe {
    pub write: ProbeCheck,
    pub file_fsync: ProbeCheck,
    pub rename: ProbeCheck,
    pub dir_fsync: ProbeCheck,
    pub free_bytes: u64,
}

/// Errors an operation answers with. None carries file content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshError {
    /// The endpoint presented `presented`, not the host key the caller expected: the client refuses the connection
    /// and nothing runs.
    HostKeyMismatch {
        presented: String,
    },
    NoSuchFile {
        path: String,
    },
    /// The path is a symlink or a directory where a regular file must be replaced or removed.
    UnsafePath {
        path: String,
    },
    DiskFull,
    /// A capsule the installer needs is not staged; after the barrier nothing may be fetched, so the install stops.
    NotStaged {
        digest: String,
    },
    ServiceFailed {
        reason: String,
    },
    /// A restore found no kept install of that revision and generation (none kept, or another one).
    NothingToRestore {
        wanted: String,
    },
}

impl std::fmt::Display for SshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SshError::HostKeyMismatch { presented } => {
                write!(f, "host key mismatch: the endpoint presented {presented}")
            }
            SshError::NoSuchFile { path } => write!(f, "no such file {path}"),
            SshError::UnsafePath { path } => write!(f, "refusing unsafe path {path}: not a regular file"),
            SshError::DiskFull => write!(f, "no space left on device"),
            SshError::NotStaged { digest } => write!(f, "capsule {digest} is not staged"),
            SshError::ServiceFailed { reason } => write!(f, "{SERVICE_UNIT} failed: {reason}"),
            SshError::NothingToRestore { wanted } => write!(f, "no kept install of {wanted} to restore"),
        }
    }
}

impl std::error::Error for SshError {}

/// What the caller gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshOutcome {
    Reply(Result<SshReply, SshError>),
    /// The operation never returns (non-returning storage): the simulator must never answer the caller.
    Hang,
}

/// One executed mutation, in execution order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutationRecord {
    pub operation_id: String,
    pub op_kind: &'static str,
    /// The path written or removed, the unit started or stopped, the digest staged, or `<revision>@<generation>` for
    /// an install.
    pub path_or_unit: String,
    pub at_ms: u64,
}

/// What happened at the endpoint, for the trace. Never carries file content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshEvent {
    Mutated {
        operation_id: String,
        op_kind: &'static str,
        path_or_unit: String,
        at_ms: u64,
    },
    /// The operation answered an error and changed nothing. `operation_id` is `None` for a read.
    Refused {
        operation_id: Option<String>,
        op_kind: &'static str,
        error: SshError,
        at_ms: u64,
    },
    /// The operation met non-returning storage: no effect and no answer.
    Hung {
        operation_id: String,
        op_kind: &'static str,
        path_or_unit: String,
        at_ms: u64,
    },
}

/// How an operation touches storage, which decides what a storage fault does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StorageUse {
    /// systemctl: nothing the deployment writes. Known deviation: a real unit start on a hung disk may hang too; the
    /// model keeps service control independent of storage so that quiescence is not confused with a storage fault.
    None,
    /// Unlink and directory fsync: hangs on non-returning storage, works on a full one.
    Unlink,
    /// New data: hangs on non-returning storage, fails on a full one.
    Data,
}

/// One host's SSH endpoint.
#[derive(Debug, Clone)]
pub struct SshEndpoint {
    pub host_key: String,
    pub worker: Worker,
    pub storage: Storage,
    /// Every executed mutation, in order. Refused and hung operations are not here: they had no effect.
    pub ops_log: Vec<MutationRecord>,
}

impl SshEndpoint {
    pub fn new(host_key: impl Into<String>, worker: Worker) -> SshEndpoint {
        SshEndpoint { host_key: host_key.into(), worker, storage: Storage::Healthy, ops_log: Vec::new() }
    }

    /// Fault `endpoint identity change`: the host now presents `new_host_key` (a reinstalled or swapped host behind
    /// the same address). Callers that expect the old key are refused from now on.
    pub fn change_identity(&mut self, new_host_key: impl Into<String>) {
        self.host_key = new_host_key.into();
    }

    /// Faults `disk full` and `non-returning storage`, and their repair with [`Storage::Healthy`].
    pub fn set_storage(&mut self, storage: Storage) {
        self.storage = storage;
    }

    /// Operation ids executed more than once, in id order: what the engine's journal must make impossible.
    pub fn duplicate_mutations(&self) -> Vec<String> {
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for record in &self.ops_log {
            *counts.entry(record.operation_id.as_str()).or_default() += 1;
        }
        counts.into_iter().filter(|(_, count)| *count > 1).map(|(id, _)| id.to_owned()).collect()
    }

    /// Handles one operation at time `now_ms` from a caller that expects the host key `expected_host_key`,
    /// appending what happened to `events`.
    pub fn handle(
        &mut self,
        now_ms: u64,
        expected_host_key: &str,
        op: SshOp,
        events: &mut Vec<SshEvent>,
    ) -> SshOutcome {
        let op_kind = op.kind();
        let operation_id = op.operation_id().map(str::to_owned);
        if expected_host_key != self.host_key {
            let error = SshError::HostKeyMismatch { presented: self.host_key.clone() };
            return refuse(now_ms, operation_id, op_kind, error, events);
        }
        let read = |result: Result<SshReply, SshError>, events: &mut Vec<SshEvent>| match result {
            Ok(reply) => SshOutcome::Reply(Ok(reply)),
            Err(error) => refuse(now_ms, None, op_kind, error, events),
        };
        match op {
            SshOp::Observe => read(Ok(SshReply::Observation(Box::new(self.worker.observe()))), events),
            SshOp::ReadFile { path } => {
                let result = match self.worker.file(&path) {
                    Some(entry) => Ok(SshReply::File(entry.stat())),
                    None => Err(SshError::NoSuchFile { path }),
                };
                read(result, events)
            }
            SshOp::ServiceStatus => read(Ok(SshReply::Status(self.worker.service)), events),
            SshOp::WriteFileAtomic { operation_id, path, content, mode, owner } => {
                // rename(2) would replace a symlink itself rather than follow it, and fail on a directory; the real
                // writer lstat()s first and refuses both, so an unexpected file type is reported, not papered over.
                if self.worker.file(&path).is_some_and(|entry| entry.kind != FileKind::Regular) {
                    return refuse(now_ms, Some(operation_id), op_kind, SshError::UnsafePath { path }, events);
                }
                let entry = FileEntry { kind: FileKind::Regular, mode, owner, nlink: 1, content };
                self.mutate(now_ms, operation_id, op_kind, path.clone(), StorageUse::Data, events, |worker| {
                    worker.files.insert(path, entry);
                })
            }
            SshOp::Remove { operation_id, path } => match self.worker.file(&path).map(|entry| &entry.kind) {
                None => refuse(now_ms, Some(operation_id), op_kind, SshError::NoSuchFile { path }, events),
                Some(FileKind::Directory) => {
                    refuse(now_ms, Some(operation_id), op_kind, SshError::UnsafePath { path }, events)
                }
                // Unlinking a symlink removes the link, never its target: safe.
                Some(FileKind::Regular | FileKind::Symlink { .. }) => {
                    self.mutate(now_ms, operation_id, op_kind, path.clone(), StorageUse::Unlink, events, |worker| {
                        worker.files.remove(&path);
                    })
                }
            },
            SshOp::StopService { operation_id } => {
                // systemctl stop of a stopped unit succeeds; it is still an executed mutation for the log.
                self.mutate(
                    now_ms,
                    operation_id,
                    op_kind,
                    SERVICE_UNIT.to_owned(),
                    StorageUse::None,
                    events,
                    |worker| {
                        worker.service = ServiceState::Stopped;
                    },
                )
            }
            SshOp::StartService { operation_id } => {
                if self.worker.installed.is_none() {
                    let error = SshError::ServiceFailed { reason: "nothing is installed".to_owned() };
                    return refuse(now_ms, Some(operation_id), op_kind, error, events);
                }
                self.mutate(
                    now_ms,
                    operation_id,
                    op_kind,
                    SERVICE_UNIT.to_owned(),
                    StorageUse::None,
                    events,
                    |worker| {
                        worker.service = ServiceState::Running;
                    },
                )
            }
            SshOp::StageArtifact { operation_id, capsule } => {
                let digest = capsule.digest;
                self.mutate(now_ms, operation_id, op_kind, digest.clone(), StorageUse::Data, events, |worker| {
                    worker.staged.insert(digest);
                })
            }
            SshOp::ProbeStorage { operation_id } => match self.storage {
                Storage::Healthy => {
                    let probe = StorageProbe {
                        write: Some(Ok(())),
                        file_fsync: Some(Ok(())),
                        rename: Some(Ok(())),
                        dir_fsync: Some(Ok(())),
                        free_bytes: HEALTHY_FREE_BYTES,
                    };
                    SshOutcome::Reply(Ok(SshReply::Probe(probe)))
                }
                Storage::Full => {
                    // The write fails with ENOSPC and nothing after it runs; the trace shows what the disk refused.
                    events.push(SshEvent::Refused {
                        operation_id: Some(operation_id),
                        op_kind,
                        error: SshError::DiskFull,
                        at_ms: now_ms,
                    });
                    let probe = StorageProbe {
                        write: Some(Err(SshError::DiskFull.to_string())),
                        file_fsync: None,
                        rename: None,
                        dir_fsync: None,
                        free_bytes: 0,
                    };
                    SshOutcome::Reply(Ok(SshReply::Probe(probe)))
                }
                Storage::NonReturning => {
                    let path_or_unit = "staging/.probe".to_owned();
                    events.push(SshEvent::Hung { operation_id, op_kind, path_or_unit, at_ms: now_ms });
                    SshOutcome::Hang
                }
            },
            SshOp::RestorePrevious { operation_id, revision, generation } => {
                let wanted = Installed { revision, generation };
                if self.worker.previous.as_ref() != Some(&wanted) {
                    let error =
                        SshError::NothingToRestore { wanted: format!("{}@{}", wanted.revision, wanted.generation) };
                    return refuse(now_ms, Some(operation_id), op_kind, error, events);
                }
                // The kept install goes back, with the signed manifest it shipped with, and the barrier passed at its
                // generation; the one it replaces is kept in turn (a rollback of a rollback is a restore too).
                let target = format!("{}@{}", wanted.revision, wanted.generation);
                self.mutate(now_ms, operation_id, op_kind, target, StorageUse::Data, events, |worker| {
                    let manifest = crate::worker::Manifest::signed(&wanted.revision, wanted.generation).render();
                    worker.files.insert(crate::worker::MANIFEST.to_owned(), FileEntry::canonical(manifest));
                    worker.barrier_generation = wanted.generation;
                    worker.previous = worker.installed.replace(wanted);
                })
            }
            SshOp::RunInstaller { operation_id, revision, generation, required_digests, route_digest } => {
                if let Some(digest) = required_digests.into_iter().find(|digest| !self.worker.staged.contains(digest)) {
                    return refuse(now_ms, Some(operation_id), op_kind, SshError::NotStaged { digest }, events);
                }
                // The installer replaces source and venv, lays down the release's signed deployment manifest (it ships
                // in the capsule, signed by the release pipeline, not by the controller) and passes the barrier. It
                // writes neither the marker nor mac.env: those are separate atomic writes by the engine, which is how
                // a worker can end up incoherent.
                // The runtime configuration it generates names the route bundle (one route authority, RCCA P1).
                let target = format!("{revision}@{generation} routes {route_digest}");
                self.mutate(now_ms, operation_id, op_kind, target, StorageUse::Data, events, |worker| {
                    let manifest = crate::worker::Manifest::signed(&revision, generation).render();
                    worker.files.insert(crate::worker::MANIFEST.to_owned(), FileEntry::canonical(manifest));
                    let routes = format!("route_bundle={route_digest}\n");
                    worker.files.insert(crate::worker::RUNTIME_CONFIG.to_owned(), FileEntry::canonical(routes));
                    let new = Installed { revision, generation };
                    if worker.installed.as_ref() != Some(&new) {
                        worker.previous = worker.installed.replace(new);
                    }
                    worker.barrier_generation = generation;
                })
            }
        }
    }

    /// Meets the storage fault, then applies `change`, records it and reports it.
    #[expect(clippy::too_many_arguments, reason = "one private helper that every mutating operation goes through")]
    fn mutate(
        &mut self,
        now_ms: u64,
        operation_id: String,
        op_kind: &'static str,
        path_or_unit: String,
        storage_use: StorageUse,
        events: &mut Vec<SshEvent>,
        change: impl FnOnce(&mut Worker),
    ) -> SshOutcome {
        match (storage_use, self.storage) {
            (StorageUse::None, _) | (_, Storage::Healthy) | (StorageUse::Unlink, Storage::Full) => {}
            (StorageUse::Data, Storage::Full) => {
                return refuse(now_ms, Some(operation_id), op_kind, SshError::DiskFull, events);
            }
            (StorageUse::Data | StorageUse::Unlink, Storage::NonReturning) => {
                events.push(SshEvent::Hung { operation_id, op_kind, path_or_unit, at_ms: now_ms });
                return SshOutcome::Hang;
            }
        }
        change(&mut self.worker);
        self.ops_log.push(MutationRecord {
            operation_id: operation_id.clone(),
            op_kind,
            path_or_unit: path_or_unit.clone(),
            at_ms: now_ms,
        });
        events.push(SshEvent::Mutated { operation_id, op_kind, path_or_unit, at_ms: now_ms });
        SshOutcome::Reply(Ok(SshReply::Done))
    }
}

fn refuse(
    now_ms: u64,
    operation_id: Option<String>,
    op_kind: &'static str,
    error: SshError,
    events: &mut Vec<SshEvent>,
) -> SshOutcome {
    events.push(SshEvent::Refused { operation_id, op_kind, error: error.clone(), at_ms: now_ms });
    SshOutcome::Reply(Err(error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::capsule_set;
    use crate::worker::{CANONICAL_MODE, CANONICAL_OWNER, Drift, MAC_ENV, MARKER, render_marker};

    const HOST_KEY: &str = "ssh-ed25519 AAAAworker50";
    const KEY: &str = "attest-5ecret-k3y-w50";

    fn endpoint() -> SshEndpoint {
        SshEndpoint::new(HOST_KEY, Worker::installed("worker-50", "7f3bbd1", 12, KEY))
    }

    fn op_id(n: u64) -> String {
        format!("deploy-7/worker-50/op-{n}")
    }

    fn write(n: u64, path: &str, content: &str) -> SshOp {
        SshOp::WriteFileAtomic {
            operation_id: op_id(n),
            path: path.into(),
            content: content.into(),
            mode: CANONICAL_MODE,
            owner: CANONICAL_OWNER.into(),
        }
    }

    fn install(n: u64, revision: &str, generation: u64) -> SshOp {
        SshOp::RunInstaller {
            operation_id: op_id(n),
            revision: revision.into(),
            generation,
            required_digests: capsule_set(revision).into_iter().map(|capsule| capsule.digest).collect(),
            route_digest: "sha256:routes-1".into(),
        }
    }

    /// One of each mutating operation, every one of which would change a freshly installed worker.
    fn every_mutation() -> Vec<SshOp> {
        vec![
            write(1, MARKER, "2944aeb\n"),
            SshOp::Remove { operation_id: op_id(2), path: MAC_ENV.into() },
            SshOp::StopService { operation_id: op_id(3) },
            SshOp::StageArtifact { operation_id: op_id(4), capsule: capsule_set("2944aeb").remove(0) },
            SshOp::RunInstaller {
                operation_id: op_id(5),
                revision: "2944aeb".into(),
                generation: 13,
                required_digests: Vec::new(),
                route_digest: "sha256:routes-1".into(),
            },
        ]
    }

    fn done() -> SshOutcome {
        SshOutcome::Reply(Ok(SshReply::Done))
    }

    fn refused(error: SshError) -> SshOutcome {
        SshOutcome::Reply(Err(error))
    }

    #[test]
    fn an_atomic_write_replaces_a_file_with_a_single_linked_regular_one() {
        let mut ssh = endpoint();
        ssh.worker.apply_drift(Drift::HardLinkedEnv);
        ssh.worker.apply_drift(Drift::UnsafeMode);
        let mut events = Vec::new();
        assert_eq!(ssh.handle(10, HOST_KEY, write(1, MAC_ENV, "MAC_A=1\n"), &mut events), done());
        let entry = ssh.worker.file(MAC_ENV).unwrap();
        assert_eq!(*entry, FileEntry::canonical("MAC_A=1\n"), "a rename leaves a fresh inode: one link, mode 0600");
        assert_eq!(
            events,
            vec![SshEvent::Mutated {
                operation_id: op_id(1),
                op_kind: "write_file_atomic",
                path_or_unit: MAC_ENV.into(),
                at_ms: 10
            }]
        );
        assert_eq!(ssh.ops_log.len(), 1);
    }

    #[test]
    fn an_atomic_write_over_a_symlink_or_a_directory_is_refused() {
        let mut ssh = endpoint();
        ssh.worker.apply_drift(Drift::SymlinkEnv);
        ssh.worker
            .files
            .insert("~/.mac/venv".into(), FileEntry { kind: FileKind::Directory, ..FileEntry::canonical("") });
        let before = ssh.worker.clone();
        let mut events = Vec::new();
        for path in [MAC_ENV, "~/.mac/venv"] {
            let outcome = ssh.handle(0, HOST_KEY, write(1, path, "MAC_A=1\n"), &mut events);
            assert_eq!(outcome, refused(SshError::UnsafePath { path: path.into() }));
        }
        assert_eq!(ssh.worker, before);
        assert!(ssh.ops_log.is_empty());
        let remove_dir = SshOp::Remove { operation_id: op_id(2), path: "~/.mac/venv".into() };
        assert_eq!(
            ssh.handle(0, HOST_KEY, remove_dir, &mut events),
            refused(SshError::UnsafePath { path: "~/.mac/venv".into() })
        );
        // Removing the symlink itself is safe, and afterwards the write goes through.
        assert_eq!(
            ssh.handle(0, HOST_KEY, SshOp::Remove { operation_id: op_id(3), path: MAC_ENV.into() }, &mut events),
            done()
        );
        assert_eq!(ssh.handle(0, HOST_KEY, write(4, MAC_ENV, "MAC_A=1\n"), &mut events), done());
        assert_eq!(ssh.worker.file(MAC_ENV).unwrap().kind, FileKind::Regular);
    }

    #[test]
    fn a_wrong_host_key_executes_nothing() {
        let mut ssh = endpoint();
        ssh.change_identity("ssh-ed25519 AAAAswapped");
        let before = ssh.worker.clone();
        let mut events = Vec::new();
        let mismatch = refused(SshError::HostKeyMismatch { presented: "ssh-ed25519 AAAAswapped".into() });
        for op in every_mutation().into_iter().chain([SshOp::Observe, SshOp::ServiceStatus]) {
            assert_eq!(ssh.handle(0, HOST_KEY, op, &mut events), mismatch);
        }
        assert_eq!(ssh.worker, before);
        assert!(ssh.ops_log.is_empty());
        assert!(
            events
                .iter()
                .all(|event| matches!(event, SshEvent::Refused { error: SshError::HostKeyMismatch { .. }, .. }))
        );
        assert_eq!(events.len(), 7);
        assert_eq!(
            ssh.handle(0, "ssh-ed25519 AAAAswapped", SshOp::StopService { operation_id: op_id(9) }, &mut events),
            done()
        );
    }

    #[test]
    fn a_full_disk_writes_nothing_but_still_reads_and_unlinks() {
        let mut ssh = endpoint();
        ssh.set_storage(Storage::Full);
        let before = ssh.worker.clone();
        let mut events = Vec::new();
        let data_writes = [write(1, MARKER, "2944aeb\n"), every_mutation().remove(3), every_mutation().remove(4)];
        for op in data_writes {
            assert_eq!(ssh.handle(0, HOST_KEY, op, &mut events), refused(SshError::DiskFull));
        }
        assert_eq!(ssh.worker, before);
        assert!(ssh.ops_log.is_empty());
        let observed = ssh.handle(0, HOST_KEY, SshOp::Observe, &mut events);
        assert_eq!(observed, SshOutcome::Reply(Ok(SshReply::Observation(Box::new(before.observe())))));
        assert_eq!(
            ssh.handle(0, HOST_KEY, SshOp::Remove { operation_id: op_id(2), path: MARKER.into() }, &mut events),
            done()
        );
        assert_eq!(ssh.worker.file(MARKER), None);
        ssh.set_storage(Storage::Healthy);
        assert_eq!(ssh.handle(0, HOST_KEY, write(1, MARKER, &render_marker("7f3bbd1")), &mut events), done());
    }

    #[test]
    fn non_returning_storage_hangs_and_writes_nothing() {
        let mut ssh = endpoint();
        ssh.set_storage(Storage::NonReturning);
        let before = ssh.worker.clone();
        let mut events = Vec::new();
        let writes = [
            write(1, MARKER, "2944aeb\n"),
            every_mutation().remove(1),
            every_mutation().remove(3),
            every_mutation().remove(4),
        ];
        for op in writes {
            assert_eq!(ssh.handle(0, HOST_KEY, op, &mut events), SshOutcome::Hang);
        }
        assert_eq!(ssh.worker, before);
        assert!(ssh.ops_log.is_empty());
        assert_eq!(events.iter().filter(|event| matches!(event, SshEvent::Hung { .. })).count(), 4);
        assert_eq!(
            ssh.handle(0, HOST_KEY, SshOp::ServiceStatus, &mut events),
            SshOutcome::Reply(Ok(SshReply::Status(ServiceState::Running))),
            "reads still answer"
        );
        assert!(matches!(
            ssh.handle(0, HOST_KEY, SshOp::ReadFile { path: MAC_ENV.into() }, &mut events),
            SshOutcome::Reply(Ok(SshReply::File(_)))
        ));
    }

    #[test]
    fn the_installer_refuses_until_every_capsule_is_staged_then_passes_the_barrier() {
        let mut ssh = endpoint();
        let mut events = Vec::new();
        let capsules = capsule_set("2944aeb");
        for (n, capsule) in capsules.iter().take(5).enumerate() {
            let stage = SshOp::StageArtifact { operation_id: op_id(n as u64), capsule: capsule.clone() };
            assert_eq!(ssh.handle(0, HOST_KEY, stage, &mut events), done());
        }
        let missing = capsules[5].digest.clone();
        assert_eq!(
            ssh.handle(1, HOST_KEY, install(10, "2944aeb", 13), &mut events),
            refused(SshError::NotStaged { digest: missing })
        );
        assert_eq!(ssh.worker.installed, Some(Installed { revision: "7f3bbd1".into(), generation: 12 }));
        assert_eq!(ssh.worker.barrier_generation, 12);

        let stage = SshOp::StageArtifact { operation_id: op_id(5), capsule: capsules[5].clone() };
        assert_eq!(ssh.handle(2, HOST_KEY, stage, &mut events), done());
        assert_eq!(ssh.handle(3, HOST_KEY, install(11, "2944aeb", 13), &mut events), done());
        assert_eq!(ssh.worker.installed, Some(Installed { revision: "2944aeb".into(), generation: 13 }));
        assert_eq!(ssh.worker.barrier_generation, 13);
        assert_eq!(ssh.worker.file(MARKER).unwrap().content, "7f3bbd1\n", "the installer writes no identity file");
        assert_eq!(ssh.ops_log.last().unwrap().path_or_unit, "2944aeb@13 routes sha256:routes-1");
        let runtime = ssh.worker.file(crate::worker::RUNTIME_CONFIG).unwrap();
        assert_eq!(runtime.content, "route_bundle=sha256:routes-1\n", "the runtime config names the frozen bundle");
    }

    #[test]
    fn a_service_starts_only_when_something_is_installed() {
        let mut ssh = SshEndpoint::new("ssh-ed25519 AAAAhub", Worker::bare("hub", KEY));
        let mut events = Vec::new();
        let start = |n| SshOp::StartService { operation_id: op_id(n) };
        assert_eq!(
            ssh.handle(0, "ssh-ed25519 AAAAhub", start(1), &mut events),
            refused(SshError::ServiceFailed { reason: "nothing is installed".into() })
        );
        assert_eq!(ssh.worker.service, ServiceState::Stopped);
        ssh.worker.installed = Some(Installed { revision: "2944aeb".into(), generation: 1 });
        assert_eq!(ssh.handle(0, "ssh-ed25519 AAAAhub", start(2), &mut events), done());
        assert_eq!(ssh.worker.service, ServiceState::Running);
        assert_eq!(SshError::ServiceFailed { reason: "x".into() }.to_string(), "ovswarm-agent failed: x");
    }

    #[test]
    fn a_repeated_operation_id_shows_up_as_a_duplicate_mutation() {
        let mut ssh = endpoint();
        let mut events = Vec::new();
        ssh.set_storage(Storage::Full);
        ssh.handle(0, HOST_KEY, write(1, MARKER, "7f3bbd1\n"), &mut events);
        ssh.set_storage(Storage::Healthy);
        ssh.handle(1, HOST_KEY, write(1, MARKER, "7f3bbd1\n"), &mut events);
        assert!(ssh.duplicate_mutations().is_empty(), "a refused attempt had no effect, so its retry is no duplicate");
        ssh.handle(2, HOST_KEY, SshOp::StopService { operation_id: op_id(2) }, &mut events);
        ssh.handle(3, HOST_KEY, SshOp::StopService { operation_id: op_id(2) }, &mut events);
        ssh.handle(4, HOST_KEY, write(1, MARKER, "7f3bbd1\n"), &mut events);
        assert_eq!(ssh.duplicate_mutations(), [op_id(1), op_id(2)]);
    }

    #[test]
    fn the_attestation_key_never_appears_in_an_event_a_record_or_a_debug_line() {
        let mut ssh = endpoint();
        let env_content = ssh.worker.file(MAC_ENV).unwrap().content.clone();
        assert!(env_content.contains(KEY), "the key is really on the worker");
        let mut events = Vec::new();
        let mut outcomes = Vec::new();
        let ops = [
            SshOp::Observe,
            SshOp::ReadFile { path: MAC_ENV.into() },
            write(1, MAC_ENV, &env_content),
            write(2, MAC_ENV, &ssh.worker.recovery_env_content()),
            SshOp::Remove { operation_id: op_id(3), path: MAC_ENV.into() },
            SshOp::ReadFile { path: MAC_ENV.into() },
        ];
        for op in ops {
            assert!(!format!("{op:?}").contains(KEY), "{op:?}");
            outcomes.push(ssh.handle(0, HOST_KEY, op, &mut events));
        }
        ssh.set_storage(Storage::NonReturning);
        ssh.handle(0, HOST_KEY, write(4, MAC_ENV, &env_content), &mut events);
        ssh.set_storage(Storage::Full);
        ssh.handle(0, HOST_KEY, write(5, MAC_ENV, &env_content), &mut events);
        ssh.change_identity("other");
        ssh.handle(0, HOST_KEY, write(6, MAC_ENV, &env_content), &mut events);
        assert!(matches!(&outcomes[1], SshOutcome::Reply(Ok(SshReply::File(stat))) if stat.content.contains(KEY)));
        assert_eq!(events.len(), 7, "three mutations, one refused read, one hang, two refusals");
        for text in [format!("{events:?}"), format!("{:?}", ssh.ops_log), format!("{outcomes:?}"), format!("{ssh:?}")] {
            assert!(!text.contains(KEY), "{text}");
        }
        assert!(events.iter().all(|event| !format!("{event:?}").contains("MAC_ATTESTATION_KEY")), "no content at all");
    }
}
