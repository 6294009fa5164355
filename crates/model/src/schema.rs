//! A small JSON-schema-style walker over `serde_json::Value`.
//!
//! It reads objects against a declared set of keys and typed values against simple rules, and
//! reports the first problem it finds with z-schema's wording and the dotted property path
//! (`rule.match.ipv4_cidrs[3]`). Bodies other than network ACLs (organizations, branding) reuse
//! it, so it knows nothing about ACLs.
//!
//! The checks come in two layers: `check_*` functions look at one value and return the reason
//! (without a path) it is refused, so that hot loops over list items build a path only when an
//! item fails; [`ObjectReader`] ties them to an object's keys and paths.
use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use crate::ValidationError;

/// What is wrong with a value, in z-schema's words, without the path.
pub(crate) type Reason = String;

/// `base.key`, or `key` at the root.
pub(crate) fn join(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_owned()
    } else {
        let mut path = String::with_capacity(base.len() + 1 + key.len());
        path.push_str(base);
        path.push('.');
        path.push_str(key);
        path
    }
}

/// `base[index]`.
pub(crate) fn index(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}

/// Attaches a path to a bare reason.
pub(crate) trait AtPath<T> {
    /// The error, if any, at `path`.
    fn at(self, path: &str) -> Result<T, ValidationError>;
}

impl<T> AtPath<T> for Result<T, Reason> {
    fn at(self, path: &str) -> Result<T, ValidationError> {
        self.map_err(|reason| ValidationError::new(path, reason))
    }
}

/// The JSON type name of a value, as JSON schema spells it. A number without a fractional part
/// is an `integer` (as in JavaScript, `1.0` is an integer too).
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if integer_value(n).is_some() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The integer a JSON number holds, if it has no fractional part and fits in an `i128`.
fn integer_value(n: &Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Some(i128::from(u));
    }
    let f = n.as_f64()?;
    // 1e38 < i128::MAX; beyond that an integral float is still an integer, but out of any
    // range this walker is asked to check, so it is reported as a (huge) number below.
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38).then_some(f as i128)
}

/// `Expected type string but found type integer`.
pub(crate) fn type_error(expected: &str, found: &Value) -> Reason {
    format!(
        "Expected type {expected} but found type {}",
        type_name(found)
    )
}

/// `Missing required property: description`.
pub(crate) fn missing_property(key: &str) -> Reason {
    format!("Missing required property: {key}")
}

/// `Object didn't pass validation for format ipv4-cidr: 10.0.0.256`. Control characters in the
/// value are escaped so that the message stays on one printable line.
pub(crate) fn format_error(format: &str, text: &str) -> Reason {
    let mut reason = format!("Object didn't pass validation for format {format}: ");
    push_printable(&mut reason, text);
    reason
}

/// Appends `text` with control characters written as `\u{..}` escapes.
pub(crate) fn push_printable(out: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
}

/// Length limits for a string, in characters (Unicode scalar values, not bytes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StringRule {
    /// `minLength`.
    pub(crate) min_len: usize,
    /// `maxLength`.
    pub(crate) max_len: Option<usize>,
}

impl StringRule {
    /// Any string.
    pub(crate) const ANY: StringRule = StringRule {
        min_len: 0,
        max_len: None,
    };

    /// A string of `min_len..=max_len` characters.
    pub(crate) const fn between(min_len: usize, max_len: usize) -> Self {
        Self {
            min_len,
            max_len: Some(max_len),
        }
    }
}

/// A string within `rule`.
pub(crate) fn check_string(value: &Value, rule: StringRule) -> Result<&str, Reason> {
    let Value::String(s) = value else {
        return Err(type_error("string", value));
    };
    // Counting characters is only needed near the limits: a string's character count is at most
    // its byte length and at least a quarter of it.
    let maybe_short = s.len() < rule.min_len.saturating_mul(4);
    let maybe_long = rule.max_len.is_some_and(|max| s.len() > max);
    if maybe_short || maybe_long {
        let chars = s.chars().count();
        if chars < rule.min_len {
            return Err(format!(
                "String is too short ({chars} chars), minimum {}",
                rule.min_len
            ));
        }
        if let Some(max) = rule.max_len.filter(|&max| chars > max) {
            return Err(format!("String is too long ({chars} chars), maximum {max}"));
        }
    }
    Ok(s)
}

