//! Many tenants behind one edge: the host a request names picks the tenant whose policy decides.
//!
//! A [`TenantRouter`] maps host names to [`TenantPolicy`] values (one per tenant: its own
//! [`Engine`], its connection-level rules, its counters). The host → tenant table is one
//! immutable value swapped whole ([`arc_swap`]), so a request sees one table, one tenant, and
//! that tenant's one policy snapshot. Selecting a tenant allocates nothing and takes no lock:
//! the host is hashed with a keyed hash over its ASCII-lowercased bytes (folded in a stack
//! buffer, never copied to the heap) and compared case-insensitively in place.
//!
//! Changes come in batches ([`TenantRouter::apply`]): a batch compiles the rules of the
//! tenants it names (only those), then, when tenants were added or removed or their domains
//! changed, builds the next table once (linear in the number of tenants), so loading 10,000
//! tenants costs 10,000 compilations and one table, not 10,000 tables. A rule change in a
//! tenant whose domains stay is installed in that tenant's engine and in the table's entries
//! for its hosts (each entry holds the policy that decides its requests, so that a request
//! reads one entry and then the policy, as a single-tenant edge reads its engine and then
//! the policy); the table is not rebuilt.
//!
//! ```
//! use netacl_edge::{TenantChange, TenantRouter};
//! use netacl_model::RuleSet;
//!
//! let router = TenantRouter::new();
//! let empty = RuleSet { version: 1, acls: vec![] };
//! let report = router.apply(vec![
//!     TenantChange::put("acme", ["acme.test"], empty.clone()),
//!     TenantChange::put("globex", ["globex.test", "www.globex.test"], empty),
//! ]);
//! assert!(report.failed.is_empty());
//! assert_eq!(router.select("ACME.test:8443").unwrap().id(), "acme");
//! assert_eq!(router.select("www.globex.test.").unwrap().id(), "globex");
//! assert!(router.select("initech.test").is_none());
//! ```
mod changes;
mod counters;
mod host;
pub(crate) mod host_table;
mod policy;
mod router;
pub(crate) mod sni;
mod table;

pub use changes::{ApplyReport, TenantChange, TenantChangeError};
pub use counters::TenantCounters;
pub use host::tenant_host;
pub(crate) use host::HostMap;
pub use policy::{TenantPolicy, TenantRules};
pub use router::TenantRouter;
pub(crate) use table::RequestHosts;
pub use table::SelectedTenant;

/// The label value under which tenants without their own series are counted.
pub const OTHER_TENANTS: &str = "_other";

#[cfg(test)]
mod tests {
    use super::table::Routed;
    use super::*;
    use crate::decision::AclVerdict;
    use netacl_eval::Engine;
    use netacl_model::{Limits, RuleSet};
    use std::sync::Arc;

    fn empty(version: u64) -> RuleSet {
        RuleSet {
            version,
            acls: vec![],
        }
    }

    #[test]
    fn hosts_are_normalised() {
        assert_eq!(tenant_host("Acme.Test:8443"), Some("Acme.Test"));
        assert_eq!(tenant_host("acme.test."), Some("acme.test"));
        assert_eq!(tenant_host("acme.test.:443"), Some("acme.test"));
        assert_eq!(tenant_host("[2001:db8::1]:443"), Some("2001:db8::1"));
        assert_eq!(tenant_host(" acme.test "), Some("acme.test"));
        assert_eq!(tenant_host("\tacme.test\t"), Some("acme.test"));
        // Only ASCII blanks are trimmed: a name with another space character around it is
        // another name (which no tenant has).
        assert_eq!(tenant_host("\u{a0}acme.test"), Some("\u{a0}acme.test"));
        assert_eq!(tenant_host(":80"), None);
        assert_eq!(tenant_host(""), None);
        assert_eq!(tenant_host("."), None);
        assert_eq!(tenant_host(&"a".repeat(254)), None);
        // The port is the digits after the last colon, whatever comes before.
        assert_eq!(tenant_host("acme.test:"), Some("acme.test"));
        assert_eq!(tenant_host("a:b:8443"), Some("a:b"));
        assert_eq!(tenant_host("a:8b"), Some("a:8b"));
        assert_eq!(tenant_host("t1.example"), Some("t1.example"));
        assert_eq!(tenant_host("10.0.0.1:80"), Some("10.0.0.1"));
        assert_eq!(tenant_host("10.0.0.1"), Some("10.0.0.1"));
        assert_eq!(tenant_host("8443"), Some("8443"));
        // Against the definition (`rsplit_once(':')`, a port of digits only) on many shapes.
        for value in [
            "x:", "x::1", ":1:2", "1:2:x", "a.b:0", "a.b:0x", "::", "9:9", "a:", "a",
        ] {
            let by_definition = match value.rsplit_once(':') {
                Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
                _ => value,
            };
            let by_definition = by_definition.strip_suffix('.').unwrap_or(by_definition);
            assert_eq!(
                tenant_host(value),
                (!by_definition.is_empty()).then_some(by_definition),
                "{value}"
            );
        }
    }

