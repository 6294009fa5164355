//! Validation of the wire JSON into domain types, and back.
//!
//! Every check reports the first problem found, in a fixed order: an object's type, its unknown
//! keys, its required keys, then its members in the order the admin API documents them.
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::criteria::Criteria;
use crate::formats;
use crate::schema::{
    check_integer, check_string, each_item, index, join, type_error, ArrayRule, AtPath,
    ObjectReader, ObjectSchema, Reason, StringRule,
};
use crate::{
    AclId, Action, Limits, ManagedListName, NetworkAcl, NetworkAclKeyId, NetworkAclPatch,
    NetworkAclSpec, Priority, Rule, RuleScope, RuleSet, Timestamp, ValidationError,
};

const SPEC: ObjectSchema<'static> = ObjectSchema {
    allowed: &["description", "active", "priority", "rule"],
    required: &["description", "active", "rule"],
    min_properties: 0,
};

const PATCH: ObjectSchema<'static> = ObjectSchema {
    required: &[],
    min_properties: 1,
    ..SPEC
};

const RECORD: ObjectSchema<'static> = ObjectSchema {
    allowed: &[
        "id",
        "description",
        "active",
        "priority",
        "rule",
        "created_at",
        "updated_at",
    ],
    required: &["id", "description", "active", "rule"],
    min_properties: 0,
};

const RULE: ObjectSchema<'static> = ObjectSchema {
    allowed: &["action", "scope", "match", "not_match", "match_all"],
    required: &["action", "scope"],
    min_properties: 0,
};

const ACTIONS: [&str; 4] = ["block", "allow", "log", "redirect"];

const ACTION: ObjectSchema<'static> = ObjectSchema {
    allowed: &["block", "allow", "log", "redirect", "redirect_uri"],
    required: &[],
    min_properties: 0,
};

/// The criteria members, in the order the admin API documents (and `to_json` writes) them.
const MEMBERS: [&str; 13] = [
    "ipv4_cidrs",
    "ipv6_cidrs",
    "connecting_ipv4_cidrs",
    "connecting_ipv6_cidrs",
    "asns",
    "geo_country_codes",
    "geo_subdivision_codes",
    "ja3_fingerprints",
    "ja4_fingerprints",
    "user_agents",
    "hostnames",
    "auth0_managed",
    "http_message_signature",
];

const CRITERIA: ObjectSchema<'static> = ObjectSchema {
    allowed: &MEMBERS,
    required: &[],
    min_properties: 1,
};

const MESSAGE_SIGNATURE: ObjectSchema<'static> = ObjectSchema {
    allowed: &["keys"],
    required: &["keys"],
    min_properties: 0,
};

const KEY_REFERENCE: ObjectSchema<'static> = ObjectSchema {
    allowed: &["id"],
    required: &["id"],
    min_properties: 0,
};

const ENVELOPE: ObjectSchema<'static> = ObjectSchema {
    allowed: &["network_acls", "start", "limit", "total"],
    required: &["network_acls"],
    min_properties: 0,
};

const DESCRIPTION: StringRule = StringRule::between(0, 255);
const REDIRECT_URI: StringRule = StringRule::between(1, 2000);
const USER_AGENT: StringRule = StringRule::between(1, 1024);

const EXACTLY_ONE_ACTION: &str = "Exactly one of block, allow, log, redirect must be true";
const MATCH_OR_NOT_MATCH: &str =
    "At least one of match, not_match is required (or match_all alone)";

pub(crate) fn spec_from_json(
    body: &Value,
    path: &str,
    limits: &Limits,
) -> Result<NetworkAclSpec, ValidationError> {
    let object = ObjectReader::new(body, path, &SPEC)?;
    spec_fields(&object, limits)
}

