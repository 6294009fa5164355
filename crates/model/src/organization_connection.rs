//! An organization's connections, and the bodies that add and change them through either of
//! their two views: `/organizations/{id}/enabled_connections` (the connections that are enabled,
//! with the create's four members) and `/organizations/{id}/connections` (every connection of the
//! organization, with `is_enabled`, `organization_connection_name` and
//! `organization_access_level` as well).
use serde_json::{Map, Value};

use crate::branding::member;
use crate::directory::Connection;
use crate::organization::EnabledConnection;
use crate::schema::{check_enum, check_string, ObjectReader, ObjectSchema, StringRule};
use crate::ValidationError;

/// The longest `organization_connection_name`, in characters.
pub const MAX_ORGANIZATION_CONNECTION_NAME: usize = 128;

/// Which view of an organization's connections a request goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionView {
    /// `/organizations/{id}/enabled_connections`: only the connections whose `is_enabled` is
    /// true; bodies and answers carry `connection_id`, `assign_membership_on_login`,
    /// `show_as_button`, `is_signup_enabled` (and the answer `connection`).
    Enabled,
    /// `/organizations/{id}/connections`: every connection of the organization; bodies and
    /// answers also carry `is_enabled`, `organization_connection_name` and
    /// `organization_access_level`.
    All,
}

/// `organization_access_level` of an organization connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AccessLevel {
    /// `none`.
    None,
    /// `readonly`.
    Readonly,
    /// `limited`.
    Limited,
    /// `full`.
    Full,
}

impl AccessLevel {
    /// The values, as the wire spells them.
    pub const NAMES: [&'static str; 4] = ["none", "readonly", "limited", "full"];

    /// The level a wire value names.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "none" => Self::None,
            "readonly" => Self::Readonly,
            "limited" => Self::Limited,
            "full" => Self::Full,
            _ => return None,
        })
    }

    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Readonly => "readonly",
            Self::Limited => "limited",
            Self::Full => "full",
        }
    }
}

/// One connection of an organization, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationConnection {
    /// The connection's id; it names a connection of the tenant.
    pub connection_id: String,
    /// Whether users logging in with the connection become members automatically (default
    /// false).
    pub assign_membership_on_login: bool,
    /// Whether the connection is shown on the organization's login prompt (default true).
    pub show_as_button: bool,
    /// Whether signup through the connection is enabled (default false).
    pub is_signup_enabled: bool,
    /// Whether the connection is enabled for the organization (default true). A disabled
    /// connection stays attached and is listed by the `All` view only.
    pub is_enabled: bool,
    /// The connection's name in the scope of the organization (1..128 characters).
    pub organization_connection_name: Option<String>,
    /// The organization's access level through the connection.
    pub organization_access_level: Option<AccessLevel>,
}

impl From<&EnabledConnection> for OrganizationConnection {
    /// A connection enabled by an organization's create body.
    fn from(e: &EnabledConnection) -> Self {
        Self {
            connection_id: e.connection_id.clone(),
            assign_membership_on_login: e.assign_membership_on_login,
            show_as_button: e.show_as_button,
            is_signup_enabled: e.is_signup_enabled,
            is_enabled: true,
            organization_connection_name: None,
            organization_access_level: None,
        }
    }
}

const ADD_ENABLED: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "connection_id",
        "assign_membership_on_login",
        "show_as_button",
        "is_signup_enabled",
    ],
    required: &["connection_id"],
    min_properties: 0,
};

const ADD_ALL: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "connection_id",
        "assign_membership_on_login",
        "show_as_button",
        "is_signup_enabled",
        "is_enabled",
        "organization_connection_name",
        "organization_access_level",
    ],
    required: &["connection_id"],
    min_properties: 0,
};

const UPDATE_ENABLED: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "assign_membership_on_login",
        "show_as_button",
        "is_signup_enabled",
    ],
    required: &[],
    min_properties: 0,
};

const UPDATE_ALL: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "assign_membership_on_login",
        "show_as_button",
        "is_signup_enabled",
        "is_enabled",
        "organization_connection_name",
        "organization_access_level",
    ],
    required: &[],
    min_properties: 0,
};

fn name_rule() -> StringRule {
    StringRule::between(1, MAX_ORGANIZATION_CONNECTION_NAME)
}

fn check_access_level(value: &Value) -> Result<AccessLevel, String> {
    let text = check_enum(value, &AccessLevel::NAMES)?;
    AccessLevel::parse(text).ok_or_else(|| format!("No enum match for: {text}"))
}

