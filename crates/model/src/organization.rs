//! Organizations: the create body (`POST /organizations`), the id, and the answered record.
use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::branding::{check_color, check_https_uri_or_null, member};
use crate::directory::Connection;
use crate::schema::{
    check_string, format_error, index, join, push_printable, type_name, ArrayRule, AtPath,
    ObjectReader, ObjectSchema, StringRule,
};
use crate::ValidationError;

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The most properties an organization's `metadata` may hold.
pub const MAX_METADATA_PROPERTIES: usize = 25;
/// The most connections a create may enable.
pub const MAX_ENABLED_CONNECTIONS: usize = 10;

/// An organization id: `org_` followed by 16 ASCII letters or digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OrganizationId(String);

impl OrganizationId {
    /// Parses an id; `None` when it does not have the `org_` + 16 `[a-zA-Z0-9]` form.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("org_")?;
        (rest.len() == 16 && rest.bytes().all(|c| c.is_ascii_alphanumeric()))
            .then(|| Self(s.to_owned()))
    }

    /// The id that random bits spell (16 base-62 digits use 95 of the 128 bits).
    pub fn from_random(mut bits: u128) -> Self {
        let mut s = String::with_capacity(20);
        s.push_str("org_");
        for _ in 0..16 {
            s.push(ALPHANUMERIC[(bits % 62) as usize] as char);
            bits /= 62;
        }
        Self(s)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OrganizationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How an organization's login pages look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationBranding {
    /// The logo's `https` URL: `None` = not given, `Some(None)` = `null`.
    pub logo_url: Option<Option<String>>,
    /// Both colours, when given.
    pub colors: Option<OrganizationColors>,
}

/// The two colours of an organization's branding (both required when `colors` is given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationColors {
    /// The colour of primary elements.
    pub primary: String,
    /// The page background colour.
    pub page_background: String,
}

/// A connection enabled for an organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnabledConnection {
    /// The connection's id; it must name an existing connection of the tenant.
    pub connection_id: String,
    /// Whether users logging in with the connection become members automatically (default false).
    pub assign_membership_on_login: bool,
    /// Whether the connection is shown on the login prompt (default true).
    pub show_as_button: bool,
    /// Whether signup is enabled through the connection (default false).
    pub is_signup_enabled: bool,
}

/// The client-credentials token quota of an organization (at least one member is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenQuota {
    /// Whether requests over the quota fail (`false`: only logged).
    pub enforce: Option<bool>,
    /// Tokens per day, 1..=2147483647.
    pub per_day: Option<u32>,
    /// Tokens per hour, 1..=2147483647.
    pub per_hour: Option<u32>,
}

/// A validated create body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationSpec {
    /// 1..50 lowercase letters, digits, `-`, `_`; starts and ends with a letter or digit; not
    /// starting with `org_`. Unique within the tenant.
    pub name: String,
    /// 1..255 characters.
    pub display_name: Option<String>,
    /// Login page styling.
    pub branding: Option<OrganizationBranding>,
    /// At most 25 properties; values are strings (≤ 255 characters) or `null`. Body order.
    pub metadata: Option<Vec<(String, Option<String>)>>,
    /// At most 10 connections, each named once.
    pub enabled_connections: Option<Vec<EnabledConnection>>,
    /// The client-credentials token quota.
    pub token_quota: Option<TokenQuota>,
}

/// An organization as stored and answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    /// Its id.
    pub id: OrganizationId,
    /// What the create body said.
    pub spec: OrganizationSpec,
}

const SPEC: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "name",
        "display_name",
        "branding",
        "metadata",
        "enabled_connections",
        "token_quota",
    ],
    required: &["name"],
    min_properties: 0,
};

const BRANDING: ObjectSchema<'static> = ObjectSchema {
    allowed: &["logo_url", "colors"],
    required: &[],
    min_properties: 0,
};

const COLORS: ObjectSchema<'static> = ObjectSchema {
    allowed: &["primary", "page_background"],
    required: &["primary", "page_background"],
    min_properties: 0,
};

const CONNECTION: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "connection_id",
        "assign_membership_on_login",
        "show_as_button",
        "is_signup_enabled",
    ],
    required: &["connection_id"],
    min_properties: 0,
};

const TOKEN_QUOTA: ObjectSchema<'static> = ObjectSchema {
    allowed: &["client_credentials"],
    required: &["client_credentials"],
    min_properties: 0,
};

const CLIENT_CREDENTIALS: ObjectSchema<'static> = ObjectSchema {
    allowed: &["enforce", "per_day", "per_hour"],
    required: &[],
    min_properties: 1,
};

/// The `organization-name` format (the length is checked before).
pub(crate) fn check_name(value: &Value) -> Result<String, String> {
    let name = check_string(value, StringRule::between(1, 50))?;
    let bytes = name.as_bytes();
    let inner_ok =
        |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_';
    let edge_ok = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ok = bytes.iter().all(inner_ok)
        && edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && !name.starts_with("org_");
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format_error("organization-name", name))
    }
}