/// The four spec fields of a body or a stored record.
fn spec_fields(
    object: &ObjectReader<'_>,
    limits: &Limits,
) -> Result<NetworkAclSpec, ValidationError> {
    let description = object.required("description", object.string("description", DESCRIPTION)?)?;
    let active = object.required("active", object.boolean("active")?)?;
    let priority = priority(object)?.unwrap_or_default();
    let rule = object.required("rule", rule(object, limits)?)?;
    Ok(NetworkAclSpec {
        description: description.to_owned(),
        active,
        priority,
        rule,
    })
}

fn priority(object: &ObjectReader<'_>) -> Result<Option<Priority>, ValidationError> {
    Ok(object
        .integer("priority", 1, 100)?
        .and_then(|p| u64::try_from(p).ok())
        .and_then(Priority::new))
}

fn rule(object: &ObjectReader<'_>, limits: &Limits) -> Result<Option<Rule>, ValidationError> {
    let Some(rule) = object.object("rule", &RULE)? else {
        return Ok(None);
    };
    let match_all = match rule.boolean("match_all")? {
        Some(false) => {
            return Err(ValidationError::new(
                rule.path_of("match_all"),
                "No enum match for: false",
            ))
        }
        Some(true) => true,
        None => false,
    };
    if match_all {
        let conflicting: Vec<&str> = ["match", "not_match"]
            .into_iter()
            .filter(|key| rule.has(key))
            .collect();
        if !conflicting.is_empty() {
            return Err(rule.error(format!(
                "match_all cannot be combined with {}",
                conflicting.join(", ")
            )));
        }
    } else if !rule.has("match") && !rule.has("not_match") {
        return Err(rule.error(MATCH_OR_NOT_MATCH));
    }
    let action = rule.required("action", action(&rule)?)?;
    let scope = rule.required(
        "scope",
        rule.enum_string("scope", &RuleScope::ALL.map(RuleScope::as_str))?,
    )?;
    // `enum_string` accepted only wire names, so this cannot fail; it still must not panic.
    let scope = RuleScope::parse(scope).ok_or_else(|| {
        ValidationError::new(
            rule.path_of("scope"),
            format!("No enum match for: {}", Value::from(scope)),
        )
    })?;
    let match_criteria = criteria(&rule, "match", limits)?;
    let not_match = criteria(&rule, "not_match", limits)?;
    let managed_in_both = match_criteria
        .as_ref()
        .is_some_and(|c| c.auth0_managed.is_some())
        && not_match
            .as_ref()
            .is_some_and(|c| c.auth0_managed.is_some());
    if managed_in_both {
        return Err(ValidationError::new(
            join(&rule.path_of("not_match"), "auth0_managed"),
            "auth0_managed may be named in match or in not_match, not in both",
        ));
    }
    let rule = Rule {
        action,
        scope,
        match_all,
        match_criteria,
        not_match,
    };
    let entries = rule
        .match_criteria
        .as_ref()
        .map_or(0, Criteria::entry_count)
        + rule.not_match.as_ref().map_or(0, Criteria::entry_count);
    if entries > limits.max_entries_per_rule {
        return Err(ValidationError::new(
            object.path_of("rule"),
            format!(
                "Too many entries in rule ({entries}), maximum {}",
                limits.max_entries_per_rule
            ),
        ));
    }
    Ok(Some(rule))
}

fn action(rule: &ObjectReader<'_>) -> Result<Option<Action>, ValidationError> {
    let Some(action) = rule.object("action", &ACTION)? else {
        return Ok(None);
    };
    let mut chosen = None;
    let mut count = 0;
    for name in ACTIONS {
        match action.boolean(name)? {
            Some(true) => {
                chosen = chosen.or(Some(name));
                count += 1;
            }
            Some(false) => {
                return Err(ValidationError::new(
                    action.path_of(name),
                    "No enum match for: false",
                ))
            }
            None => {}
        }
    }
    let redirect_uri = action.string("redirect_uri", REDIRECT_URI)?;
    if let Some(uri) = redirect_uri {
        formats::absolute_uri(uri).at(&action.path_of("redirect_uri"))?;
    }
    let (Some(name), 1) = (chosen, count) else {
        return Err(action.error(EXACTLY_ONE_ACTION));
    };
    let chosen = match name {
        "block" => Action::Block,
        "allow" => Action::Allow,
        "log" => Action::Log,
        _ => Action::Redirect {
            redirect_uri: action.required("redirect_uri", redirect_uri)?.to_owned(),
        },
    };
    if redirect_uri.is_some() && !matches!(chosen, Action::Redirect { .. }) {
        return Err(action.error("Property redirect_uri is only allowed with redirect"));
    }
    let action = chosen;
    Ok(Some(action))
}

