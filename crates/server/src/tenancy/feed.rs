//! The change feed behind the operator's tenants watch (`GET /_netacl/v1/tenants/watch`): one
//! sequence per process, bumped by every tenant added, removed, or installing a new version
//! (rules, lists or keys: each bumps the tenant's version), with the sequence number at which
//! each tenant (and each of its managed lists) last changed, and the removals.
//!
//! A cursor names this process (a random instance id drawn at start) and a sequence number:
//! `INSTANCE.SEQ`. An answer ships only the tenants whose mark is above the cursor's sequence;
//! a cursor of another process (another node, or this node before a restart), or one older
//! than the removals still remembered, gets the full snapshot (`"full": true`), from which an
//! edge recompiles only the tenants whose version it does not hold. An answer is bounded
//! ([`MAX_ANSWER_BYTES`]): past the bound it ends with `"more": true` and a continuation cursor
//! `INSTANCE.SINCE.START.AFTER_ID` (the tenants after `AFTER_ID` changed since `SINCE`; the
//! pass completes at `START`, the sequence read before the first page).
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

use netacl_model::ManagedListName;
use netacl_store::TenantId;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::tenancy::Registry;
use crate::tenant::{AclSnapshot, TenantRuntime};

/// How many removals are remembered; a cursor older than the oldest one forgotten gets a full
/// snapshot.
const MAX_REMOVALS: usize = 65_536;

/// An answer stops adding tenants once its body passes this size (at least one tenant per
/// answer); the rest follows with the continuation cursor.
pub(crate) const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Where a tenant stands in the feed.
#[derive(Debug, Clone)]
pub(crate) struct TenantMark {
    /// Sequence of its last change.
    pub(crate) changed: u64,
    /// Sequence at which it was (last) added.
    pub(crate) added: u64,
    /// Per managed list (by [`ManagedListName::index`]), the sequence its content last changed.
    pub(crate) lists_changed: [u64; 5],
    /// The digests of the lists in force at the last change recorded.
    pub(crate) digests: [Option<String>; 5],
}

#[derive(Default)]
struct FeedLog {
    seq: u64,
    tenants: HashMap<TenantId, TenantMark>,
    /// Removals by sequence.
    removed: BTreeMap<u64, TenantId>,
    /// Removals at or before this sequence were forgotten.
    forgotten_through: u64,
}

/// What changed since a sequence number (see [`ChangeFeed::since`]).
pub(crate) struct Changes {
    /// The tenants changed, by id, with their marks.
    pub(crate) tenants: Vec<(TenantId, TenantMark)>,
    /// Tenants removed (and not back).
    pub(crate) removed: Vec<TenantId>,
}

/// See the module docs.
pub(crate) struct ChangeFeed {
    instance: String,
    /// The answer bound, [`MAX_ANSWER_BYTES`] unless a test lowers it.
    budget: std::sync::atomic::AtomicUsize,
    log: Mutex<FeedLog>,
    seq: watch::Sender<u64>,
}

fn digests(snapshot: &AclSnapshot) -> [Option<String>; 5] {
    ManagedListName::ALL.map(|name| {
        snapshot
            .lists
            .effective(name)
            .map(|e| e.list.digest().to_owned())
    })
}

