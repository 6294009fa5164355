//! Directory data: connections, users, groups, group members and sessions, as an import file
//! (`netacl directory import`, `POST /_netacl/v1/directory/import`) and as the records the
//! group-members and user-sessions endpoints answer.
//!
//! An import file is one JSON object with up to five arrays, each optional:
//!
//! ```json
//! {"connections": [{"id": "con_…", "name": "…", "strategy": "auth0"}],
//!  "users":       [{"user_id": "auth0|…", "email": "…", "name": "…", "created_at": "…"}],
//!  "groups":      [{"id": "grp_…", "name": "…", "description": "…", "created_at": "…"}],
//!  "members":     [{"group_id": "grp_…", "id": "auth0|…", "member_type": "user",
//!                   "type": "connection", "connection_id": "con_…", "created_at": "…"}],
//!  "sessions":    [{"id": "…", "user_id": "auth0|…", "created_at": "…", …}]}
//! ```
//!
//! A file is self-contained: every reference (a member's group, a member group, a member's
//! connection, a session's user) must name a record of the same file. A user who is a member
//! through a connection (`"type": "connection"`, which then needs `connection_id`) may be one the
//! connection provisioned without being imported; any other user member must be in the file. Ids are unique within their list. The first
//! problem is reported with its path (`sessions[12].user_id`) and reason
//! (`unknown user auth0|x`).
use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::branding::member;
use crate::schema::{
    check_string, format_error, index, join, type_error, ArrayRule, AtPath, ObjectReader,
    ObjectSchema, Reason, StringRule,
};
use crate::{Timestamp, ValidationError};

const BASE58: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// A group id: `grp_` followed by 14 to 22 base58 characters (18 to 26 in all).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(String);

impl GroupId {
    /// Parses an id; `None` when it does not have the `grp_` + 14..22 base58 form.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("grp_")?;
        ((14..=22).contains(&rest.len()) && rest.bytes().all(|c| BASE58.contains(&c)))
            .then(|| Self(s.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The regular expression [`GroupId::parse`] implements (for messages and the OpenAPI document).
pub const GROUP_ID_PATTERN: &str = "^grp_[1-9A-HJ-NP-Za-km-z]{14,22}$";

/// A connection (an identity source users log in with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// `con_` followed by 16 ASCII letters or digits.
    pub id: String,
    /// 1..128 letters, digits and `-`, starting and ending with a letter or digit; unique in
    /// the tenant.
    pub name: String,
    /// 1..64 lowercase letters, digits and `-` (`auth0`, `google-oauth2`, `samlp`, ...).
    pub strategy: String,
}

impl Connection {
    /// The record as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"id": self.id, "name": self.name, "strategy": self.strategy})
    }
}

/// A user: its id and its validated record (`user_id`, `email`, `name`, `created_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct DirectoryUser {
    /// `auth0|…`, `google-oauth2|…`: 1..255 printable characters.
    pub user_id: String,
    /// The record as given (already validated).
    pub record: Value,
}

/// A group: its id and its validated record (`id`, `name`, `description`, `created_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Its id.
    pub id: GroupId,
    /// The record as given (already validated).
    pub record: Value,
}

/// A member of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupMember {
    /// The group it belongs to.
    pub group_id: GroupId,
    /// The member's id (a user id or a group id, after `member_type`).
    pub member_id: String,
    /// The record the members endpoint answers: `id`, `member_type`, `type`,
    /// `connection_id` (when given), `created_at`.
    pub record: Value,
}

/// A user's session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The session id: 1..255 printable characters, unique in the tenant.
    pub id: String,
    /// The user it belongs to.
    pub user_id: String,
    /// The record as given (already validated); what the sessions endpoint answers.
    pub record: Value,
}

/// A validated import file (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectoryData {
    /// Connections.
    pub connections: Vec<Connection>,
    /// Users.
    pub users: Vec<DirectoryUser>,
    /// Groups.
    pub groups: Vec<Group>,
    /// Group members, in file order (their listing order, after those already stored).
    pub members: Vec<GroupMember>,
    /// Sessions, in file order (their listing order, after those already stored).
    pub sessions: Vec<Session>,
}

