//! The reference evaluator: a direct transcription of the semantics over the [`RuleSet`], with
//! no index and no cleverness. It is the oracle the compiled evaluator is tested against; it
//! costs time linear in the number of rules and entries, so it is not for production.
//!
//! ```
//! use netacl_eval::{reference, Request, Verdict};
//! use netacl_model::{RequestScope, RuleSet};
//!
//! let empty = RuleSet::default();
//! let outcome = reference::evaluate(&empty, &Request::new(RequestScope::Authentication));
//! assert_eq!(outcome.action, Verdict::None);
//! ```

use std::net::IpAddr;

use netacl_model::{Action, Criteria, ManagedEntry, ManagedLists, NetworkAcl, RuleSet, Signal};

use crate::{Outcome, Request, Verdict};

/// Evaluates `request` against `rules` by scanning them in order, with no managed list
/// configured.
pub fn evaluate(rules: &RuleSet, request: &Request<'_>) -> Outcome {
    evaluate_with_lists(rules, &ManagedLists::new(), request)
}

/// Evaluates `request` against `rules` by scanning them in order; a rule naming a managed list
/// (`auth0_managed`) is matched against the content `lists` holds for it (nothing when the list
/// has none).
pub fn evaluate_with_lists(
    rules: &RuleSet,
    lists: &ManagedLists,
    request: &Request<'_>,
) -> Outcome {
    // 1. Active rules whose scope covers the request, 2. in ascending priority, ties by id.
    let mut considered: Vec<&NetworkAcl> = rules
        .acls
        .iter()
        .filter(|acl| acl.spec.active && acl.spec.rule.scope().covers(request.scope()))
        .collect();
    considered.sort_by(|a, b| {
        (a.spec.priority, a.id.as_str().as_bytes())
            .cmp(&(b.spec.priority, b.id.as_str().as_bytes()))
    });

    let mut monitored = Vec::new();
    for acl in considered {
        let rule = &acl.spec.rule;
        // 3. `match` holds when every named signal matches; `not_match` when none does.
        // `match_all` has neither: both hold.
        let match_holds = rule
            .match_criteria()
            .is_none_or(|c| c.signals().all(|s| signal_matches(c, s, lists, request)));
        let not_match_holds = rule
            .not_match()
            .is_none_or(|c| c.signals().all(|s| !signal_matches(c, s, lists, request)));
        if !(match_holds && not_match_holds) {
            continue;
        }
        // 4. The first terminal action decides; `log` is recorded and evaluation continues.
        let (action, redirect_uri) = match rule.action() {
            Action::Log => {
                monitored.push(acl.id.to_string());
                continue;
            }
            Action::Block => (Verdict::Block, None),
            Action::Allow => (Verdict::Allow, None),
            Action::Redirect { redirect_uri } => (Verdict::Redirect, Some(redirect_uri.clone())),
        };
        return Outcome {
            action,
            rule_id: Some(acl.id.to_string()),
            redirect_uri,
            monitored,
        };
    }
    // 5. No rule decided.
    Outcome {
        action: Verdict::None,
        rule_id: None,
        redirect_uri: None,
        monitored,
    }
}

/// Whether the request's value of `signal` equals one of the values `criteria` lists for it.
/// A missing request value equals nothing.
fn signal_matches(
    criteria: &Criteria,
    signal: Signal,
    lists: &ManagedLists,
    request: &Request<'_>,
) -> bool {
    fn address_in(
        ip: Option<IpAddr>,
        v4: Option<&[netacl_model::CidrEntry<ipnet::Ipv4Net>]>,
        v6: Option<&[netacl_model::CidrEntry<ipnet::Ipv6Net>]>,
    ) -> bool {
        match ip {
            Some(IpAddr::V4(a)) => v4.unwrap_or(&[]).iter().any(|e| e.net().contains(&a)),
            Some(IpAddr::V6(a)) => v6.unwrap_or(&[]).iter().any(|e| e.net().contains(&a)),
            None => false,
        }
    }
    match signal {
        Signal::ClientIp => address_in(
            request.client_ip(),
            criteria.ipv4_cidrs(),
            criteria.ipv6_cidrs(),
        ),
        Signal::ConnectingIp => address_in(
            request.connecting_ip(),
            criteria.connecting_ipv4_cidrs(),
            criteria.connecting_ipv6_cidrs(),
        ),
        Signal::Asn => request
            .asn()
            .is_some_and(|asn| criteria.asns().unwrap_or(&[]).contains(&asn)),
        Signal::Country => request.country().is_some_and(|code| {
            criteria
                .geo_country_codes()
                .unwrap_or(&[])
                .iter()
                .any(|c| c.text().eq_ignore_ascii_case(code))
        }),
        Signal::Subdivision => request.subdivision().is_some_and(|code| {
            criteria
                .geo_subdivision_codes()
                .unwrap_or(&[])
                .iter()
                .any(|c| c.text().eq_ignore_ascii_case(code))
        }),
        Signal::Ja3 => request.ja3().is_some_and(|ja3| {
            criteria
                .ja3_fingerprints()
                .unwrap_or(&[])
                .iter()
                .any(|f| f.bytes() == ja3)
        }),
        Signal::Ja4 => request.ja4().is_some_and(|ja4| {
            criteria
                .ja4_fingerprints()
                .unwrap_or(&[])
                .iter()
                .any(|f| f.text().eq_ignore_ascii_case(ja4))
        }),
        Signal::UserAgent => request.user_agent().is_some_and(|ua| {
            criteria
                .user_agents()
                .unwrap_or(&[])
                .iter()
                .any(|p| p.matches(ua))
        }),
        Signal::Hostname => request.hostname().is_some_and(|host| {
            criteria
                .hostnames()
                .unwrap_or(&[])
                .iter()
                .any(|h| h.text().trim_end_matches('.').eq_ignore_ascii_case(host))
        }),
        // The client address, the JA3 or the JA4 is an entry of one of the named lists.
        Signal::MessageSignature => request.message_signature().is_some_and(|key| {
            criteria
                .http_message_signature()
                .unwrap_or(&[])
                .iter()
                .any(|id| id.as_str() == key)
        }),
        Signal::Managed => criteria
            .auth0_managed()
            .unwrap_or(&[])
            .iter()
            .filter_map(|&name| lists.get(name))
            .flat_map(|list| list.items())
            .any(|entry| match entry {
                ManagedEntry::Ipv4(e) => {
                    matches!(request.client_ip(), Some(IpAddr::V4(a)) if e.net().contains(&a))
                }
                ManagedEntry::Ipv6(e) => {
                    matches!(request.client_ip(), Some(IpAddr::V6(a)) if e.net().contains(&a))
                }
                ManagedEntry::Ja3(f) => request.ja3() == Some(f.bytes()),
                ManagedEntry::Ja4(f) => request
                    .ja4()
                    .is_some_and(|ja4| f.text().eq_ignore_ascii_case(ja4)),
            }),
    }
}