fn criteria(
    rule: &ObjectReader<'_>,
    key: &str,
    limits: &Limits,
) -> Result<Option<Criteria>, ValidationError> {
    let Some(object) = rule.object(key, &CRITERIA)? else {
        return Ok(None);
    };
    let list = ArrayRule {
        min_items: 1,
        max_items: Some(limits.max_entries_per_member),
        unique: true,
    };
    let any = StringRule::ANY;
    let criteria = Criteria {
        ipv4_cidrs: strings(&object, "ipv4_cidrs", list, any, formats::ipv4_cidr)?,
        ipv6_cidrs: strings(&object, "ipv6_cidrs", list, any, |text| {
            formats::ipv6_cidr(text, "ipv4_cidrs")
        })?,
        connecting_ipv4_cidrs: strings(
            &object,
            "connecting_ipv4_cidrs",
            list,
            any,
            formats::ipv4_cidr,
        )?,
        connecting_ipv6_cidrs: strings(&object, "connecting_ipv6_cidrs", list, any, |text| {
            formats::ipv6_cidr(text, "connecting_ipv4_cidrs")
        })?,
        asns: match object.array("asns", list)? {
            None => None,
            Some(items) => Some(each_item(items, &object.path_of("asns"), |v| {
                let asn = check_integer(v, 0, i128::from(u32::MAX))?;
                Ok(u32::try_from(asn).unwrap_or_default())
            })?),
        },
        geo_country_codes: strings(
            &object,
            "geo_country_codes",
            list,
            any,
            formats::country_code,
        )?,
        geo_subdivision_codes: strings(
            &object,
            "geo_subdivision_codes",
            list,
            any,
            formats::subdivision_code,
        )?,
        ja3_fingerprints: strings(&object, "ja3_fingerprints", list, any, formats::ja3)?,
        ja4_fingerprints: strings(&object, "ja4_fingerprints", list, any, formats::ja4)?,
        user_agents: strings(
            &object,
            "user_agents",
            list,
            USER_AGENT,
            formats::user_agent,
        )?,
        hostnames: strings(&object, "hostnames", list, any, formats::hostname)?,
        auth0_managed: strings(&object, "auth0_managed", list, any, |text| {
            ManagedListName::parse(text)
                .ok_or_else(|| format!("No enum match for: {}", Value::from(text)))
        })?,
        http_message_signature: message_signature(&object, list)?,
    };
    Ok(Some(criteria))
}

/// `http_message_signature: {"keys": [{"id": "..."}, ...]}`: a non-empty list of unique key
/// references (whether each id names a key of the tenant is the server's check).
fn message_signature(
    object: &ObjectReader<'_>,
    list: ArrayRule,
) -> Result<Option<Vec<NetworkAclKeyId>>, ValidationError> {
    let Some(member) = object.object("http_message_signature", &MESSAGE_SIGNATURE)? else {
        return Ok(None);
    };
    let items = member.required("keys", member.array("keys", list)?)?;
    let path = member.path_of("keys");
    let mut ids = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let reference = ObjectReader::new(item, &index(&path, i), &KEY_REFERENCE)?;
        let text = reference.required(
            "id",
            reference.string("id", StringRule::between(1, crate::MAX_KEY_ID_LEN))?,
        )?;
        let id = NetworkAclKeyId::parse(text)
            .ok_or_else(|| crate::schema::format_error("network-acl-key-id", text))
            .at(&reference.path_of("id"))?;
        ids.push(id);
    }
    Ok(Some(ids))
}