const ROOT: ObjectSchema<'static> = ObjectSchema {
    allowed: &["connections", "users", "groups", "members", "sessions"],
    required: &[],
    min_properties: 0,
};
const CONNECTION: ObjectSchema<'static> = ObjectSchema {
    allowed: &["id", "name", "strategy"],
    required: &["id", "name", "strategy"],
    min_properties: 0,
};
const USER: ObjectSchema<'static> = ObjectSchema {
    allowed: &["user_id", "email", "name", "created_at"],
    required: &["user_id"],
    min_properties: 0,
};
const GROUP: ObjectSchema<'static> = ObjectSchema {
    allowed: &["id", "name", "description", "created_at"],
    required: &["id", "name"],
    min_properties: 0,
};
const MEMBER: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "group_id",
        "id",
        "member_type",
        "type",
        "connection_id",
        "created_at",
    ],
    required: &["group_id", "id", "member_type", "type", "created_at"],
    min_properties: 0,
};
const SESSION: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "id",
        "user_id",
        "created_at",
        "updated_at",
        "authenticated_at",
        "idle_expires_at",
        "expires_at",
        "last_interacted_at",
        "device",
        "clients",
        "authentication",
        "cookie",
        "session_metadata",
    ],
    required: &[
        "id",
        "user_id",
        "created_at",
        "updated_at",
        "authenticated_at",
    ],
    min_properties: 0,
};
const DEVICE: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "initial_user_agent",
        "initial_ip",
        "initial_asn",
        "last_user_agent",
        "last_ip",
        "last_asn",
    ],
    required: &[],
    min_properties: 0,
};
const CLIENT: ObjectSchema<'static> = ObjectSchema {
    allowed: &["client_id"],
    required: &["client_id"],
    min_properties: 0,
};
const AUTHENTICATION: ObjectSchema<'static> = ObjectSchema {
    allowed: &["methods"],
    required: &[],
    min_properties: 0,
};
const METHOD: ObjectSchema<'static> = ObjectSchema {
    allowed: &["name", "timestamp", "type"],
    required: &["name", "timestamp"],
    min_properties: 0,
};
const COOKIE: ObjectSchema<'static> = ObjectSchema {
    allowed: &["mode"],
    required: &["mode"],
    min_properties: 0,
};

const LIST: ArrayRule = ArrayRule {
    min_items: 0,
    max_items: None,
    unique: false,
};

/// Member types and member (membership) types.
pub const MEMBER_TYPES: [&str; 2] = ["user", "group"];
/// How a member came into the group.
pub const MEMBERSHIP_TYPES: [&str; 3] = ["connection", "organization", "tenant"];

/// 1..255 characters, none of them a control character.
fn check_id(value: &Value) -> Result<&str, Reason> {
    let s = check_string(value, StringRule::between(1, 255))?;
    if s.chars().any(char::is_control) {
        return Err(format_error("printable-id", s));
    }
    Ok(s)
}

fn check_timestamp(value: &Value) -> Result<Timestamp, Reason> {
    let s = check_string(value, StringRule::ANY)?;
    Timestamp::parse(s).ok_or_else(|| format_error("date-time", s))
}

pub(crate) fn check_connection_id(value: &Value) -> Result<&str, Reason> {
    let s = check_string(value, StringRule::ANY)?;
    let ok = s
        .strip_prefix("con_")
        .is_some_and(|r| r.len() == 16 && r.bytes().all(|c| c.is_ascii_alphanumeric()));
    if ok {
        Ok(s)
    } else {
        Err(format_error("connection-id", s))
    }
}

pub(crate) fn check_connection_name(value: &Value) -> Result<&str, Reason> {
    let s = check_string(value, StringRule::between(1, 128))?;
    let b = s.as_bytes();
    let edge = |c: Option<&u8>| c.is_some_and(u8::is_ascii_alphanumeric);
    if b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && edge(b.first())
        && edge(b.last())
    {
        Ok(s)
    } else {
        Err(format_error("connection-name", s))
    }
}

