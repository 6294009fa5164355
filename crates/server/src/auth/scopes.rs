//! The management API's scopes.
//!
//! Every `<verb>:<resource>` scope declared by the tenant management interface
//! (`tenant-service-interface.md`, "Declared scopes"), expanded from its CRUD letters
//! (C = create, R = read, U = update, D = delete). The bootstrap client is granted all of
//! them; a unit test re-derives the list from the specification and compares.

/// Every management scope, resource by resource in the specification's order, verbs in
/// create/read/update/delete order.
pub const MANAGEMENT_SCOPES: &[&str] = &[
    "create:actions",
    "read:actions",
    "update:actions",
    "delete:actions",
    "read:anomaly_blocks",
    "delete:anomaly_blocks",
    "read:attack_protection",
    "update:attack_protection",
    "create:authentication_methods",
    "read:authentication_methods",
    "update:authentication_methods",
    "delete:authentication_methods",
    "read:branding",
    "update:branding",
    "delete:branding",
    "create:client_credentials",
    "read:client_credentials",
    "update:client_credentials",
    "delete:client_credentials",
    "create:client_grants",
    "read:client_grants",
    "update:client_grants",
    "delete:client_grants",
    "read:client_keys",
    "update:client_keys",
    "read:client_summary",
    "update:client_token_vault_privileged_access",
    "create:clients",
    "read:clients",
    "update:clients",
    "delete:clients",
    "create:connection_profiles",
    "read:connection_profiles",
    "update:connection_profiles",
    "delete:connection_profiles",
    "create:connections",
    "read:connections",
    "update:connections",
    "delete:connections",
    "create:connections_keys",
    "read:connections_keys",
    "update:connections_keys",
    "read:current_user",
    "delete:current_user",
    "create:current_user_device_credentials",
    "delete:current_user_device_credentials",
    "update:current_user_identities",
    "update:current_user_metadata",
    "create:custom_domains",
    "read:custom_domains",
    "update:custom_domains",
    "delete:custom_domains",
    "create:custom_signing_keys",
    "read:custom_signing_keys",
    "update:custom_signing_keys",
    "delete:custom_signing_keys",
    "read:device_credentials",
    "delete:device_credentials",
    "create:directory_provisionings",
    "read:directory_provisionings",
    "update:directory_provisionings",
    "delete:directory_provisionings",
    "create:email_provider",
    "read:email_provider",
    "update:email_provider",
    "delete:email_provider",
    "create:email_templates",
    "read:email_templates",
    "update:email_templates",
    "create:encryption_keys",
    "read:encryption_keys",
    "update:encryption_keys",
    "delete:encryption_keys",
    "read:event_deliveries",
    "update:event_deliveries",
    "create:event_streams",
    "read:event_streams",
    "update:event_streams",
    "delete:event_streams",
    "read:events",
    "create:experimentation",
    "read:experimentation",
    "update:experimentation",
    "delete:experimentation",
    "read:federated_connections_tokens",
    "delete:federated_connections_tokens",
    "create:flows",
    "read:flows",
    "update:flows",
    "delete:flows",
    "read:flows_executions",
    "delete:flows_executions",
    "create:flows_vault_connections",
    "read:flows_vault_connections",
    "update:flows_vault_connections",
    "delete:flows_vault_connections",
    "create:forms",
    "read:forms",
    "update:forms",
    "delete:forms",
    "read:grants",
    "delete:grants",
    "read:group_members",
    "create:group_roles",
    "read:group_roles",
    "delete:group_roles",
    "read:groups",
    "delete:groups",
    "create:guardian_enrollment_tickets",
    "read:guardian_enrollments",
    "delete:guardian_enrollments",
    "read:guardian_factors",
    "update:guardian_factors",
    "create:hooks",
    "read:hooks",
    "update:hooks",
    "delete:hooks",
    "create:log_streams",
    "read:log_streams",
    "update:log_streams",
    "delete:log_streams",
    "read:logs",
    "read:logs_users",
    "read:mfa_policies",
    "update:mfa_policies",
    "create:network_acls",
    "read:network_acls",
    "update:network_acls",
    "delete:network_acls",
    "create:organization_client_grants",
    "read:organization_client_grants",
    "delete:organization_client_grants",
    "create:organization_connections",
    "read:organization_connections",
    "update:organization_connections",
    "delete:organization_connections",
    "create:organization_discovery_domains",
    "read:organization_discovery_domains",
    "update:organization_discovery_domains",
    "delete:organization_discovery_domains",
    "create:organization_group_roles",
    "read:organization_group_roles",
    "delete:organization_group_roles",
    "read:organization_groups",
    "create:organization_invitations",
    "read:organization_invitations",
    "delete:organization_invitations",
    "read:organization_member_effective_roles",
    "read:organization_member_role_source_groups",
    "create:organization_member_roles",
    "read:organization_member_roles",
    "delete:organization_member_roles",
    "create:organization_members",
    "read:organization_members",
    "delete:organization_members",
    "create:organizations",
    "read:organizations",
    "update:organizations",
    "delete:organizations",
    "read:organizations_summary",
    "create:phone_providers",
    "read:phone_providers",
    "update:phone_providers",
    "delete:phone_providers",
    "create:phone_templates",
    "read:phone_templates",
    "update:phone_templates",
    "delete:phone_templates",
    "read:prompts",
    "update:prompts",
    "create:rate_limit_policies",
    "read:rate_limit_policies",
    "update:rate_limit_policies",
    "delete:rate_limit_policies",
    "read:refresh_tokens",
    "update:refresh_tokens",
    "delete:refresh_tokens",
    "create:resource_servers",
    "read:resource_servers",
    "update:resource_servers",
    "delete:resource_servers",
    "create:role_members",
    "read:role_members",
    "delete:role_members",
    "create:roles",
    "read:roles",
    "update:roles",
    "delete:roles",
    "create:rules",
    "read:rules",
    "update:rules",
    "delete:rules",
    "read:rules_configs",
    "update:rules_configs",
    "delete:rules_configs",
    "create:scim_config",
    "read:scim_config",
    "update:scim_config",
    "delete:scim_config",
    "create:scim_token",
    "read:scim_token",
    "delete:scim_token",
    "read:self_service_profile_custom_texts",
    "update:self_service_profile_custom_texts",
    "create:self_service_profiles",
    "read:self_service_profiles",
    "update:self_service_profiles",
    "delete:self_service_profiles",
    "read:sessions",
    "update:sessions",
    "delete:sessions",
    "create:signing_keys",
    "read:signing_keys",
    "update:signing_keys",
    "create:sso_access_tickets",
    "delete:sso_access_tickets",
    "read:stats",
    "read:tenant_settings",
    "update:tenant_settings",
    "create:token_exchange_profiles",
    "read:token_exchange_profiles",
    "update:token_exchange_profiles",
    "delete:token_exchange_profiles",
    "create:user_attribute_profiles",
    "read:user_attribute_profiles",
    "update:user_attribute_profiles",
    "delete:user_attribute_profiles",
    "read:user_effective_permissions",
    "read:user_effective_roles",
    "read:user_idp_tokens",
    "read:user_permission_source_roles",
    "read:user_role_source_groups",
    "create:user_tickets",
    "create:users",
    "read:users",
    "update:users",
    "delete:users",
    "update:users_app_metadata",
    "create:vdcs_templates",
    "read:vdcs_templates",
    "update:vdcs_templates",
    "delete:vdcs_templates",
];