impl OrganizationSpec {
    /// Validates a create body. Checks, in order: the body is an object without unknown
    /// properties and with `name`; then `name`, `display_name`, `branding`, `metadata`,
    /// `enabled_connections` (items unique by `connection_id`), `token_quota`. Whether the named
    /// connections exist is the store's question.
    pub fn from_json(body: &Value) -> Result<Self, ValidationError> {
        let o = ObjectReader::new(body, "", &SPEC)?;
        let name = o.required("name", member(&o, "name", check_name)?)?;
        let display_name = o
            .string("display_name", StringRule::between(1, 255))?
            .map(str::to_owned);
        let branding = match o.object("branding", &BRANDING)? {
            None => None,
            Some(b) => Some(OrganizationBranding {
                logo_url: member(&b, "logo_url", check_https_uri_or_null)?,
                colors: match b.object("colors", &COLORS)? {
                    None => None,
                    Some(c) => Some(OrganizationColors {
                        primary: c.required("primary", member(&c, "primary", check_color)?)?,
                        page_background: c.required(
                            "page_background",
                            member(&c, "page_background", check_color)?,
                        )?,
                    }),
                },
            }),
        };
        let metadata = match o.get("metadata") {
            None => None,
            Some(value) => Some(metadata_from_json(value, &o.path_of("metadata"))?),
        };
        let enabled_connections = match o.array(
            "enabled_connections",
            ArrayRule {
                min_items: 0,
                max_items: Some(MAX_ENABLED_CONNECTIONS),
                unique: false,
            },
        )? {
            None => None,
            Some(items) => Some(connections_from_json(
                items,
                &o.path_of("enabled_connections"),
            )?),
        };
        let token_quota = match o.object("token_quota", &TOKEN_QUOTA)? {
            None => None,
            Some(q) => {
                let cc = q.required(
                    "client_credentials",
                    q.object("client_credentials", &CLIENT_CREDENTIALS)?,
                )?;
                let limit = |key: &str| {
                    cc.integer(key, 1, 2_147_483_647)
                        .map(|v| v.map(|v| u32::try_from(v).unwrap_or(u32::MAX)))
                };
                Some(TokenQuota {
                    enforce: cc.boolean("enforce")?,
                    per_day: limit("per_day")?,
                    per_hour: limit("per_hour")?,
                })
            }
        };
        Ok(Self {
            name,
            display_name,
            branding,
            metadata,
            enabled_connections,
            token_quota,
        })
    }
}