pub(crate) fn check_strategy(value: &Value) -> Result<&str, Reason> {
    let s = check_string(value, StringRule::between(1, 64))?;
    if s.bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        Ok(s)
    } else {
        Err(format_error("strategy", s))
    }
}

fn check_group_id(value: &Value) -> Result<GroupId, Reason> {
    let s = check_string(value, StringRule::ANY)?;
    GroupId::parse(s).ok_or_else(|| format_error("group-id", s))
}

pub(crate) fn check_email(value: &Value) -> Result<&str, Reason> {
    let s = check_string(value, StringRule::between(3, 254))?;
    match s.split_once('@') {
        Some((local, domain))
            if !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !s.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            Ok(s)
        }
        _ => Err(format_error("email", s)),
    }
}

fn connection_from_json(value: &Value, path: &str) -> Result<Connection, ValidationError> {
    let o = ObjectReader::new(value, path, &CONNECTION)?;
    let id = o.required("id", member(&o, "id", check_connection_id)?)?;
    let name = o.required("name", member(&o, "name", check_connection_name)?)?;
    let strategy = o.required("strategy", member(&o, "strategy", check_strategy)?)?;
    Ok(Connection {
        id: id.to_owned(),
        name: name.to_owned(),
        strategy: strategy.to_owned(),
    })
}

fn user_from_json(value: &Value, path: &str) -> Result<DirectoryUser, ValidationError> {
    let o = ObjectReader::new(value, path, &USER)?;
    let user_id = o.required("user_id", member(&o, "user_id", check_id)?)?;
    member(&o, "email", check_email)?;
    o.string("name", StringRule::between(1, 255))?;
    member(&o, "created_at", check_timestamp)?;
    Ok(DirectoryUser {
        user_id: user_id.to_owned(),
        record: value.clone(),
    })
}

fn group_from_json(value: &Value, path: &str) -> Result<Group, ValidationError> {
    let o = ObjectReader::new(value, path, &GROUP)?;
    let id = o.required("id", member(&o, "id", check_group_id)?)?;
    o.string("name", StringRule::between(1, 255))?;
    o.string("description", StringRule::between(0, 1000))?;
    member(&o, "created_at", check_timestamp)?;
    Ok(Group {
        id,
        record: value.clone(),
    })
}

fn member_from_json(value: &Value, path: &str) -> Result<GroupMember, ValidationError> {
    let o = ObjectReader::new(value, path, &MEMBER)?;
    let group_id = o.required("group_id", member(&o, "group_id", check_group_id)?)?;
    let member_id = o.required("id", member(&o, "id", check_id)?)?;
    o.enum_string("member_type", &MEMBER_TYPES)?;
    o.enum_string("type", &MEMBERSHIP_TYPES)?;
    member(&o, "connection_id", check_connection_id)?;
    member(&o, "created_at", check_timestamp)?;
    let mut record = Map::new();
    for key in ["id", "member_type", "type", "connection_id", "created_at"] {
        if let Some(v) = o.get(key) {
            record.insert(key.into(), v.clone());
        }
    }
    Ok(GroupMember {
        group_id,
        member_id: member_id.to_owned(),
        record: Value::Object(record),
    })
}