/// An integer within `min..=max`.
pub(crate) fn check_integer(value: &Value, min: i128, max: i128) -> Result<i128, Reason> {
    let Value::Number(n) = value else {
        return Err(type_error("integer", value));
    };
    let Some(i) = integer_value(n) else {
        return Err(type_error("integer", value));
    };
    if i < min {
        return Err(format!("Value {i} is less than minimum {min}"));
    }
    if i > max {
        return Err(format!("Value {i} is greater than maximum {max}"));
    }
    Ok(i)
}

/// A number (integer or not) within `min..=max`.
pub(crate) fn check_number(value: &Value, min: f64, max: f64) -> Result<f64, Reason> {
    let Some(f) = value.as_f64() else {
        return Err(type_error("number", value));
    };
    if f < min {
        return Err(format!("Value {n} is less than minimum {min}", n = value));
    }
    if f > max {
        return Err(format!(
            "Value {n} is greater than maximum {max}",
            n = value
        ));
    }
    Ok(f)
}

/// A boolean.
pub(crate) fn check_boolean(value: &Value) -> Result<bool, Reason> {
    value.as_bool().ok_or_else(|| type_error("boolean", value))
}

/// One of the `allowed` strings.
pub(crate) fn check_enum<'a>(value: &'a Value, allowed: &[&str]) -> Result<&'a str, Reason> {
    let s = check_string(value, StringRule::ANY)?;
    if allowed.contains(&s) {
        Ok(s)
    } else {
        Err(format!("No enum match for: {value}"))
    }
}

/// Item count limits and uniqueness for an array.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArrayRule {
    /// `minItems`.
    pub(crate) min_items: usize,
    /// `maxItems`.
    pub(crate) max_items: Option<usize>,
    /// `uniqueItems`.
    pub(crate) unique: bool,
}

/// An array within `rule`.
pub(crate) fn check_array(value: &Value, rule: ArrayRule) -> Result<&[Value], Reason> {
    let Value::Array(items) = value else {
        return Err(type_error("array", value));
    };
    if items.len() < rule.min_items {
        return Err(format!(
            "Array is too short ({}), minimum {}",
            items.len(),
            rule.min_items
        ));
    }
    if let Some(max) = rule.max_items.filter(|&max| items.len() > max) {
        return Err(format!(
            "Array is too long ({}), maximum {max}",
            items.len()
        ));
    }
    if rule.unique {
        if let Some((first, second)) = first_duplicate(items) {
            return Err(format!(
                "Array items are not unique (indexes {first} and {second})"
            ));
        }
    }
    Ok(items)
}

/// A hashable stand-in for a JSON value under JSON equality (numbers compare by value).
#[derive(PartialEq, Eq, Hash)]
enum EqKey<'a> {
    Str(&'a str),
    Int(i128),
    Float(u64),
    Bool(bool),
    Null,
    // Arrays and objects are rare in lists; their canonical text stands in for them.
    Other(String),
}

fn eq_key(value: &Value) -> EqKey<'_> {
    match value {
        Value::String(s) => EqKey::Str(s),
        Value::Number(n) => match integer_value(n) {
            Some(i) => EqKey::Int(i),
            None => EqKey::Float(n.as_f64().unwrap_or(f64::NAN).to_bits()),
        },
        Value::Bool(b) => EqKey::Bool(*b),
        Value::Null => EqKey::Null,
        Value::Array(_) | Value::Object(_) => EqKey::Other(canonical_text(value)),
    }
}

/// JSON text with object keys sorted, so that equal values give equal text.
fn canonical_text(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical_text(&map[k])))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical_text).collect();
            format!("[{}]", items.join(","))
        }
        Value::Number(n) => match integer_value(n) {
            Some(i) => i.to_string(),
            None => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// The pair z-schema reports for a non-unique array: the smallest index `i` that has an equal
/// item after it, and the first such later index `j`. Linear time.
pub(crate) fn first_duplicate(items: &[Value]) -> Option<(usize, usize)> {
    // Short lists (the common case) are compared pairwise, without building a map.
    if items.len() <= 16 {
        let keys: Vec<EqKey<'_>> = items.iter().map(eq_key).collect();
        return (0..keys.len()).find_map(|i| {
            (i + 1..keys.len())
                .find(|&j| keys[i] == keys[j])
                .map(|j| (i, j))
        });
    }
    // For each distinct value: where it first occurs, and where it occurs the second time.
    let mut seen: HashMap<EqKey<'_>, (usize, Option<usize>)> = HashMap::with_capacity(items.len());
    for (j, item) in items.iter().enumerate() {
        seen.entry(eq_key(item))
            .and_modify(|(_, second)| {
                second.get_or_insert(j);
            })
            .or_insert((j, None));
    }
    seen.into_values()
        .filter_map(|(first, second)| second.map(|second| (first, second)))
        .min()
}

/// Validates every item of `items` with `check`, reporting a failure at `path[i]`.
pub(crate) fn each_item<'a, T>(
    items: &'a [Value],
    path: &str,
    mut check: impl FnMut(&'a Value) -> Result<T, Reason>,
) -> Result<Vec<T>, ValidationError> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        out.push(check(item).at(&index(path, i))?);
    }
    Ok(out)
}