impl ChangeFeed {
    pub(crate) fn new() -> Arc<Self> {
        use rand::RngCore;
        let instance = format!("{:016x}", rand::rngs::OsRng.next_u64());
        Arc::new(Self {
            instance,
            budget: std::sync::atomic::AtomicUsize::new(MAX_ANSWER_BYTES),
            log: Mutex::new(FeedLog::default()),
            seq: watch::channel(0).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FeedLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The size past which an answer stops adding tenants.
    pub(crate) fn budget(&self) -> usize {
        self.budget.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Lowers (or raises) the answer bound (tests of the continuation).
    pub(crate) fn set_budget(&self, bytes: usize) {
        self.budget
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// This process's instance id (16 hex digits).
    pub(crate) fn instance(&self) -> &str {
        &self.instance
    }

    /// The current sequence number.
    pub(crate) fn seq(&self) -> u64 {
        self.lock().seq
    }

    /// A receiver of the sequence number (to wait for the next change).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.seq.subscribe()
    }

    /// Whether changes since `since` can be told (removals after it are all remembered).
    pub(crate) fn remembers(&self, since: u64) -> bool {
        let log = self.lock();
        since <= log.seq && since >= log.forgotten_through
    }

    /// Records a new state of tenant `id` (added: a tenant served anew).
    pub(crate) fn touch(&self, id: &TenantId, snapshot: &AclSnapshot, added: bool) {
        let now = digests(snapshot);
        let seq = {
            let mut log = self.lock();
            log.seq += 1;
            let seq = log.seq;
            let mark = log.tenants.entry(id.clone()).or_insert_with(|| TenantMark {
                changed: seq,
                added: seq,
                lists_changed: [seq; 5],
                digests: now.clone(),
            });
            mark.changed = seq;
            if added {
                mark.added = seq;
            }
            for (i, digest) in now.into_iter().enumerate() {
                if mark.digests[i] != digest {
                    mark.lists_changed[i] = seq;
                    mark.digests[i] = digest;
                }
            }
            seq
        };
        self.seq.send_replace(seq);
    }

    /// Records that tenant `id` is no longer served.
    pub(crate) fn remove(&self, id: &TenantId) {
        let seq = {
            let mut log = self.lock();
            log.seq += 1;
            let seq = log.seq;
            log.tenants.remove(id);
            log.removed.insert(seq, id.clone());
            while log.removed.len() > MAX_REMOVALS {
                if let Some((oldest, _)) = log.removed.pop_first() {
                    log.forgotten_through = oldest;
                }
            }
            seq
        };
        self.seq.send_replace(seq);
    }

    /// The tenants changed after `since` whose id is after `after` (all with `since` 0), by
    /// id, and the tenants removed after `since` that are not served again.
    pub(crate) fn since(&self, since: u64, after: Option<&TenantId>) -> Changes {
        let log = self.lock();
        let mut tenants: Vec<(TenantId, TenantMark)> = log
            .tenants
            .iter()
            .filter(|(id, mark)| mark.changed > since && after.is_none_or(|a| *id > a))
            .map(|(id, mark)| (id.clone(), mark.clone()))
            .collect();
        tenants.sort_by(|a, b| a.0.cmp(&b.0));
        let mut removed: Vec<TenantId> = if since == 0 {
            Vec::new()
        } else {
            log.removed
                .range(since + 1..)
                .map(|(_, id)| id)
                .filter(|id| !log.tenants.contains_key(*id))
                .cloned()
                .collect()
        };
        removed.sort();
        removed.dedup();
        Changes { tenants, removed }
    }

    /// The current digests of `snapshot`'s lists (to see a change not recorded yet).
    pub(crate) fn digests_of(snapshot: &AclSnapshot) -> [Option<String>; 5] {
        digests(snapshot)
    }
}

/// Per served tenant: its runtime (a tenant re-created under its id has a new one) and the task
/// following its installs.
struct Follower {
    feed: Arc<ChangeFeed>,
    watchers: HashMap<TenantId, (Arc<TenantRuntime>, JoinHandle<()>)>,
}

impl Follower {
    fn sync(&mut self, served: HashMap<TenantId, Arc<TenantRuntime>>) {
        let gone: Vec<TenantId> = self
            .watchers
            .iter()
            .filter(|(id, (runtime, _))| {
                !served
                    .get(*id)
                    .is_some_and(|current| Arc::ptr_eq(current, runtime))
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some((_, task)) = self.watchers.remove(&id) {
                task.abort();
            }
            self.feed.remove(&id);
        }
        for (id, runtime) in served {
            if self.watchers.contains_key(&id) {
                continue;
            }
            // Subscribe before reading, so that an install in between is not missed.
            let mut installs = runtime.subscribe();
            self.feed.touch(&id, &runtime.snapshot(), true);
            let task = {
                let feed = Arc::clone(&self.feed);
                let runtime = Arc::clone(&runtime);
                let id = id.clone();
                tokio::spawn(async move {
                    while installs.changed().await.is_ok() {
                        installs.mark_unchanged();
                        feed.touch(&id, &runtime.snapshot(), false);
                    }
                })
            };
            self.watchers.insert(id, (runtime, task));
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        for (_, (_, task)) in self.watchers.drain() {
            task.abort();
        }
    }
}

/// Follows the registry's served tenants into `feed`: every tenant added or removed, and each
/// tenant's installs. The tenants served now are recorded before this returns; the task ends
/// when the registry is dropped.
pub(crate) fn follow(registry: &Arc<Registry>, feed: Arc<ChangeFeed>) -> JoinHandle<()> {
    let mut directory = registry.subscribe();
    directory.mark_unchanged();
    let mut follower = Follower {
        feed,
        watchers: HashMap::new(),
    };
    follower.sync(registry.served_runtimes());
    let weak: Weak<Registry> = Arc::downgrade(registry);
    tokio::spawn(async move {
        while directory.changed().await.is_ok() {
            directory.mark_unchanged();
            let Some(registry) = weak.upgrade() else {
                break;
            };
            let served = registry.served_runtimes();
            drop(registry);
            follower.sync(served);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_forgotten_make_old_cursors_unknown() {
        let feed = ChangeFeed::new();
        assert!(feed.remembers(0));
        assert!(!feed.remembers(1), "a sequence not reached yet");
        for i in 0..(MAX_REMOVALS + 2) {
            feed.remove(&TenantId::new(&format!("t{i}")).expect("id"));
        }
        assert!(!feed.remembers(1));
        assert!(feed.remembers(feed.seq()));
        let changes = feed.since(feed.seq() - 1, None);
        assert_eq!(changes.removed.len(), 1);
        assert!(changes.tenants.is_empty());
    }
}
