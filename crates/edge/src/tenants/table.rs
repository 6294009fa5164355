//! The tenants in service, one value replaced whole: each host's entry (its tenant and the
//! policy that decides its requests), and the tenant a request selected ([`SelectedTenant`]).
use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use netacl_eval::CompiledPolicy;
use netacl_eval::Engine;

use super::policy::TenantPolicy;
use crate::tenants::host_table::HostTable;

/// A host's entry: its tenant and the policy that decides its requests, so that a decision
/// goes from the host table's slot to the policy, as a single-tenant edge goes from its engine
/// to the policy: the slot takes the place of the engine instead of coming before it.
///
/// For a tenant whose rules the router compiles, the slot's policy is the one in service: the
/// router installs every policy of that tenant itself, and in the same batch (under its
/// writer lock, before [`TenantRouter::apply`] returns) puts it in every slot naming the
/// tenant, in the table in service and in any table it builds (which copies it from the
/// engine). A tenant that follows an engine fed by someone else (`netacl serve` in process,
/// [`TenantRules::Follow`]) is decided from that engine's snapshot.
pub(super) struct Routed {
    pub(super) tenant: Arc<TenantPolicy>,
    pub(super) decides: Decides,
}

/// What decides a host's requests.
pub(super) enum Decides {
    /// The policy in service of a tenant whose rules the router compiles.
    Held(ArcSwap<CompiledPolicy>),
    /// The engine of a tenant that follows an engine fed by someone else.
    Followed(Arc<Engine>),
}

impl Clone for Routed {
    fn clone(&self) -> Self {
        Routed {
            tenant: Arc::clone(&self.tenant),
            decides: match &self.decides {
                Decides::Held(policy) => Decides::Held(ArcSwap::new(policy.load_full())),
                Decides::Followed(engine) => Decides::Followed(Arc::clone(engine)),
            },
        }
    }
}

impl Routed {
    /// The entry of `tenant`, its policy read from its engine (the writer lock held).
    pub(super) fn new(tenant: &Arc<TenantPolicy>) -> Self {
        let decides = match tenant.followed {
            true => Decides::Followed(Arc::clone(&tenant.engine)),
            false => Decides::Held(ArcSwap::new(tenant.engine.policy())),
        };
        Routed {
            tenant: Arc::clone(tenant),
            decides,
        }
    }

    /// The address whose line a request for this entry's hosts reads first: the policy's, or
    /// the followed engine's.
    pub(super) fn hint(&self) -> usize {
        match &self.decides {
            Decides::Held(policy) => Arc::as_ptr(&policy.load()) as usize,
            Decides::Followed(engine) => Arc::as_ptr(engine) as usize,
        }
    }

    /// Puts the policy in service of the tenant's engine in this entry (the writer lock
    /// held, after the router installed it).
    pub(super) fn refresh(&self) {
        if let Decides::Held(policy) = &self.decides {
            policy.store(self.tenant.engine.policy());
        }
    }
}

/// The tenants in service: one value, replaced whole.
pub(super) struct TenantTable {
    pub(super) hosts: HostTable<Routed>,
    pub(super) by_id: HashMap<Arc<str>, Arc<TenantPolicy>>,
}

impl TenantTable {
    pub(super) fn empty() -> Self {
        Self {
            hosts: HostTable::default(),
            by_id: HashMap::new(),
        }
    }

    /// Puts `tenant`'s policy in service in every entry naming it (after the router installed
    /// it, the writer lock held).
    pub(super) fn refresh(&self, tenant: &Arc<TenantPolicy>) {
        for domain in tenant.domains.iter() {
            if let Some(routed) = self.hosts.get(domain) {
                if Arc::ptr_eq(&routed.tenant, tenant) {
                    routed.refresh();
                    self.hosts.hint(domain, routed.hint());
                }
            }
        }
    }

    /// Every host's hint (after the table is built).
    pub(super) fn with_hints(self) -> Self {
        for tenant in self.by_id.values() {
            for domain in tenant.domains.iter() {
                if let Some(routed) = self.hosts.get(domain) {
                    self.hosts.hint(domain, routed.hint());
                }
            }
        }
        self
    }

    /// The tenant serving `host` (already trimmed by [`tenant_host`]). The line its decision
    /// reads next (the policy, or the followed engine) was requested with the host's slot, from
    /// the slot's hint.
    #[inline]
    pub(super) fn tenant(&self, host: &str) -> Option<SelectedTenant<'_>> {
        let routed = self.hosts.get(host)?;
        Some(SelectedTenant { routed })
    }
}

/// The tenant a host selected, as the per-request path gets it: the tenant (its methods through
/// `Deref`) and the policy that decides its requests, read from the host table's slot.
#[derive(Clone, Copy)]
pub struct SelectedTenant<'t> {
    pub(super) routed: &'t Routed,
}

impl<'t> SelectedTenant<'t> {
    /// The engine holding the tenant's live policy (the same as [`TenantPolicy::engine`]).
    pub fn engine(&self) -> &'t Arc<Engine> {
        &self.routed.tenant.engine
    }

    /// The tenant's policy in service, for one decision (one snapshot: no reference count
    /// written, as [`Engine::snapshot`]).
    #[inline]
    pub fn policy(&self) -> arc_swap::Guard<Arc<CompiledPolicy>> {
        match &self.routed.decides {
            Decides::Held(policy) => policy.load(),
            Decides::Followed(engine) => engine.snapshot(),
        }
    }

    /// The tenant itself.
    pub fn tenant(&self) -> &'t Arc<TenantPolicy> {
        &self.routed.tenant
    }
}

impl std::ops::Deref for SelectedTenant<'_> {
    type Target = TenantPolicy;
    fn deref(&self) -> &TenantPolicy {
        &self.routed.tenant
    }
}

/// How the request named its host, and what the edge makes of it (see
/// [`TenantRouter::select_request`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestHosts<'a> {
    /// Whether the request came over TLS.
    pub tls: bool,
    /// The TLS SNI, if the client sent one.
    pub sni: Option<&'a str>,
    pub host_header: Option<&'a str>,
    pub authority: Option<&'a str>,
}