fn session_from_json(value: &Value, path: &str) -> Result<Session, ValidationError> {
    let o = ObjectReader::new(value, path, &SESSION)?;
    let id = o.required("id", member(&o, "id", check_id)?)?;
    let user_id = o.required("user_id", member(&o, "user_id", check_id)?)?;
    for key in [
        "created_at",
        "updated_at",
        "authenticated_at",
        "idle_expires_at",
        "expires_at",
        "last_interacted_at",
    ] {
        member(&o, key, check_timestamp)?;
    }
    if let Some(device) = o.object("device", &DEVICE)? {
        for key in DEVICE.allowed {
            device.string(key, StringRule::between(0, 1024))?;
        }
    }
    if let Some(clients) = o.array(
        "clients",
        ArrayRule {
            min_items: 0,
            max_items: Some(1000),
            unique: false,
        },
    )? {
        let clients_path = o.path_of("clients");
        for (i, client) in clients.iter().enumerate() {
            let c = ObjectReader::new(client, &index(&clients_path, i), &CLIENT)?;
            member(&c, "client_id", check_id)?;
        }
    }
    if let Some(auth) = o.object("authentication", &AUTHENTICATION)? {
        if let Some(methods) = auth.array(
            "methods",
            ArrayRule {
                min_items: 0,
                max_items: Some(100),
                unique: false,
            },
        )? {
            let methods_path = auth.path_of("methods");
            for (i, method) in methods.iter().enumerate() {
                let m = ObjectReader::new(method, &index(&methods_path, i), &METHOD)?;
                m.string("name", StringRule::between(1, 255))?;
                member(&m, "timestamp", check_timestamp)?;
                m.string("type", StringRule::between(1, 255))?;
            }
        }
    }
    if let Some(cookie) = o.object("cookie", &COOKIE)? {
        cookie.enum_string("mode", &["persistent", "non-persistent"])?;
    }
    if let Some(meta) = o.get("session_metadata") {
        if !meta.is_object() {
            return Err(type_error("object", meta)).at(&o.path_of("session_metadata"));
        }
    }
    Ok(Session {
        id: id.to_owned(),
        user_id: user_id.to_owned(),
        record: value.clone(),
    })
}

/// The first repeated key of `keys`: the later position and the earlier one.
fn first_repeat<'a>(keys: impl Iterator<Item = &'a str>) -> Option<(usize, usize, &'a str)> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, key) in keys.enumerate() {
        if let Some(first) = seen.insert(key, i) {
            return Some((i, first, key));
        }
    }
    None
}