/// The shape of an object: which keys it may hold, which it must hold, and how many at least.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ObjectSchema<'s> {
    /// Every key the object may hold (`additionalProperties: false`).
    pub(crate) allowed: &'s [&'s str],
    /// Keys that must be present, checked in this order.
    pub(crate) required: &'s [&'s str],
    /// `minProperties`.
    pub(crate) min_properties: usize,
}

/// An object whose keys have been checked against an [`ObjectSchema`], with typed getters for
/// its members. Getters return `Ok(None)` for an absent key.
#[derive(Debug)]
pub(crate) struct ObjectReader<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> ObjectReader<'a> {
    /// Checks, in order: the value is an object, it holds no unknown key (the first one in the
    /// body's order is reported), every required key is present, and it has enough keys.
    pub(crate) fn new(
        value: &'a Value,
        path: &str,
        schema: &ObjectSchema<'_>,
    ) -> Result<Self, ValidationError> {
        let Value::Object(map) = value else {
            return Err(type_error("object", value)).at(path);
        };
        if let Some(unknown) = map.keys().find(|k| !schema.allowed.contains(&k.as_str())) {
            let mut reason = String::from("Additional properties not allowed: ");
            push_printable(&mut reason, unknown);
            return Err(ValidationError::new(path, reason));
        }
        if let Some(missing) = schema.required.iter().find(|k| !map.contains_key(**k)) {
            return Err(ValidationError::new(path, missing_property(missing)));
        }
        if map.len() < schema.min_properties {
            return Err(ValidationError::new(
                path,
                format!(
                    "Too few properties defined ({}), minimum {}",
                    map.len(),
                    schema.min_properties
                ),
            ));
        }
        Ok(Self {
            map,
            path: path.to_owned(),
        })
    }

    /// The path of the member `key`.
    pub(crate) fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// An error about the object itself.
    pub(crate) fn error(&self, reason: impl Into<String>) -> ValidationError {
        ValidationError::new(self.path.as_str(), reason)
    }

    /// The raw member `key`.
    #[allow(dead_code)] // part of the walker's vocabulary, for members checked by hand
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// Whether the member `key` is present (even if `null`).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// A value that must be present: `Missing required property: key` on this object otherwise.
    pub(crate) fn required<T>(&self, key: &str, value: Option<T>) -> Result<T, ValidationError> {
        value.ok_or_else(|| self.error(missing_property(key)))
    }

    fn member<T>(
        &self,
        key: &str,
        check: impl FnOnce(&'a Value) -> Result<T, Reason>,
    ) -> Result<Option<T>, ValidationError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(value) => check(value).at(&self.path_of(key)).map(Some),
        }
    }

    /// A string member.
    pub(crate) fn string(
        &self,
        key: &str,
        rule: StringRule,
    ) -> Result<Option<&'a str>, ValidationError> {
        self.member(key, |v| check_string(v, rule))
    }

    /// An integer member within `min..=max`.
    pub(crate) fn integer(
        &self,
        key: &str,
        min: i128,
        max: i128,
    ) -> Result<Option<i128>, ValidationError> {
        self.member(key, |v| check_integer(v, min, max))
    }

    /// A number member within `min..=max`.
    #[allow(dead_code)] // part of the walker's vocabulary; network ACLs have no such field
    pub(crate) fn number(
        &self,
        key: &str,
        min: f64,
        max: f64,
    ) -> Result<Option<f64>, ValidationError> {
        self.member(key, |v| check_number(v, min, max))
    }

    /// A boolean member.
    pub(crate) fn boolean(&self, key: &str) -> Result<Option<bool>, ValidationError> {
        self.member(key, check_boolean)
    }

    /// A member that is one of the `allowed` strings.
    pub(crate) fn enum_string(
        &self,
        key: &str,
        allowed: &[&str],
    ) -> Result<Option<&'a str>, ValidationError> {
        self.member(key, |v| check_enum(v, allowed))
    }

    /// An array member (its items are left to the caller, see [`each_item`]).
    pub(crate) fn array(
        &self,
        key: &str,
        rule: ArrayRule,
    ) -> Result<Option<&'a [Value]>, ValidationError> {
        self.member(key, |v| check_array(v, rule))
    }

    /// An object member, read against `schema`.
    pub(crate) fn object(
        &self,
        key: &str,
        schema: &ObjectSchema<'_>,
    ) -> Result<Option<ObjectReader<'a>>, ValidationError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(value) => ObjectReader::new(value, &self.path_of(key), schema).map(Some),
        }
    }

    /// A member that may also be `null`: `Ok(Some(None))` for `null`. `json_type` is the type
    /// `check` expects (for the message `Expected type string,null but found type integer`).
    #[allow(dead_code)] // part of the walker's vocabulary; network ACLs have no nullable field
    pub(crate) fn nullable<T>(
        &self,
        key: &str,
        json_type: &str,
        check: impl FnOnce(&'a Value) -> Result<T, Reason>,
    ) -> Result<Option<Option<T>>, ValidationError> {
        self.member(key, |value| {
            let found = type_name(value);
            if found == "null" {
                Ok(None)
            } else if found == json_type || (json_type == "number" && found == "integer") {
                check(value).map(Some)
            } else {
                Err(format!(
                    "Expected type {json_type},null but found type {found}"
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SCHEMA: ObjectSchema<'static> = ObjectSchema {
        allowed: &["name", "size", "tags", "on", "kind", "note", "ratio"],
        required: &["name"],
        min_properties: 1,
    };

    fn reason<T: std::fmt::Debug>(r: Result<T, ValidationError>) -> (String, String) {
        let e = r.unwrap_err();
        (e.path, e.reason)
    }

    #[test]
    fn type_names() {
        assert_eq!(type_name(&json!(1)), "integer");
        assert_eq!(type_name(&json!(-1)), "integer");
        assert_eq!(type_name(&json!(1.0)), "integer");
        assert_eq!(type_name(&json!(1.5)), "number");
        assert_eq!(type_name(&json!(u64::MAX)), "integer");
        assert_eq!(type_name(&json!(null)), "null");
        assert_eq!(type_name(&json!("x")), "string");
        assert_eq!(type_name(&json!([])), "array");
        assert_eq!(type_name(&json!({})), "object");
        assert_eq!(type_name(&json!(true)), "boolean");
    }

    #[test]
    fn objects() {
        assert_eq!(
            reason(ObjectReader::new(&json!([]), "a.b", &SCHEMA)),
            (
                "a.b".into(),
                "Expected type object but found type array".into()
            )
        );
        assert_eq!(
            reason(ObjectReader::new(
                &json!({"name": "x", "foo": 1}),
                "",
                &SCHEMA
            )),
            ("".into(), "Additional properties not allowed: foo".into())
        );
        assert_eq!(
            reason(ObjectReader::new(&json!({"size": 1}), "o", &SCHEMA)),
            ("o".into(), "Missing required property: name".into())
        );
        let schema = ObjectSchema {
            required: &[],
            ..SCHEMA
        };
        assert_eq!(
            reason(ObjectReader::new(&json!({}), "o", &schema)),
            (
                "o".into(),
                "Too few properties defined (0), minimum 1".into()
            )
        );
    }

    #[test]
    fn getters() {
        let v = json!({"name": "héllo", "size": 101, "tags": ["a", "b", "a"], "on": 1,
                       "kind": "foo", "note": null, "ratio": 0.5});
        let o = ObjectReader::new(&v, "x", &SCHEMA).unwrap();
        assert_eq!(
            o.string("name", StringRule::between(1, 5)).unwrap(),
            Some("héllo")
        );
        assert_eq!(
            reason(o.string("name", StringRule::between(1, 4))),
            (
                "x.name".into(),
                "String is too long (5 chars), maximum 4".into()
            )
        );
        assert_eq!(
            reason(o.string("name", StringRule::between(6, 9))),
            (
                "x.name".into(),
                "String is too short (5 chars), minimum 6".into()
            )
        );
        assert_eq!(
            reason(o.string("size", StringRule::ANY)),
            (
                "x.size".into(),
                "Expected type string but found type integer".into()
            )
        );
        assert_eq!(
            reason(o.integer("size", 1, 100)),
            (
                "x.size".into(),
                "Value 101 is greater than maximum 100".into()
            )
        );
        assert_eq!(
            reason(o.integer("size", 102, 200)),
            ("x.size".into(), "Value 101 is less than minimum 102".into())
        );
        assert_eq!(o.integer("size", 0, 1000).unwrap(), Some(101));
        assert_eq!(
            reason(o.integer("ratio", 0, 1)),
            (
                "x.ratio".into(),
                "Expected type integer but found type number".into()
            )
        );
        assert_eq!(o.number("ratio", 0.0, 1.0).unwrap(), Some(0.5));
        assert_eq!(
            reason(o.number("ratio", 0.75, 1.0)),
            (
                "x.ratio".into(),
                "Value 0.5 is less than minimum 0.75".into()
            )
        );
        assert_eq!(
            reason(o.boolean("on")),
            (
                "x.on".into(),
                "Expected type boolean but found type integer".into()
            )
        );
        assert_eq!(
            reason(o.enum_string("kind", &["bar", "baz"])),
            ("x.kind".into(), "No enum match for: \"foo\"".into())
        );
        assert_eq!(o.enum_string("kind", &["foo"]).unwrap(), Some("foo"));
        let rule = ArrayRule {
            min_items: 1,
            max_items: Some(2),
            unique: true,
        };
        assert_eq!(
            reason(o.array("tags", rule)),
            ("x.tags".into(), "Array is too long (3), maximum 2".into())
        );
        let rule = ArrayRule {
            max_items: None,
            ..rule
        };
        assert_eq!(
            reason(o.array("tags", rule)),
            (
                "x.tags".into(),
                "Array items are not unique (indexes 0 and 2)".into()
            )
        );
        assert_eq!(
            o.nullable("note", "string", |v| check_string(v, StringRule::ANY))
                .unwrap(),
            Some(None)
        );
        assert_eq!(
            reason(o.nullable("size", "string", |v| check_string(v, StringRule::ANY))),
            (
                "x.size".into(),
                "Expected type string,null but found type integer".into()
            )
        );
        assert_eq!(o.boolean("absent").unwrap(), None);
        assert_eq!(
            reason(o.required("absent", o.boolean("absent").unwrap())),
            ("x".into(), "Missing required property: absent".into())
        );
    }

    #[test]
    fn duplicates_are_found_as_z_schema_does() {
        let dup = |v: Value| first_duplicate(v.as_array().unwrap());
        assert_eq!(dup(json!([1, 2, 3])), None);
        assert_eq!(dup(json!([1, 1])), Some((0, 1)));
        // The smallest first index wins, not the earliest second occurrence.
        assert_eq!(dup(json!(["a", "b", "b", "a"])), Some((0, 3)));
        assert_eq!(dup(json!([5, "x", 5.0])), Some((0, 2)));
        assert_eq!(dup(json!(["1", 1])), None);
        assert_eq!(
            dup(json!([{"a": 1, "b": 2}, {"b": 2, "a": 1}])),
            Some((0, 1))
        );
        assert_eq!(dup(json!([[1, 2], [2, 1]])), None);
        assert_eq!(dup(json!(["A", "a"])), None);
    }

    #[test]
    fn long_and_short_lists_agree_with_pairwise_search() {
        // Lists of 2..40 small integers drawn from a narrow range (so duplicates are common),
        // compared against z-schema's plain pairwise loop; both the short and long paths run.
        let mut seed = 0x2545_f491_u32;
        for len in 2..40usize {
            for _ in 0..20 {
                let items: Vec<Value> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        json!(seed % (len as u32 * 3 / 2 + 1))
                    })
                    .collect();
                let pairwise = (0..len)
                    .find_map(|i| (i + 1..len).find(|&j| items[i] == items[j]).map(|j| (i, j)));
                assert_eq!(first_duplicate(&items), pairwise, "{items:?}");
            }
        }
    }

    #[test]
    fn items_and_formats() {
        let items = json!(["ok", "ok", "b\u{7}ad"]);
        let e = each_item(items.as_array().unwrap(), "list", |v| {
            let s = check_string(v, StringRule::ANY)?;
            if s.chars().any(char::is_control) {
                Err(format_error("plain", s))
            } else {
                Ok(s)
            }
        })
        .unwrap_err();
        assert_eq!(e.path, "list[2]");
        assert_eq!(
            e.reason,
            "Object didn't pass validation for format plain: b\\u{7}ad"
        );
        assert_eq!(join("", "a"), "a");
        assert_eq!(join("a", "b"), "a.b");
        assert_eq!(index("", 3), "[3]");
    }
}
