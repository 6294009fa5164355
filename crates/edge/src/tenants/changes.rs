//! A batch of tenant changes ([`TenantChange`]), why one failed ([`TenantChangeError`]) and what
//! a batch did ([`ApplyReport`]).
use std::sync::Arc;

use netacl_eval::CompileError;
use netacl_eval::CompiledPolicy;
use netacl_model::RuleSet;

use super::policy::TenantRules;

/// One change in a batch given to [`TenantRouter::apply`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TenantChange {
    /// Adds the tenant or replaces its domains and (per `rules`) its policy.
    Put {
        /// The tenant's id.
        id: String,
        /// Its host names (any case, a trailing dot and a port are removed).
        domains: Vec<String>,
        /// Its rules.
        rules: TenantRules,
    },
    /// Removes the tenant: its hosts name no tenant any more.
    Remove {
        /// The tenant's id.
        id: String,
    },
}

impl TenantChange {
    /// Puts tenant `id` with `domains` and `rules` (no managed lists, no signing keys).
    pub fn put<I, S>(id: &str, domains: I, rules: RuleSet) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        TenantChange::Put {
            id: id.to_owned(),
            domains: domains.into_iter().map(|d| d.as_ref().to_owned()).collect(),
            rules: TenantRules::Compile {
                rules,
                managed: Arc::clone(CompiledPolicy::empty().managed_index()),
                keys: None,
            },
        }
    }

    /// Removes tenant `id`.
    pub fn remove(id: &str) -> Self {
        TenantChange::Remove { id: id.to_owned() }
    }
}

/// Why one change of a batch was not applied (the others were).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TenantChangeError {
    /// The tenant's rules do not compile: its policy in service stays (a new tenant is not
    /// added).
    #[error("tenant {tenant}: rules not compiled: {source}")]
    Compile {
        /// The tenant.
        tenant: String,
        /// Why.
        #[source]
        source: CompileError,
    },
    /// A domain is not a host name (empty, or longer than 253 bytes).
    #[error("tenant {tenant}: domain {domain:?} is not a host name")]
    InvalidDomain {
        /// The tenant.
        tenant: String,
        /// The domain as given.
        domain: String,
    },
    /// A domain is another tenant's.
    #[error("tenant {tenant}: domain {domain} belongs to tenant {owner}")]
    DomainTaken {
        /// The tenant.
        tenant: String,
        /// The domain.
        domain: String,
        /// The tenant holding it.
        owner: String,
    },
}

/// What a batch did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ApplyReport {
    /// Tenants whose rules were compiled.
    pub compiled: usize,
    /// Tenants added.
    pub added: usize,
    /// Tenants removed.
    pub removed: usize,
    /// Changes not applied.
    pub failed: Vec<TenantChangeError>,
}