/// A criteria member whose items are strings within `item`, each parsed by `parse`; a failure
/// is reported at `member[i]`.
fn strings<T>(
    object: &ObjectReader<'_>,
    name: &str,
    list: ArrayRule,
    item: StringRule,
    parse: impl Fn(&str) -> Result<T, Reason>,
) -> Result<Option<Vec<T>>, ValidationError> {
    match object.array(name, list)? {
        None => Ok(None),
        Some(items) => each_item(items, &object.path_of(name), |v| {
            parse(check_string(v, item)?)
        })
        .map(Some),
    }
}

pub(crate) fn patch_from_json(
    body: &Value,
    limits: &Limits,
) -> Result<NetworkAclPatch, ValidationError> {
    let object = ObjectReader::new(body, "", &PATCH)?;
    Ok(NetworkAclPatch {
        description: object
            .string("description", DESCRIPTION)?
            .map(str::to_owned),
        active: object.boolean("active")?,
        priority: priority(&object)?,
        rule: rule(&object, limits)?,
    })
}

pub(crate) fn record_from_json(
    body: &Value,
    path: &str,
    limits: &Limits,
) -> Result<NetworkAcl, ValidationError> {
    let object = ObjectReader::new(body, path, &RECORD)?;
    let id = object.required("id", object.string("id", StringRule::ANY)?)?;
    let id = AclId::parse(id)
        .ok_or_else(|| crate::schema::format_error("acl-id", id))
        .at(&object.path_of("id"))?;
    let spec = spec_fields(&object, limits)?;
    let timestamp = |key: &str| -> Result<Timestamp, ValidationError> {
        match object.string(key, StringRule::ANY)? {
            None => Ok(Timestamp::from_unix_millis(0)),
            Some(text) => Timestamp::parse(text)
                .ok_or_else(|| crate::schema::format_error("date-time", text))
                .at(&object.path_of(key)),
        }
    };
    Ok(NetworkAcl {
        id,
        spec,
        created_at: timestamp("created_at")?,
        updated_at: timestamp("updated_at")?,
    })
}

pub(crate) fn rule_set_from_json(
    value: &Value,
    version: u64,
    limits: &Limits,
) -> Result<RuleSet, ValidationError> {
    let records_rule = ArrayRule {
        min_items: 0,
        max_items: Some(limits.max_rules_per_set),
        unique: false,
    };
    let (records, base) = match value {
        Value::Array(_) => (crate::schema::check_array(value, records_rule).at("")?, ""),
        Value::Object(_) => {
            let envelope = ObjectReader::new(value, "", &ENVELOPE)?;
            for key in ["start", "limit", "total"] {
                envelope.integer(key, 0, i128::from(u64::MAX))?;
            }
            let records = envelope.array("network_acls", records_rule)?;
            (envelope.required("network_acls", records)?, "network_acls")
        }
        other => return Err(type_error("array,object", other)).at(""),
    };
    let mut acls = Vec::with_capacity(records.len());
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(records.len());
    let mut entries = 0usize;
    for (i, record) in records.iter().enumerate() {
        let path = index(base, i);
        let id = record.get("id").and_then(Value::as_str);
        let attribute = |e: ValidationError| match id {
            Some(id) => e.with_rule_id(id),
            None => e,
        };
        let acl = record_from_json(record, &path, limits).map_err(attribute)?;
        if let Some(first) = seen.insert(id.unwrap_or_default(), i) {
            return Err(attribute(ValidationError::new(
                join(&path, "id"),
                format!("Duplicate id {} (also at index {first})", acl.id),
            )));
        }
        entries += acl.spec.entry_count();
        if entries > limits.max_entries_per_set {
            return Err(ValidationError::new(
                base,
                format!(
                    "Too many entries in rule set (at least {entries}), maximum {}",
                    limits.max_entries_per_set
                ),
            ));
        }
        acls.push(acl);
    }
    Ok(RuleSet { version, acls })
}