impl OrganizationConnection {
    /// Validates the body that adds a connection to an organization through `view`:
    /// `connection_id` (1..50 characters) is required; the flags take their defaults when
    /// absent. Whether the connection exists, and is not already the organization's, is the
    /// store's question.
    pub fn from_json(body: &Value, view: ConnectionView) -> Result<Self, ValidationError> {
        let schema = match view {
            ConnectionView::Enabled => &ADD_ENABLED,
            ConnectionView::All => &ADD_ALL,
        };
        let o = ObjectReader::new(body, "", schema)?;
        let connection_id = o.required(
            "connection_id",
            o.string("connection_id", StringRule::between(1, 50))?,
        )?;
        Ok(Self {
            connection_id: connection_id.to_owned(),
            assign_membership_on_login: o.boolean("assign_membership_on_login")?.unwrap_or(false),
            show_as_button: o.boolean("show_as_button")?.unwrap_or(true),
            is_signup_enabled: o.boolean("is_signup_enabled")?.unwrap_or(false),
            is_enabled: o.boolean("is_enabled")?.unwrap_or(true),
            organization_connection_name: o
                .string("organization_connection_name", name_rule())?
                .map(str::to_owned),
            organization_access_level: member(&o, "organization_access_level", check_access_level)?,
        })
    }

    /// The connection as `view` answers it, with `connection: {name, strategy}` of the tenant's
    /// connection it names.
    pub fn to_json(&self, view: ConnectionView, connection: &Connection) -> Value {
        let mut out = Map::new();
        out.insert("connection_id".into(), self.connection_id.as_str().into());
        out.insert(
            "assign_membership_on_login".into(),
            self.assign_membership_on_login.into(),
        );
        out.insert("show_as_button".into(), self.show_as_button.into());
        out.insert("is_signup_enabled".into(), self.is_signup_enabled.into());
        if view == ConnectionView::All {
            out.insert("is_enabled".into(), self.is_enabled.into());
            if let Some(name) = &self.organization_connection_name {
                out.insert("organization_connection_name".into(), name.as_str().into());
            }
            if let Some(level) = self.organization_access_level {
                out.insert("organization_access_level".into(), level.as_str().into());
            }
        }
        out.insert(
            "connection".into(),
            serde_json::json!({"name": connection.name, "strategy": connection.strategy}),
        );
        Value::Object(out)
    }
}

/// A validated body that changes one connection of an organization. Every member is optional
/// (an empty body changes nothing: the deploy CLI sends one when a configured connection lists
/// no flags); `null` puts `organization_connection_name` and `organization_access_level` back to
/// unset and `is_enabled` back to its default, true.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrganizationConnectionPatch {
    /// A new `assign_membership_on_login`.
    pub assign_membership_on_login: Option<bool>,
    /// A new `show_as_button`.
    pub show_as_button: Option<bool>,
    /// A new `is_signup_enabled`.
    pub is_signup_enabled: Option<bool>,
    /// A new `is_enabled` (`All` view only).
    pub is_enabled: Option<bool>,
    /// `Some(None)`: unset (`All` view only).
    pub organization_connection_name: Option<Option<String>>,
    /// `Some(None)`: unset (`All` view only).
    pub organization_access_level: Option<Option<AccessLevel>>,
}

impl OrganizationConnectionPatch {
    /// Validates a PATCH body of `view`: an object of the view's flags (no `connection_id`: the
    /// path names the connection).
    pub fn from_json(body: &Value, view: ConnectionView) -> Result<Self, ValidationError> {
        let schema = match view {
            ConnectionView::Enabled => &UPDATE_ENABLED,
            ConnectionView::All => &UPDATE_ALL,
        };
        let o = ObjectReader::new(body, "", schema)?;
        Ok(Self {
            assign_membership_on_login: o.boolean("assign_membership_on_login")?,
            show_as_button: o.boolean("show_as_button")?,
            is_signup_enabled: o.boolean("is_signup_enabled")?,
            is_enabled: o
                .nullable("is_enabled", "boolean", crate::schema::check_boolean)?
                .map(|v| v.unwrap_or(true)),
            organization_connection_name: o.nullable(
                "organization_connection_name",
                "string",
                |v| check_string(v, name_rule()).map(str::to_owned),
            )?,
            organization_access_level: o.nullable(
                "organization_access_level",
                "string",
                check_access_level,
            )?,
        })
    }

