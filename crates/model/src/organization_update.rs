//! Organizations after their create: the `PATCH /organizations/{id}` body, the stored record read
//! back, and the record as `GET` answers it.
use serde_json::{Map, Value};

use crate::organization::{
    Organization, OrganizationBranding, OrganizationId, OrganizationSpec, TokenQuota,
};
use crate::schema::{ObjectReader, ObjectSchema};
use crate::ValidationError;

/// A validated `PATCH /organizations/{id}` body: the members it gives, each replacing the stored
/// one whole (`branding` and `metadata` are not merged member by member; `token_quota: null`
/// removes the quota).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationPatch {
    /// A new name (unique in the tenant: the store answers a taken one).
    pub name: Option<String>,
    /// A new display name.
    pub display_name: Option<String>,
    /// New branding, replacing the stored one.
    pub branding: Option<OrganizationBranding>,
    /// New metadata, replacing the stored object (body order).
    pub metadata: Option<Vec<(String, Option<String>)>>,
    /// `Some(None)`: `token_quota: null`, the quota is removed; `Some(Some(q))`: replaced.
    pub token_quota: Option<Option<TokenQuota>>,
}

const PATCH: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "name",
        "display_name",
        "branding",
        "metadata",
        "token_quota",
    ],
    required: &[],
    min_properties: 1,
};

/// A name that passes the create's `organization-name` check, standing in for an absent `name`
/// so that the other members go through the create's validator unchanged.
const STAND_IN_NAME: &str = "a";

impl OrganizationPatch {
    /// Validates a PATCH body: an object of at least one of `name`, `display_name`, `branding`,
    /// `metadata`, `token_quota` (nothing else), each member checked exactly as the create
    /// checks it (same rules, same messages, same property paths); `token_quota` may also be
    /// `null`.
    pub fn from_json(body: &Value) -> Result<Self, ValidationError> {
        let o = ObjectReader::new(body, "", &PATCH)?;
        // The members are validated by the create's own validator, so that the two bodies can
        // never disagree on a rule: a create body is assembled from the given members (with a
        // stand-in name when none is given) and read back.
        let mut create = Map::new();
        let name = o.get("name").cloned();
        create.insert(
            "name".into(),
            name.clone().unwrap_or_else(|| STAND_IN_NAME.into()),
        );
        for key in ["display_name", "branding", "metadata"] {
            if let Some(value) = o.get(key) {
                create.insert(key.into(), value.clone());
            }
        }
        // None: absent; Some(false): null (remove the quota); Some(true): a quota to validate.
        let quota_given = match o.get("token_quota") {
            None => None,
            Some(Value::Null) => Some(false),
            Some(value) => {
                create.insert("token_quota".into(), value.clone());
                Some(true)
            }
        };
        let spec = OrganizationSpec::from_json(&Value::Object(create))?;
        Ok(Self {
            name: name.map(|_| spec.name),
            display_name: spec.display_name,
            branding: spec.branding,
            metadata: spec.metadata,
            token_quota: quota_given.map(|given| if given { spec.token_quota } else { None }),
        })
    }

    /// The organization with this patch applied (what the store writes).
    pub fn apply(&self, organization: &Organization) -> Organization {
        let mut updated = organization.clone();
        let spec = &mut updated.spec;
        if let Some(name) = &self.name {
            spec.name = name.clone();
        }
        if let Some(display_name) = &self.display_name {
            spec.display_name = Some(display_name.clone());
        }
        if let Some(branding) = &self.branding {
            spec.branding = Some(branding.clone());
        }
        if let Some(metadata) = &self.metadata {
            spec.metadata = Some(metadata.clone());
        }
        if let Some(token_quota) = self.token_quota {
            spec.token_quota = token_quota;
        }
        updated
    }
}

impl Organization {
    /// Reads a stored record (`id` plus the create body's members) back, validating it as a
    /// create body. An `enabled_connections` member (records written by the create before
    /// organization connections had a table of their own) is ignored: an organization's
    /// connections are stored, listed and changed apart from it. The answer's
    /// `spec.enabled_connections` is always `None`.
    pub fn from_stored_json(record: &Value) -> Result<Self, ValidationError> {
        let Value::Object(map) = record else {
            return Err(ValidationError::new(
                "",
                "Expected type object but found another type",
            ));
        };
        let id = map
            .get("id")
            .and_then(Value::as_str)
            .and_then(OrganizationId::parse)
            .ok_or_else(|| {
                ValidationError::new("id", "String does not match pattern ^org_[a-zA-Z0-9]{16}$")
            })?;
        let mut rest = map.clone();
        rest.shift_remove("id");
        rest.shift_remove("enabled_connections");
        let mut spec = OrganizationSpec::from_json(&Value::Object(rest))?;
        spec.enabled_connections = None;
        Ok(Self { id, spec })
    }