/// Whether `scope` is one of [`MANAGEMENT_SCOPES`] (exact comparison).
pub fn is_management_scope(scope: &str) -> bool {
    MANAGEMENT_SCOPES.contains(&scope) || ADDED_SCOPES.contains(&scope)
}

/// Scopes the public service added after the interface specification was written (the
/// network ACL keys), and netacl's own. The bootstrap client gets them too, also when it was
/// stored by an earlier version (see [`with_added_scopes`]), except [`KEY_MATERIAL_SCOPE`],
/// which only a client given it explicitly holds (an edge client: [`EDGE_CLIENT_SCOPES`]).
pub const ADDED_SCOPES: &[&str] = &[
    "create:network_acl_keys",
    "read:network_acl_keys",
    "delete:network_acl_keys",
    // netacl's own: receive network ACL key material (sealed to the edge) with the watch.
    KEY_MATERIAL_SCOPE,
    // netacl's own: a remote edge reports its per-rule counts into the tenant's logs.
    "create:edge_summaries",
];

/// The scope that lets a watch caller receive network ACL key material (sealed to it). No
/// client holds it unless it was given it explicitly: the bootstrap client does not.
pub const KEY_MATERIAL_SCOPE: &str = "read:network_acl_key_material";

/// The scopes of an edge client (`POST /_netacl/v1/tenants/{id}/edge-clients`): follow the
/// rules with the watch, receive key material sealed to the edge, report per-rule counts and
/// the traffic sample.
pub const EDGE_CLIENT_SCOPES: &[&str] = &[
    "read:network_acls",
    KEY_MATERIAL_SCOPE,
    "create:edge_summaries",
];