pub(crate) fn spec_to_json(spec: &NetworkAclSpec) -> Value {
    let mut out = Map::new();
    spec_fields_to_json(spec, &mut out);
    Value::Object(out)
}

pub(crate) fn record_to_json(acl: &NetworkAcl) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), acl.id.as_str().into());
    spec_fields_to_json(&acl.spec, &mut out);
    out.insert("created_at".into(), acl.created_at.to_string().into());
    out.insert("updated_at".into(), acl.updated_at.to_string().into());
    Value::Object(out)
}

fn spec_fields_to_json(spec: &NetworkAclSpec, out: &mut Map<String, Value>) {
    out.insert("description".into(), spec.description.as_str().into());
    out.insert("active".into(), spec.active.into());
    out.insert("priority".into(), spec.priority.get().into());
    out.insert("rule".into(), rule_to_json(&spec.rule));
}

fn rule_to_json(rule: &Rule) -> Value {
    let mut action = Map::new();
    action.insert(rule.action.name().into(), true.into());
    if let Action::Redirect { redirect_uri } = &rule.action {
        action.insert("redirect_uri".into(), redirect_uri.as_str().into());
    }
    let mut out = Map::new();
    out.insert("action".into(), Value::Object(action));
    out.insert("scope".into(), rule.scope.as_str().into());
    if rule.match_all {
        out.insert("match_all".into(), true.into());
    }
    if let Some(criteria) = &rule.match_criteria {
        out.insert("match".into(), criteria_to_json(criteria));
    }
    if let Some(criteria) = &rule.not_match {
        out.insert("not_match".into(), criteria_to_json(criteria));
    }
    Value::Object(out)
}

fn criteria_to_json(criteria: &Criteria) -> Value {
    fn texts<T>(
        out: &mut Map<String, Value>,
        key: &str,
        list: &Option<Vec<T>>,
        text: fn(&T) -> &str,
    ) {
        if let Some(list) = list {
            let items = list.iter().map(|item| Value::from(text(item))).collect();
            out.insert(key.into(), Value::Array(items));
        }
    }
    let mut out = Map::new();
    texts(&mut out, MEMBERS[0], &criteria.ipv4_cidrs, |e| e.text());
    texts(&mut out, MEMBERS[1], &criteria.ipv6_cidrs, |e| e.text());
    texts(&mut out, MEMBERS[2], &criteria.connecting_ipv4_cidrs, |e| {
        e.text()
    });
    texts(&mut out, MEMBERS[3], &criteria.connecting_ipv6_cidrs, |e| {
        e.text()
    });
    if let Some(asns) = &criteria.asns {
        let items = asns.iter().map(|&asn| Value::from(asn)).collect();
        out.insert(MEMBERS[4].into(), Value::Array(items));
    }
    texts(&mut out, MEMBERS[5], &criteria.geo_country_codes, |e| {
        e.text()
    });
    texts(&mut out, MEMBERS[6], &criteria.geo_subdivision_codes, |e| {
        e.text()
    });
    texts(&mut out, MEMBERS[7], &criteria.ja3_fingerprints, |e| {
        e.text()
    });
    texts(&mut out, MEMBERS[8], &criteria.ja4_fingerprints, |e| {
        e.text()
    });
    texts(&mut out, MEMBERS[9], &criteria.user_agents, |e| e.text());
    texts(&mut out, MEMBERS[10], &criteria.hostnames, |e| e.text());
    texts(&mut out, MEMBERS[11], &criteria.auth0_managed, |n| {
        n.as_str()
    });
    if let Some(keys) = &criteria.http_message_signature {
        let keys = keys
            .iter()
            .map(|id| serde_json::json!({"id": id.as_str()}))
            .collect();
        let mut member = Map::new();
        member.insert("keys".into(), Value::Array(keys));
        out.insert(MEMBERS[12].into(), Value::Object(member));
    }
    Value::Object(out)
}
