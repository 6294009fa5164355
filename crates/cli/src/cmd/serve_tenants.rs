//! `netacl serve --edge-upstream ... --edge-tenants`: the in-process edge enforces every tenant
//! the admin service serves. The service's tenant directory
//! ([`AdminService::tenants`](netacl_server::AdminService::tenants)) is followed: each new value
//! becomes one batch for [`TenantRouter::apply`] (every served tenant put with the engine the
//! service feeds, tenants no longer served removed), and each tenant's rule sets are followed
//! for its connection-level rules.
use std::collections::HashMap;
use std::sync::Arc;

use netacl_edge::{TenantChange, TenantRouter, TenantRules};
use netacl_server::TenantDirectory;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Follows the admin service's tenants into `router`: the current directory is applied before
/// this returns (so the edge starts with every tenant), later ones by the returned task.
pub fn follow(
    router: Arc<TenantRouter>,
    mut directory: watch::Receiver<Arc<TenantDirectory>>,
) -> JoinHandle<()> {
    let mut follower = Follower {
        router,
        watchers: HashMap::new(),
    };
    let first = Arc::clone(&directory.borrow_and_update());
    follower.apply(&first);
    tokio::spawn(async move {
        while directory.changed().await.is_ok() {
            let next = Arc::clone(&directory.borrow_and_update());
            follower.apply(&next);
        }
        // The service is gone: its tenants' watchers end with their channels.
    })
}

struct Follower {
    router: Arc<TenantRouter>,
    /// Per served tenant, the task following its rule sets.
    watchers: HashMap<String, JoinHandle<()>>,
}

impl Follower {
    fn apply(&mut self, directory: &TenantDirectory) {
        let mut changes = Vec::with_capacity(directory.tenants.len());
        for tenant in &directory.tenants {
            changes.push(TenantChange::Put {
                id: tenant.id.as_str().to_owned(),
                domains: tenant.domains.clone(),
                rules: TenantRules::Follow {
                    engine: Arc::clone(&tenant.engine),
                    rules: Some(Arc::clone(&tenant.rule_sets.borrow())),
                },
            });
        }
        let served: std::collections::HashSet<&str> =
            directory.tenants.iter().map(|t| t.id.as_str()).collect();
        let gone: Vec<String> = self
            .watchers
            .keys()
            .filter(|id| !served.contains(id.as_str()))
            .cloned()
            .collect();
        for id in &gone {
            changes.push(TenantChange::remove(id));
            if let Some(task) = self.watchers.remove(id) {
                task.abort();
            }
        }
        let report = self.router.apply(changes);
        for failed in &report.failed {
            tracing::warn!(error = %failed, "edge: a tenant's change was not applied");
        }
        for tenant in &directory.tenants {
            let id = tenant.id.as_str();
            if self.watchers.contains_key(id) {
                continue;
            }
            let task = watch_rules(
                Arc::clone(&self.router),
                id.to_owned(),
                tenant.rule_sets.clone(),
            );
            self.watchers.insert(id.to_owned(), task);
        }
    }
}

/// Keeps the tenant's connection-level rules in step with the rule sets its engine is given.
fn watch_rules(
    router: Arc<TenantRouter>,
    id: String,
    mut rule_sets: watch::Receiver<Arc<netacl_model::RuleSet>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while rule_sets.changed().await.is_ok() {
            let rules = Arc::clone(&rule_sets.borrow_and_update());
            if let Some(tenant) = router.tenant(&id) {
                if let Err(err) = tenant.observe_rules(&rules) {
                    tracing::warn!(tenant = %id, error = %err,
                        "edge: the tenant's connection-level rules were not updated");
                }
            }
        }
    })
}