/// The scopes a bootstrap client is created with: every management scope and every added one
/// but [`KEY_MATERIAL_SCOPE`].
pub fn bootstrap_scopes() -> Vec<String> {
    MANAGEMENT_SCOPES
        .iter()
        .chain(ADDED_SCOPES)
        .filter(|s| **s != KEY_MATERIAL_SCOPE)
        .map(|s| (*s).to_owned())
        .collect()
}

/// Whether `scopes` are a bootstrap client's: every scope of [`MANAGEMENT_SCOPES`].
pub fn is_bootstrap(scopes: &[String]) -> bool {
    MANAGEMENT_SCOPES
        .iter()
        .all(|s| scopes.iter().any(|have| have == s))
}

/// A stored client's scopes as served: a bootstrap client ([`is_bootstrap`]; one stored by an
/// earlier version too) gets [`ADDED_SCOPES`] but never [`KEY_MATERIAL_SCOPE`], which an
/// earlier version stored with it; any other client has exactly its stored scopes.
pub fn with_added_scopes(scopes: &[String]) -> Vec<String> {
    if !is_bootstrap(scopes) {
        return scopes.to_vec();
    }
    let mut out: Vec<String> = scopes
        .iter()
        .filter(|s| *s != KEY_MATERIAL_SCOPE)
        .cloned()
        .collect();
    for added in ADDED_SCOPES {
        if *added != KEY_MATERIAL_SCOPE && !out.iter().any(|have| have == added) {
            out.push((*added).to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_bootstrap_client_never_holds_the_key_material_scope() {
        let stored_by_an_earlier_version: Vec<String> = MANAGEMENT_SCOPES
            .iter()
            .chain(ADDED_SCOPES)
            .map(|s| s.to_string())
            .collect();
        for scopes in [stored_by_an_earlier_version, bootstrap_scopes()] {
            let served = with_added_scopes(&scopes);
            assert!(!served.iter().any(|s| s == KEY_MATERIAL_SCOPE));
            assert!(served.iter().any(|s| s == "create:edge_summaries"));
            assert!(served.iter().any(|s| s == "read:network_acl_keys"));
        }
        let edge: Vec<String> = EDGE_CLIENT_SCOPES.iter().map(|s| s.to_string()).collect();
        assert_eq!(with_added_scopes(&edge), edge);
    }

    /// Re-derive the list from the specification text so the constant cannot drift.
    #[test]
    fn matches_the_declared_scopes_of_the_specification() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/spec/tenant-service-interface.md"
        );
        let spec = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read the interface specification {path}: {e}"));
        let start = spec
            .find("Declared scopes")
            .expect("the specification has a 'Declared scopes' section");
        let mut expected = Vec::new();
        for line in spec[start..].lines().skip(1) {
            if line.starts_with("## ") {
                break;
            }
            let Some(item) = line.strip_prefix("- ") else {
                continue;
            };
            let (resource, letters) = item.split_once(": ").expect("`- resource: CRUD` line");
            for (letter, verb) in [
                ('C', "create"),
                ('R', "read"),
                ('U', "update"),
                ('D', "delete"),
            ] {
                if letters.contains(letter) {
                    expected.push(format!("{verb}:{resource}"));
                }
            }
        }
        assert!(
            expected.len() > 200,
            "parsed only {} scopes",
            expected.len()
        );
        let ours: Vec<String> = MANAGEMENT_SCOPES.iter().map(|s| s.to_string()).collect();
        assert_eq!(ours, expected);
    }

    #[test]
    fn scopes_are_unique_and_well_formed() {
        let unique: HashSet<&str> = MANAGEMENT_SCOPES.iter().copied().collect();
        assert_eq!(unique.len(), MANAGEMENT_SCOPES.len());
        for scope in MANAGEMENT_SCOPES {
            let (verb, resource) = scope.split_once(':').expect("verb:resource");
            assert!(
                ["create", "read", "update", "delete"].contains(&verb),
                "{scope}"
            );
            assert!(
                !resource.is_empty() && !resource.contains(char::is_whitespace),
                "{scope}"
            );
        }
        for needed in [
            "create:network_acls",
            "read:network_acls",
            "update:network_acls",
            "delete:network_acls",
            "create:organizations",
            "read:group_members",
            "read:sessions",
            "update:branding",
        ] {
            assert!(is_management_scope(needed), "{needed}");
        }
        assert!(!is_management_scope("create:network_aclsX"));
    }
}