    /// The record as the list, get, get-by-name and update endpoints answer it: `id`, `name`,
    /// and the members that are set (`display_name`, `branding`, `metadata`, `token_quota`),
    /// never `enabled_connections` (an organization's connections are a resource of their own,
    /// `/organizations/{id}/enabled_connections`).
    pub fn record_json(&self) -> Value {
        let mut value = self.to_json(&[]);
        if let Value::Object(map) = &mut value {
            map.shift_remove("enabled_connections");
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(body: Value) -> String {
        OrganizationPatch::from_json(&body).unwrap_err().to_string()
    }

    fn stored() -> Organization {
        Organization::from_stored_json(&json!({
            "id": "org_abcdefgh12345678", "name": "acme", "display_name": "Acme",
            "metadata": {"tier": "gold"},
            "token_quota": {"client_credentials": {"per_day": 10}}
        }))
        .unwrap()
    }

    #[test]
    fn members_replace_the_stored_ones() {
        let org = stored();
        let patch = OrganizationPatch::from_json(&json!({
            "display_name": "Acme Inc", "metadata": {"region": "eu"}, "token_quota": null
        }))
        .unwrap();
        assert_eq!(patch.name, None);
        let out = patch.apply(&org).record_json();
        assert_eq!(
            out,
            json!({"id": "org_abcdefgh12345678", "name": "acme", "display_name": "Acme Inc",
                   "metadata": {"region": "eu"}})
        );
        let renamed = OrganizationPatch::from_json(&json!({"name": "acme-2",
            "branding": {"colors": {"primary": "#000", "page_background": "#fff"}}}))
        .unwrap()
        .apply(&org);
        assert_eq!(renamed.spec.name, "acme-2");
        assert_eq!(renamed.spec.display_name.as_deref(), Some("Acme"));
        assert!(renamed.spec.branding.is_some());
        let quota = OrganizationPatch::from_json(
            &json!({"token_quota": {"client_credentials": {"enforce": false}}}),
        )
        .unwrap();
        assert_eq!(
            quota.apply(&org).spec.token_quota,
            Some(TokenQuota {
                enforce: Some(false),
                per_day: None,
                per_hour: None
            })
        );
    }

    #[test]
    fn refusals_name_the_property_as_the_create_does() {
        assert_eq!(
            err(json!({})),
            "Payload validation error: 'Too few properties defined (0), minimum 1'."
        );
        assert_eq!(
            err(json!([])),
            "Payload validation error: 'Expected type object but found type array'."
        );
        assert_eq!(
            err(json!({"id": "org_abcdefgh12345678"})),
            "Payload validation error: 'Additional properties not allowed: id'."
        );
        assert_eq!(
            err(json!({"enabled_connections": []})),
            "Payload validation error: 'Additional properties not allowed: enabled_connections'."
        );
        assert_eq!(
            err(json!({"name": "Acme"})),
            "Payload validation error: 'Object didn't pass validation for format organization-name: Acme' on property name."
        );
        assert_eq!(
            err(json!({"display_name": null})),
            "Payload validation error: 'Expected type string but found type null' on property display_name."
        );
        assert_eq!(
            err(json!({"branding": {"logo_url": "http://x.example"}})),
            "Payload validation error: 'Object didn't pass validation for format strict-https-uri-or-null: http://x.example' on property branding.logo_url."
        );
        assert_eq!(
            err(json!({"metadata": {"k": 1}})),
            "Payload validation error: 'Expected type string,null but found type integer' on property metadata.k."
        );
        assert_eq!(
            err(json!({"token_quota": {}})),
            "Payload validation error: 'Missing required property: client_credentials' on property token_quota."
        );
        assert_eq!(
            err(json!({"token_quota": 5})),
            "Payload validation error: 'Expected type object but found type integer' on property token_quota."
        );
    }

    #[test]
    fn stored_records_are_validated_and_lose_their_create_time_connections() {
        let org = Organization::from_stored_json(&json!({
            "id": "org_abcdefgh12345678", "name": "acme",
            "enabled_connections": [{"connection_id": "con_a", "assign_membership_on_login": true,
                                     "show_as_button": true, "is_signup_enabled": false}]
        }))
        .unwrap();
        assert_eq!(org.spec.enabled_connections, None);
        assert_eq!(
            org.record_json(),
            json!({"id": "org_abcdefgh12345678", "name": "acme"})
        );
        for bad in [
            json!({"name": "acme"}),
            json!({"id": "org_short", "name": "acme"}),
            json!({"id": "org_abcdefgh12345678", "name": "Acme"}),
            json!("org"),
        ] {
            assert!(Organization::from_stored_json(&bad).is_err(), "{bad}");
        }
    }
}