fn metadata_from_json(
    value: &Value,
    path: &str,
) -> Result<Vec<(String, Option<String>)>, ValidationError> {
    let Value::Object(map) = value else {
        return Err(ValidationError::new(
            path,
            format!("Expected type object but found type {}", type_name(value)),
        ));
    };
    if map.len() > MAX_METADATA_PROPERTIES {
        return Err(ValidationError::new(
            path,
            format!(
                "Too many properties defined ({}), maximum {MAX_METADATA_PROPERTIES}",
                map.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(map.len());
    for (key, item) in map {
        let entry = match item {
            Value::Null => Ok(None),
            Value::String(_) => {
                check_string(item, StringRule::between(0, 255)).map(|s| Some(s.to_owned()))
            }
            other => Err(format!(
                "Expected type string,null but found type {}",
                type_name(other)
            )),
        };
        let mut printable = String::with_capacity(key.len());
        push_printable(&mut printable, key);
        out.push((key.clone(), entry.at(&join(path, &printable))?));
    }
    Ok(out)
}

fn connections_from_json(
    items: &[Value],
    path: &str,
) -> Result<Vec<EnabledConnection>, ValidationError> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_path = index(path, i);
        let c = ObjectReader::new(item, &item_path, &CONNECTION)?;
        let id = c.required(
            "connection_id",
            c.string("connection_id", StringRule::between(1, 50))?,
        )?;
        if let Some(first) = seen.insert(id, i) {
            return Err(ValidationError::new(
                join(&item_path, "connection_id"),
                format!(
                    "Connection {id} is already enabled by {}",
                    index(path, first)
                ),
            ));
        }
        out.push(EnabledConnection {
            connection_id: id.to_owned(),
            assign_membership_on_login: c.boolean("assign_membership_on_login")?.unwrap_or(false),
            show_as_button: c.boolean("show_as_button")?.unwrap_or(true),
            is_signup_enabled: c.boolean("is_signup_enabled")?.unwrap_or(false),
        });
    }
    Ok(out)
}

impl Organization {
    /// The answered record: `id`, `name`, then the members the create body gave.
    /// `enabled_connections` items carry `connection: {name, strategy}` of the `connections` with
    /// the same id (the store resolves them).
    pub fn to_json(&self, connections: &[Connection]) -> Value {
        let spec = &self.spec;
        let mut out = Map::new();
        out.insert("id".into(), self.id.as_str().into());
        out.insert("name".into(), spec.name.as_str().into());
        if let Some(display_name) = &spec.display_name {
            out.insert("display_name".into(), display_name.as_str().into());
        }
        if let Some(branding) = &spec.branding {
            let mut b = Map::new();
            if let Some(logo_url) = &branding.logo_url {
                b.insert(
                    "logo_url".into(),
                    logo_url.clone().map_or(Value::Null, Value::String),
                );
            }
            if let Some(colors) = &branding.colors {
                b.insert(
                    "colors".into(),
                    serde_json::json!({
                        "primary": colors.primary, "page_background": colors.page_background
                    }),
                );
            }
            out.insert("branding".into(), Value::Object(b));
        }
        if let Some(metadata) = &spec.metadata {
            let m: Map<String, Value> = metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                .collect();
            out.insert("metadata".into(), Value::Object(m));
        }
        if let Some(enabled) = &spec.enabled_connections {
            let items: Vec<Value> = enabled
                .iter()
                .map(|e| {
                    let mut item = serde_json::json!({
                        "connection_id": e.connection_id,
                        "assign_membership_on_login": e.assign_membership_on_login,
                        "show_as_button": e.show_as_button,
                        "is_signup_enabled": e.is_signup_enabled,
                    });
                    if let Some(c) = connections.iter().find(|c| c.id == e.connection_id) {
                        item["connection"] =
                            serde_json::json!({"name": c.name, "strategy": c.strategy});
                    }
                    item
                })
                .collect();
            out.insert("enabled_connections".into(), Value::Array(items));
        }
        if let Some(q) = &spec.token_quota {
            let mut cc = Map::new();
            if let Some(enforce) = q.enforce {
                cc.insert("enforce".into(), enforce.into());
            }
            if let Some(per_day) = q.per_day {
                cc.insert("per_day".into(), per_day.into());
            }
            if let Some(per_hour) = q.per_hour {
                cc.insert("per_hour".into(), per_hour.into());
            }
            out.insert(
                "token_quota".into(),
                serde_json::json!({"client_credentials": cc}),
            );
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(body: Value) -> String {
        OrganizationSpec::from_json(&body).unwrap_err().to_string()
    }

    #[test]
    fn ids() {
        let id = OrganizationId::from_random(u128::MAX);
        assert_eq!(id.as_str().len(), 20);
        assert_eq!(OrganizationId::parse(id.as_str()), Some(id));
        assert_ne!(
            OrganizationId::from_random(1),
            OrganizationId::from_random(2)
        );
        assert!(OrganizationId::parse("org_abcdefgh1234567").is_none());
        assert!(OrganizationId::parse("org_abcdefgh1234567-").is_none());
        assert!(OrganizationId::parse("org_abcdefgh12345678").is_some());
    }

    #[test]
    fn names() {
        for ok in ["a", "acme", "acme-corp_2", "0rg", &"a".repeat(50)] {
            assert!(check_name(&json!(ok)).is_ok(), "{ok}");
        }
        for bad in ["Acme", "-acme", "acme_", "org_acme", "ac me", "acmé"] {
            assert_eq!(
                check_name(&json!(bad)).unwrap_err(),
                format!("Object didn't pass validation for format organization-name: {bad}")
            );
        }
        assert_eq!(
            err(json!({"name": ""})),
            "Payload validation error: 'String is too short (0 chars), minimum 1' on property name."
        );
    }

    #[test]
    fn full_body_round_trips() {
        let body = json!({
            "name": "acme",
            "display_name": "Acme",
            "branding": {"logo_url": "https://example.com/l.png",
                         "colors": {"primary": "#123", "page_background": "#abcdef"}},
            "metadata": {"tier": "gold", "note": null},
            "enabled_connections": [{"connection_id": "con_a", "assign_membership_on_login": true}],
            "token_quota": {"client_credentials": {"enforce": true, "per_hour": 10}}
        });
        let spec = OrganizationSpec::from_json(&body).unwrap();
        let org = Organization {
            id: OrganizationId::from_random(9),
            spec,
        };
        let conns = [Connection {
            id: "con_a".into(),
            name: "db".into(),
            strategy: "auth0".into(),
        }];
        let out = org.to_json(&conns);
        assert_eq!(
            out["enabled_connections"],
            json!([{"connection_id": "con_a", "assign_membership_on_login": true,
                    "show_as_button": true, "is_signup_enabled": false,
                    "connection": {"name": "db", "strategy": "auth0"}}])
        );
        assert_eq!(out["metadata"], body["metadata"]);
        assert_eq!(out["branding"], body["branding"]);
        assert_eq!(out["token_quota"], body["token_quota"]);
    }

    #[test]
    fn refusals() {
        assert_eq!(
            err(json!({"name": "a", "metadata": {"k": 1}})),
            "Payload validation error: 'Expected type string,null but found type integer' on property metadata.k."
        );
        assert_eq!(
            err(json!({"name": "a", "token_quota": {"client_credentials": {}}})),
            "Payload validation error: 'Too few properties defined (0), minimum 1' on property token_quota.client_credentials."
        );
        assert_eq!(
            err(json!({"name": "a", "enabled_connections": [{"connection_id": "c"}, {"connection_id": "c"}]})),
            "Payload validation error: 'Connection c is already enabled by enabled_connections[0]' on property enabled_connections[1].connection_id."
        );
    }
}