    #[test]
    fn lookups_ignore_case_and_do_not_cross_tenants() {
        let router = TenantRouter::new();
        let report = router.apply(vec![
            TenantChange::put("a", ["A.example", "www.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert_eq!(report.added, 2);
        assert_eq!(router.select("a.EXAMPLE").unwrap().id(), "a");
        assert_eq!(router.select("WWW.A.example.:80").unwrap().id(), "a");
        assert_eq!(router.select("b.example").unwrap().id(), "b");
        assert!(router.select("c.example").is_none());
        assert!(router.select("a.example.b.example").is_none());
        // A long host (beyond one fold buffer) is looked up like any other.
        let long = format!("{}.example", "x".repeat(100));
        router.apply(vec![TenantChange::put("long", [long.as_str()], empty(1))]);
        assert_eq!(
            router.select(&long.to_ascii_uppercase()).unwrap().id(),
            "long"
        );
        // IDN: a U-label does not match its A-label (domains are configured in A-labels).
        router.apply(vec![TenantChange::put(
            "idn",
            ["xn--caf-dma.example"],
            empty(1),
        )]);
        assert!(router.select("café.example").is_none());
        assert_eq!(router.select("XN--CAF-DMA.example").unwrap().id(), "idn");
    }

    #[test]
    fn a_rule_change_recompiles_only_its_tenant_and_keeps_the_table() {
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        let b = router.tenant("b").unwrap();
        let table = router.table.load_full();
        let report = router.apply(vec![TenantChange::put("a", ["a.example"], empty(2))]);
        assert_eq!(report.compiled, 1);
        assert!(
            Arc::ptr_eq(&table, &router.table.load_full()),
            "table rebuilt"
        );
        assert_eq!(router.tenant("a").unwrap().engine().policy().version(), 2);
        assert_eq!(router.tenant("a").unwrap().compiles(), 2);
        assert_eq!(b.compiles(), 1);
        assert_eq!(b.engine().policy().version(), 1);
    }

    /// The version a request for `host` is decided by, as the per-request path reads it.
    fn decided_version(router: &TenantRouter, host: &str) -> Option<u64> {
        router.with_tenant(host, |t| t.policy().version())
    }

    #[test]
    fn the_host_table_serves_each_rule_change_at_once() {
        let mut hints_checked = 0;
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example", "www.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        for version in 2..40 {
            // Rules alone (the table stays), then rules with a tenant added or removed in the
            // same batch (a new table), then two changes of one tenant in one batch.
            let batch = match version % 3 {
                0 => vec![TenantChange::put(
                    "a",
                    ["a.example", "www.a.example"],
                    empty(version),
                )],
                1 => vec![
                    TenantChange::put("a", ["a.example", "www.a.example"], empty(version)),
                    TenantChange::put(
                        &format!("c{version}"),
                        [format!("c{version}.example")],
                        empty(1),
                    ),
                ],
                _ => vec![
                    TenantChange::put("a", ["a.example", "www.a.example"], empty(version + 100)),
                    TenantChange::remove(&format!("c{}", version - 1)),
                    TenantChange::put("a", ["a.example", "www.a.example"], empty(version)),
                ],
            };
            let report = router.apply(batch);
            assert!(report.failed.is_empty(), "{:?}", report.failed);
            for host in ["a.example", "WWW.A.example:443"] {
                assert_eq!(decided_version(&router, host), Some(version), "{host}");
            }
            assert_eq!(decided_version(&router, "b.example"), Some(1));
            // The hint requested with each host's slot is the policy in service.
            for host in ["a.example", "www.a.example", "b.example"] {
                let table = router.table.load();
                let in_service = table
                    .tenant(host)
                    .map(|t| Arc::as_ptr(&*t.policy()) as usize);
                if let Some(hint) = table.hosts.hint_of(host) {
                    assert_eq!(Some(hint), in_service, "{host}");
                    hints_checked += 1;
                }
            }
            assert_eq!(
                router.tenant("a").unwrap().engine().policy().version(),
                version
            );
        }
        // New domains with new rules in one change: the old host names no tenant, the new
        // one is decided by the new rules; then the rules change again, the table staying.
        router.apply(vec![TenantChange::put("a", ["new.a.example"], empty(50))]);
        assert_eq!(decided_version(&router, "a.example"), None);
        assert_eq!(decided_version(&router, "new.a.example"), Some(50));
        router.apply(vec![TenantChange::put("a", ["new.a.example"], empty(51))]);
        assert_eq!(decided_version(&router, "new.a.example"), Some(51));
        // Three or four hosts in a table of at least eight slots: most of the 114 checks
        // find their host alone in its first slot.
        assert!(hints_checked > 60, "{hints_checked}");
        // Rules that do not compile (one rule twice) leave the policy in service, in the
        // table too.
        let mut bad = RuleSet::from_json(
            &serde_json::json!([{
                "id": netacl_model::AclId::from_random(7).to_string(), "description": "",
                "active": true, "priority": 1,
                "rule": {"action": {"block": true}, "scope": "tenant",
                         "match": {"asns": [1]}},
                "created_at": "2026-01-01T00:00:00.000Z",
                "updated_at": "2026-01-01T00:00:00.000Z"
            }]),
            52,
            &Limits::default(),
        )
        .unwrap();
        bad.acls.push(bad.acls[0].clone());
        let report = router.apply([TenantChange::put("a", ["new.a.example"], bad)]);
        assert!(matches!(
            report.failed.as_slice(),
            [TenantChangeError::Compile { .. }]
        ));
        assert_eq!(decided_version(&router, "new.a.example"), Some(51));
    }

    #[test]
    fn a_followed_engine_decides_as_its_feeder_installs() {
        let router = TenantRouter::new();
        let engine = Arc::new(Engine::new());
        engine.publish(&empty(3)).unwrap();
        let follow = |rules: TenantRules| TenantChange::Put {
            id: "f".into(),
            domains: vec!["f.example".into()],
            rules,
        };
        router.apply([follow(TenantRules::Follow {
            engine: Arc::clone(&engine),
            rules: None,
        })]);
        assert_eq!(decided_version(&router, "f.example"), Some(3));
        // Its slot's hint is the engine, the line a request reads next.
        assert_eq!(
            router.table.load().hosts.hint_of("f.example"),
            Some(Arc::as_ptr(&engine) as usize)
        );
        // Its feeder installs without telling the router: the next request sees it.
        engine.publish(&empty(4)).unwrap();
        assert_eq!(decided_version(&router, "f.example"), Some(4));
        // Rules compiled by the router into a followed engine, and a change of domains that
        // keeps the rules: still the engine's policy at each request.
        router.apply([TenantChange::put("f", ["f.example"], empty(5))]);
        assert_eq!(decided_version(&router, "f.example"), Some(5));
        router.apply([follow(TenantRules::Keep)]);
        engine.publish(&empty(6)).unwrap();
        assert_eq!(decided_version(&router, "f.example"), Some(6));
    }

    #[test]
    fn removal_and_domain_changes() {
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example", "old.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        // A domain held by another tenant is refused; the tenant stays as it was.
        let report = router.apply(vec![TenantChange::put("b", ["a.example"], empty(2))]);
        assert!(matches!(
            report.failed.as_slice(),
            [TenantChangeError::DomainTaken { .. }]
        ));
        assert_eq!(router.select("a.example").unwrap().id(), "a");
        assert_eq!(router.select("b.example").unwrap().id(), "b");
        // Domains change: the old one names no tenant; the engine (and its policy) stays.
        let engine = router.tenant("a").unwrap().engine().clone();
        let report = router.apply(vec![TenantChange::Put {
            id: "a".into(),
            domains: vec!["new.a.example".into(), "a.example".into()],
            rules: TenantRules::Keep,
        }]);
        assert!(report.failed.is_empty());
        assert!(router.select("old.a.example").is_none());
        assert!(Arc::ptr_eq(
            router.select("new.a.example").unwrap().engine(),
            &engine
        ));
        // Removal, and a domain moving to another tenant in the same batch.
        let report = router.apply(vec![
            TenantChange::remove("a"),
            TenantChange::put("b", ["b.example", "a.example"], empty(3)),
        ]);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert_eq!(report.removed, 1);
        assert!(router.tenant("a").is_none());
        assert!(router.select("new.a.example").is_none());
        assert_eq!(router.select("a.example").unwrap().id(), "b");
        assert_eq!(router.len(), 1);
    }

    #[test]
    fn bad_domains_are_refused() {
        let router = TenantRouter::new();
        let report = router.apply(vec![TenantChange::put("a", ["", "a.example"], empty(1))]);
        assert!(matches!(
            report.failed.as_slice(),
            [TenantChangeError::InvalidDomain { .. }]
        ));
        assert!(router.is_empty());
    }

    use crate::enforce::connection::TlsInfo;

    fn tls(sni: Option<&str>) -> TlsInfo {
        TlsInfo::new(sni, &"0".repeat(32), "t13d1516h2_8daaf6152771_b186095e22b6")
    }

    #[test]
    fn request_selection_refuses_fronting() {
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example", "www.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        let pick = |tls: Option<&TlsInfo>, host: Option<&str>, authority: Option<&str>| {
            router
                .select_request(
                    RequestHosts {
                        tls: tls.is_some(),
                        sni: tls.and_then(|t| t.sni.as_deref()),
                        host_header: host,
                        authority,
                    },
                    |h| h.eq_ignore_ascii_case("b.example"),
                )
                .map(|t| t.id().to_owned())
        };
        let a = tls(Some("a.example"));
        assert_eq!(
            pick(Some(&a), Some("a.example"), None).as_deref(),
            Some("a")
        );
        // Another domain of the same tenant is fine.
        assert_eq!(
            pick(Some(&a), Some("WWW.a.example:443"), None).as_deref(),
            Some("a")
        );
        // No Host (HTTP/1.0) over TLS: the SNI decides.
        assert_eq!(pick(Some(&a), None, None).as_deref(), Some("a"));
        // SNI of one tenant, Host (or authority) of another or of none: fronting.
        assert_eq!(pick(Some(&a), Some("b.example"), None), None);
        assert_eq!(pick(Some(&a), Some("c.example"), None), None);
        assert_eq!(pick(Some(&a), None, Some("b.example")), None);
        // Unknown SNI.
        assert_eq!(
            pick(Some(&tls(Some("c.example"))), Some("a.example"), None),
            None
        );
        // No SNI: the host decides, unless that host has its own certificate.
        let none = tls(None);
        assert_eq!(
            pick(Some(&none), Some("a.example"), None).as_deref(),
            Some("a")
        );
        assert_eq!(pick(Some(&none), Some("b.example"), None), None);
        assert_eq!(pick(Some(&none), None, None), None);
        // Plain HTTP.
        assert_eq!(
            pick(None, Some("B.example:8080"), None).as_deref(),
            Some("b")
        );
        assert_eq!(pick(None, None, Some("b.example")).as_deref(), Some("b"));
        assert_eq!(pick(None, Some("b.example"), Some("a.example")), None);
        assert_eq!(pick(None, None, None), None);
        assert_eq!(pick(None, Some("c.example"), None), None);
    }

    #[test]
    fn a_host_entry_is_one_pair_of_cache_lines() {
        assert_eq!(crate::tenants::host_table::slot_bytes::<Routed>(), 128);
    }

    #[test]
    fn loading_many_tenants_is_one_table() {
        let router = TenantRouter::new();
        let changes: Vec<_> = (0..2_000)
            .map(|i| TenantChange::put(&format!("t{i}"), [format!("t{i}.example")], empty(1)))
            .collect();
        let report = router.apply(changes);
        assert_eq!(report.added, 2_000);
        assert_eq!(report.compiled, 2_000);
        for i in (0..2_000).step_by(97) {
            assert_eq!(
                router.select(&format!("T{i}.EXAMPLE")).unwrap().id(),
                format!("t{i}")
            );
        }
    }

    #[test]
    fn metrics_name_only_counted_tenants() {
        let router = TenantRouter::with_counted_tenants(["a"]);
        router.apply(vec![
            TenantChange::put("a", ["a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
            TenantChange::put("c", ["c.example"], empty(1)),
        ]);
        router
            .select("a.example")
            .unwrap()
            .counters()
            .record(AclVerdict::Block);
        router
            .select("b.example")
            .unwrap()
            .counters()
            .record(AclVerdict::Block);
        router
            .select("c.example")
            .unwrap()
            .counters()
            .record(AclVerdict::None);
        let text = router.render_prometheus();
        assert!(
            text.contains("netacl_edge_tenant_requests_total{tenant=\"a\",verdict=\"block\"} 1")
        );
        assert!(text
            .contains("netacl_edge_tenant_requests_total{tenant=\"_other\",verdict=\"block\"} 1"));
        assert!(text
            .contains("netacl_edge_tenant_requests_total{tenant=\"_other\",verdict=\"none\"} 1"));
        assert!(!text.contains("tenant=\"b\""));
        assert!(text.contains("netacl_edge_tenants 3"));
    }
}