impl DirectoryData {
    /// Validates an import file (see the module docs): every record, then ids unique within
    /// each list and connection names unique, then every reference.
    pub fn from_json(value: &Value) -> Result<Self, ValidationError> {
        let root = ObjectReader::new(value, "", &ROOT)?;
        let list = |key: &str| -> Result<(&[Value], String), ValidationError> {
            Ok((root.array(key, LIST)?.unwrap_or(&[]), root.path_of(key)))
        };
        let (items, path) = list("connections")?;
        let connections = each_record(items, &path, connection_from_json)?;
        let (items, path) = list("users")?;
        let users = each_record(items, &path, user_from_json)?;
        let (items, path) = list("groups")?;
        let groups = each_record(items, &path, group_from_json)?;
        let (items, path) = list("members")?;
        let members = each_record(items, &path, member_from_json)?;
        let (items, path) = list("sessions")?;
        let sessions = each_record(items, &path, session_from_json)?;

        let duplicate = |list: &str, key: &str, (i, first, id): (usize, usize, &str)| {
            ValidationError::new(
                join(&index(list, i), key),
                format!("duplicate {key} {id} (also at {})", index(list, first)),
            )
        };
        if let Some(d) = first_repeat(connections.iter().map(|c| c.id.as_str())) {
            return Err(duplicate("connections", "id", d));
        }
        if let Some(d) = first_repeat(connections.iter().map(|c| c.name.as_str())) {
            return Err(duplicate("connections", "name", d));
        }
        if let Some(d) = first_repeat(users.iter().map(|u| u.user_id.as_str())) {
            return Err(duplicate("users", "user_id", d));
        }
        if let Some(d) = first_repeat(groups.iter().map(|g| g.id.as_str())) {
            return Err(duplicate("groups", "id", d));
        }
        if let Some(d) = first_repeat(sessions.iter().map(|s| s.id.as_str())) {
            return Err(duplicate("sessions", "id", d));
        }
        let pairs: Vec<String> = members
            .iter()
            .map(|m| format!("{} {}", m.group_id, m.member_id))
            .collect();
        if let Some((i, first, _)) = first_repeat(pairs.iter().map(String::as_str)) {
            return Err(ValidationError::new(
                join(&index("members", i), "id"),
                format!(
                    "duplicate member {} of group {} (also at {})",
                    members[i].member_id,
                    members[i].group_id,
                    index("members", first)
                ),
            ));
        }

        let connection_ids: HashSet<&str> = connections.iter().map(|c| c.id.as_str()).collect();
        let user_ids: HashSet<&str> = users.iter().map(|u| u.user_id.as_str()).collect();
        let group_ids: HashSet<&str> = groups.iter().map(|g| g.id.as_str()).collect();
        for (i, m) in members.iter().enumerate() {
            let at = |key: &str| join(&index("members", i), key);
            if !group_ids.contains(m.group_id.as_str()) {
                return Err(ValidationError::new(
                    at("group_id"),
                    format!("unknown group {}", m.group_id),
                ));
            }
            let is_group = m.record["member_type"] == "group";
            let by_connection = m.record["type"] == "connection";
            if by_connection && m.record.get("connection_id").is_none() {
                return Err(ValidationError::new(
                    index("members", i),
                    "Missing required property: connection_id",
                ));
            }
            // A user who is a member through a connection may be provisioned by that connection
            // without having been imported (directory sync); any other member must be in the file.
            let known = if is_group {
                group_ids.contains(m.member_id.as_str())
            } else {
                by_connection || user_ids.contains(m.member_id.as_str())
            };
            if !known {
                let kind = m.record["member_type"].as_str().unwrap_or("user");
                return Err(ValidationError::new(
                    at("id"),
                    format!("unknown {kind} {}", m.member_id),
                ));
            }
            if m.record["member_type"] == "group" && m.member_id == m.group_id.as_str() {
                return Err(ValidationError::new(
                    at("id"),
                    format!("group {} cannot be a member of itself", m.member_id),
                ));
            }
            if let Some(c) = m.record.get("connection_id").and_then(Value::as_str) {
                if !connection_ids.contains(c) {
                    return Err(ValidationError::new(
                        at("connection_id"),
                        format!("unknown connection {c}"),
                    ));
                }
            }
        }
        for (i, s) in sessions.iter().enumerate() {
            if !user_ids.contains(s.user_id.as_str()) {
                return Err(ValidationError::new(
                    join(&index("sessions", i), "user_id"),
                    format!("unknown user {}", s.user_id),
                ));
            }
        }
        Ok(Self {
            connections,
            users,
            groups,
            members,
            sessions,
        })
    }

    /// How many records the file holds in all.
    pub fn record_count(&self) -> usize {
        self.connections.len()
            + self.users.len()
            + self.groups.len()
            + self.members.len()
            + self.sessions.len()
    }
}