    /// `connection` with this patch applied.
    pub fn apply(&self, connection: &OrganizationConnection) -> OrganizationConnection {
        let mut out = connection.clone();
        if let Some(v) = self.assign_membership_on_login {
            out.assign_membership_on_login = v;
        }
        if let Some(v) = self.show_as_button {
            out.show_as_button = v;
        }
        if let Some(v) = self.is_signup_enabled {
            out.is_signup_enabled = v;
        }
        if let Some(v) = self.is_enabled {
            out.is_enabled = v;
        }
        if let Some(v) = &self.organization_connection_name {
            out.organization_connection_name = v.clone();
        }
        if let Some(v) = self.organization_access_level {
            out.organization_access_level = v;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn db() -> Connection {
        Connection {
            id: "con_a".into(),
            name: "db".into(),
            strategy: "auth0".into(),
        }
    }

    #[test]
    fn bodies_take_defaults_and_answer_per_view() {
        let c = OrganizationConnection::from_json(
            &json!({"connection_id": "con_a"}),
            ConnectionView::Enabled,
        )
        .unwrap();
        assert!(c.show_as_button && c.is_enabled);
        assert!(!c.assign_membership_on_login && !c.is_signup_enabled);
        assert_eq!(
            c.to_json(ConnectionView::Enabled, &db()),
            json!({"connection_id": "con_a", "assign_membership_on_login": false,
                   "show_as_button": true, "is_signup_enabled": false,
                   "connection": {"name": "db", "strategy": "auth0"}})
        );
        let all = OrganizationConnection::from_json(
            &json!({"connection_id": "con_a", "is_enabled": false,
                    "organization_connection_name": "Staff", "organization_access_level": "readonly"}),
            ConnectionView::All,
        )
        .unwrap();
        assert_eq!(
            all.to_json(ConnectionView::All, &db()),
            json!({"connection_id": "con_a", "assign_membership_on_login": false,
                   "show_as_button": true, "is_signup_enabled": false, "is_enabled": false,
                   "organization_connection_name": "Staff", "organization_access_level": "readonly",
                   "connection": {"name": "db", "strategy": "auth0"}})
        );
    }

    #[test]
    fn refusals_name_the_property() {
        let add = |body: Value, view| {
            OrganizationConnection::from_json(&body, view)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            add(
                json!({"connection_id": "con_a", "is_enabled": true}),
                ConnectionView::Enabled
            ),
            "Payload validation error: 'Additional properties not allowed: is_enabled'."
        );
        assert_eq!(
            add(json!({}), ConnectionView::All),
            "Payload validation error: 'Missing required property: connection_id'."
        );
        assert_eq!(
            add(json!({"connection_id": ""}), ConnectionView::All),
            "Payload validation error: 'String is too short (0 chars), minimum 1' on property connection_id."
        );
        assert_eq!(
            add(
                json!({"connection_id": "c", "organization_access_level": "admin"}),
                ConnectionView::All
            ),
            "Payload validation error: 'No enum match for: \"admin\"' on property organization_access_level."
        );
        assert_eq!(
            add(
                json!({"connection_id": "c", "organization_connection_name": "x".repeat(129)}),
                ConnectionView::All
            ),
            "Payload validation error: 'String is too long (129 chars), maximum 128' on property organization_connection_name."
        );
        let patch = |body: Value, view| {
            OrganizationConnectionPatch::from_json(&body, view)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            patch(json!({"connection_id": "c"}), ConnectionView::All),
            "Payload validation error: 'Additional properties not allowed: connection_id'."
        );
        assert_eq!(
            patch(json!({"show_as_button": null}), ConnectionView::Enabled),
            "Payload validation error: 'Expected type boolean but found type null' on property show_as_button."
        );
        assert_eq!(
            patch(json!({"is_enabled": "no"}), ConnectionView::All),
            "Payload validation error: 'Expected type boolean,null but found type string' on property is_enabled."
        );
    }

    #[test]
    fn patches_change_only_what_they_name() {
        let stored = OrganizationConnection::from_json(
            &json!({"connection_id": "con_a", "is_enabled": false,
                    "organization_connection_name": "Staff", "organization_access_level": "full"}),
            ConnectionView::All,
        )
        .unwrap();
        let empty =
            OrganizationConnectionPatch::from_json(&json!({}), ConnectionView::All).unwrap();
        assert_eq!(empty.apply(&stored), stored);
        let reset = OrganizationConnectionPatch::from_json(
            &json!({"is_enabled": null, "organization_connection_name": null,
                    "organization_access_level": null, "show_as_button": false}),
            ConnectionView::All,
        )
        .unwrap()
        .apply(&stored);
        assert!(reset.is_enabled && !reset.show_as_button);
        assert_eq!(reset.organization_connection_name, None);
        assert_eq!(reset.organization_access_level, None);
    }
}