fn each_record<T>(
    items: &[Value],
    path: &str,
    read: impl Fn(&Value, &str) -> Result<T, ValidationError>,
) -> Result<Vec<T>, ValidationError> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| read(item, &index(path, i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: &str = "2026-01-02T03:04:05.678Z";

    fn file() -> Value {
        json!({
            "connections": [{"id": "con_AAAAAAAAAAAAAAAA", "name": "Username-Password", "strategy": "auth0"}],
            "users": [{"user_id": "auth0|1", "email": "a@example.com", "name": "A", "created_at": T},
                      {"user_id": "auth0|2"}],
            "groups": [{"id": "grp_2ZbGfPu9TCHmbkDc", "name": "eng", "created_at": T},
                       {"id": "grp_3ZbGfPu9TCHmbkDc", "name": "ops"}],
            "members": [
                {"group_id": "grp_2ZbGfPu9TCHmbkDc", "id": "auth0|1", "member_type": "user",
                 "type": "connection", "connection_id": "con_AAAAAAAAAAAAAAAA", "created_at": T},
                {"group_id": "grp_2ZbGfPu9TCHmbkDc", "id": "grp_3ZbGfPu9TCHmbkDc", "member_type": "group",
                 "type": "tenant", "created_at": T}
            ],
            "sessions": [{"id": "s1", "user_id": "auth0|2", "created_at": T, "updated_at": T,
                          "authenticated_at": T, "expires_at": T,
                          "device": {"initial_ip": "192.0.2.1", "last_asn": "64500"},
                          "clients": [{"client_id": "abc"}],
                          "authentication": {"methods": [{"name": "pwd", "timestamp": T, "type": "password"}]},
                          "cookie": {"mode": "persistent"}, "session_metadata": {"k": "v"}}]
        })
    }

    fn err(mutate: impl FnOnce(&mut Value)) -> String {
        let mut f = file();
        mutate(&mut f);
        let e = DirectoryData::from_json(&f).unwrap_err();
        format!("{}: {}", e.path, e.reason)
    }

    #[test]
    fn a_valid_file() {
        let d = DirectoryData::from_json(&file()).unwrap();
        assert_eq!(d.record_count(), 8);
        assert_eq!(
            d.members[1].record,
            json!({"id": "grp_3ZbGfPu9TCHmbkDc", "member_type": "group", "type": "tenant", "created_at": T})
        );
        assert_eq!(d.sessions[0].record, file()["sessions"][0]);
        assert_eq!(
            DirectoryData::from_json(&json!({})).unwrap().record_count(),
            0
        );
    }

    #[test]
    fn group_ids() {
        assert!(GroupId::parse("grp_2ZbGfPu9TCHmbk").is_some());
        assert!(GroupId::parse("grp_2ZbGfPu9TCHmb").is_none());
        assert!(GroupId::parse("grp_2ZbGfPu9TCHmbkDc8Qv3rL").is_some());
        assert!(GroupId::parse("grp_2ZbGfPu9TCHmbkDc8Qv3rLx").is_none());
        assert!(GroupId::parse("grp_0ZbGfPu9TCHmbkDc").is_none());
    }

    #[test]
    fn bad_records_are_named() {
        assert_eq!(
            err(|f| f["sessions"][0]["user_id"] = json!("auth0|x")),
            "sessions[0].user_id: unknown user auth0|x"
        );
        assert_eq!(
            err(|f| {
                f["members"][0]["id"] = json!("auth0|9");
                f["members"][0]["type"] = json!("tenant");
            }),
            "members[0].id: unknown user auth0|9"
        );
        assert_eq!(
            err(|f| {
                f["members"][0]
                    .as_object_mut()
                    .map(|m| m.remove("connection_id"));
            }),
            "members[0]: Missing required property: connection_id"
        );
        // A connection's member need not be an imported user.
        let mut provisioned = file();
        provisioned["members"][0]["id"] = json!("samlp|acme|someone@acme.example");
        assert!(DirectoryData::from_json(&provisioned).is_ok());
        assert_eq!(
            err(|f| f["members"][1]["id"] = json!("grp_9ZbGfPu9TCHmbkDc")),
            "members[1].id: unknown group grp_9ZbGfPu9TCHmbkDc"
        );
        assert_eq!(
            err(|f| f["members"][0]["connection_id"] = json!("con_BBBBBBBBBBBBBBBB")),
            "members[0].connection_id: unknown connection con_BBBBBBBBBBBBBBBB"
        );
        assert_eq!(
            err(|f| f["users"][1]["user_id"] = json!("auth0|1")),
            "users[1].user_id: duplicate user_id auth0|1 (also at users[0])"
        );
        assert_eq!(
            err(|f| f["sessions"][0]["cookie"]["mode"] = json!("session")),
            "sessions[0].cookie.mode: No enum match for: \"session\""
        );
        assert_eq!(
            err(|f| f["sessions"][0]["expires_at"] = json!("tomorrow")),
            "sessions[0].expires_at: Object didn't pass validation for format date-time: tomorrow"
        );
        assert_eq!(
            err(|f| f["groups"][0]["owner"] = json!("x")),
            "groups[0]: Additional properties not allowed: owner"
        );
        assert_eq!(
            err(|f| f["members"][0]["member_type"] = json!("robot")),
            "members[0].member_type: No enum match for: \"robot\""
        );
        assert_eq!(
            err(|f| f["connections"][0]["id"] = json!("con_short")),
            "connections[0].id: Object didn't pass validation for format connection-id: con_short"
        );
    }
}
