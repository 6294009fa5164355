//! A managed list's body read straight into its entries: `{"items": [...]}` parsed item by
//! item, each string validated into a [`ManagedEntry`] as it comes, with no JSON value of the
//! whole body in between. What it holds is the body's text and the entries (plus one item at a
//! time); items past the limit are counted, not kept.
//!
//! The answers are exactly those of [`ManagedList::from_json`] over the parsed body (tested
//! against it): nesting over the limit, then JSON syntax, then the body's members (the first
//! unknown one in the body's order, then a missing `items`), then `items` itself (not an
//! array, too long, not unique), then the first item that is not a valid entry.
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value};

use crate::managed::{ManagedEntry, ManagedList};
use crate::nesting::{nests_deeper_than, JsonTextError, MAX_NESTING_DEPTH};
use crate::schema::{
    check_string, first_duplicate, index, missing_property, push_printable, type_error, Reason,
    StringRule,
};
use crate::ValidationError;

/// Why a list body was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagedListBodyError {
    /// Not JSON, or nested too deep.
    #[error(transparent)]
    Text(#[from] JsonTextError),
    /// JSON, but not a valid list body (the message and property path of
    /// [`ManagedList::from_json`]).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

/// A list built from its items as they arrive (the items of `{"items": [...]}`, or of a form's
/// `items[]` fields): [`ManagedListItems::finish`] checks them as [`ManagedList::from_json`]
/// checks the array, with errors at `items` and `items[i]`.
#[derive(Debug)]
pub struct ManagedListItems {
    max: usize,
    count: usize,
    entries: Vec<ManagedEntry>,
    /// From the first item that is not a valid entry on (the list is refused): that item's
    /// index and error, and every item from it on (to tell which error the body gets).
    refused: Option<(usize, Reason, Vec<Value>)>,
}

impl ManagedListItems {
    /// No item yet; at most `max_items` are accepted.
    pub fn new(max_items: usize) -> Self {
        Self {
            max: max_items,
            count: 0,
            entries: Vec::new(),
            refused: None,
        }
    }

    /// Room for about `items` more (a hint; never more than the limit).
    pub fn reserve(&mut self, items: usize) {
        self.entries.reserve(items.min(self.max));
    }

    /// Whether one more item would be one too many (it will only be counted).
    pub fn is_full(&self) -> bool {
        self.count >= self.max
    }

    /// The next item.
    pub fn push(&mut self, item: Value) {
        self.count += 1;
        if self.count > self.max {
            self.skip_kept();
            return;
        }
        if let Some((_, _, rest)) = &mut self.refused {
            rest.push(item);
            return;
        }
        let parsed = check_string(&item, StringRule::ANY).and_then(ManagedEntry::parse);
        match parsed {
            Ok(entry) => self.entries.push(entry),
            Err(reason) => self.refused = Some((self.count - 1, reason, vec![item])),
        }
    }

    /// One more item, past the limit: counted only.
    fn push_past_limit(&mut self) {
        self.count += 1;
        self.skip_kept();
    }

    /// Past the limit nothing is kept: the answer is "too long" whatever the items are.
    fn skip_kept(&mut self) {
        if self.count == self.max + 1 {
            self.entries = Vec::new();
            self.refused = None;
        }
    }

    /// The list, or why it is refused (at `items` or `items[i]`).
    pub fn finish(self) -> Result<ManagedList, ValidationError> {
        if self.count > self.max {
            return Err(ValidationError::new(
                "items",
                format!("Array is too long ({}), maximum {}", self.count, self.max),
            ));
        }
        let not_unique = |(first, second): (usize, usize)| {
            ValidationError::new(
                "items",
                format!("Array items are not unique (indexes {first} and {second})"),
            )
        };
        match self.refused {
            None => {
                if let Some(pair) = first_duplicate_entry(&self.entries) {
                    return Err(not_unique(pair));
                }
                let mut entries = self.entries;
                if entries.capacity() > entries.len() + entries.len() / 4 {
                    entries.shrink_to_fit();
                }
                Ok(ManagedList::new(entries))
            }
            Some((at, reason, rest)) => {
                let all: Vec<Value> = self
                    .entries
                    .iter()
                    .map(|e| Value::from(e.text()))
                    .chain(rest)
                    .collect();
                if let Some(pair) = first_duplicate(&all) {
                    return Err(not_unique(pair));
                }
                Err(ValidationError::new(index("items", at), reason))
            }
        }
    }
}

/// The pair `first_duplicate` reports, over entries (equal texts are equal items): sorting
/// their indexes by text takes four bytes an entry, not a map of them.
fn first_duplicate_entry(entries: &[ManagedEntry]) -> Option<(usize, usize)> {
    let mut order: Vec<u32> = (0..entries.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        entries[a as usize]
            .text()
            .cmp(entries[b as usize].text())
            .then(a.cmp(&b))
    });
    order
        .windows(2)
        .filter(|w| entries[w[0] as usize].text() == entries[w[1] as usize].text())
        .map(|w| (w[0] as usize, w[1] as usize))
        .min()
}

impl ManagedList {
    /// Reads the admin API's body text `{"items": [...]}` straight into a list (see the
    /// module docs): the same answers as [`parse_json`](crate::parse_json) and then
    /// [`ManagedList::from_json`], without a JSON value of the body.
    pub fn from_json_text(text: &[u8], max_items: usize) -> Result<Self, ManagedListBodyError> {
        if nests_deeper_than(text, MAX_NESTING_DEPTH) {
            return Err(JsonTextError::TooDeep {
                limit: MAX_NESTING_DEPTH,
            }
            .into());
        }
        let mut de = serde_json::Deserializer::from_slice(text);
        let body = (&mut de)
            .deserialize_any(BodyVisitor {
                max_items,
                hint: item_hint(text),
            })
            .map_err(JsonTextError::from)?;
        de.end().map_err(JsonTextError::from)?;
        let (unknown, items) = match body {
            Body::Object { unknown, items } => (unknown, items),
            Body::Other(value) => {
                return Err(ValidationError::new("", type_error("object", &value)).into())
            }
        };
        if let Some(key) = unknown {
            let mut reason = String::from("Additional properties not allowed: ");
            push_printable(&mut reason, &key);
            return Err(ValidationError::new("", reason).into());
        }
        match items {
            None => Err(ValidationError::new("", missing_property("items")).into()),
            Some(Items::Other(value)) => {
                Err(ValidationError::new("items", type_error("array", &value)).into())
            }
            Some(Items::Array(items)) => Ok(items.finish()?),
        }
    }

    /// Reads JSON text holding the `items` array alone (what a form's `items=[...]` field
    /// holds) straight into a list, nested at most `max_depth` levels: the same answers as
    /// [`parse_json`](crate::parse_json) of the text and [`ManagedList::from_json`] of
    /// `{"items": ...}`.
    pub fn from_items_json_text(
        text: &[u8],
        max_depth: usize,
        max_items: usize,
    ) -> Result<Self, ManagedListBodyError> {
        if nests_deeper_than(text, max_depth) {
            return Err(JsonTextError::TooDeep { limit: max_depth }.into());
        }
        let mut de = serde_json::Deserializer::from_slice(text);
        let items = (&mut de)
            .deserialize_any(ItemsVisitor {
                max_items,
                hint: item_hint(text),
            })
            .map_err(JsonTextError::from)?;
        de.end().map_err(JsonTextError::from)?;
        match items {
            Items::Other(value) => {
                Err(ValidationError::new("items", type_error("array", &value)).into())
            }
            Items::Array(items) => Ok(items.finish()?),
        }
    }
}

/// At most how many items a body holds (one more than its commas): room is reserved for
/// them, and what is not used is never touched (or is given back).
fn item_hint(text: &[u8]) -> usize {
    text.iter().filter(|&&b| b == b',').count() + 1
}

/// The body as far as the answer goes.
enum Body {
    /// An object: its first unknown member's name, and its (last) `items`.
    Object {
        unknown: Option<String>,
        items: Option<Items>,
    },
    /// Anything else (only its type matters).
    Other(Value),
}

/// The `items` member.
enum Items {
    Array(ManagedListItems),
    /// Not an array (only its type matters).
    Other(Value),
}

/// A value whose content does not matter: parsed as a JSON value is (so a body gets the same
/// syntax errors), never kept.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

/// A scalar as a JSON value is built (only its type is used).
fn scalar_f64(value: f64) -> Value {
    Number::from_f64(value).map_or(Value::Null, Value::Number)
}

struct BodyVisitor {
    max_items: usize,
    hint: usize,
}

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = Body;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Body, E> {
        Ok(Body::Other(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Body, E> {
        Ok(Body::Other(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Body, E> {
        Ok(Body::Other(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Body, E> {
        Ok(Body::Other(scalar_f64(v)))
    }
    fn visit_str<E>(self, _: &str) -> Result<Body, E> {
        Ok(Body::Other(Value::String(String::new())))
    }
    fn visit_unit<E>(self) -> Result<Body, E> {
        Ok(Body::Other(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Body, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Body::Other(Value::Array(Vec::new())))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Body, A::Error> {
        let mut unknown = None;
        let mut items = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                // A member given twice: the last one counts, as in a parsed value.
                drop(items.take());
                items = Some(map.next_value_seed(ItemsVisitor {
                    max_items: self.max_items,
                    hint: self.hint,
                })?);
            } else {
                unknown.get_or_insert(key);
                map.next_value::<Skip>()?;
            }
        }
        Ok(Body::Object { unknown, items })
    }
}

struct ItemsVisitor {
    max_items: usize,
    hint: usize,
}

impl<'de> DeserializeSeed<'de> for ItemsVisitor {
    type Value = Items;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Items, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsVisitor {
    type Value = Items;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Items, E> {
        Ok(Items::Other(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Items, E> {
        Ok(Items::Other(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Items, E> {
        Ok(Items::Other(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Items, E> {
        Ok(Items::Other(scalar_f64(v)))
    }
    fn visit_str<E>(self, _: &str) -> Result<Items, E> {
        Ok(Items::Other(Value::String(String::new())))
    }
    fn visit_unit<E>(self) -> Result<Items, E> {
        Ok(Items::Other(Value::Null))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Items, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Items::Other(Value::Object(serde_json::Map::new())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items, A::Error> {
        let mut items = ManagedListItems::new(self.max_items);
        items.reserve(self.hint);
        loop {
            if items.is_full() {
                if seq.next_element::<Skip>()?.is_none() {
                    break;
                }
                items.push_past_limit();
            } else {
                match seq.next_element::<Value>()? {
                    Some(item) => items.push(item),
                    None => break,
                }
            }
        }
        Ok(Items::Array(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    /// The answer of the path through a parsed value: the list, or the error's text.
    fn through_value(text: &str, max: usize) -> Result<ManagedList, String> {
        let value = parse_json(text.as_bytes(), MAX_NESTING_DEPTH).map_err(|e| e.to_string())?;
        ManagedList::from_json(&value, max).map_err(|e| e.to_string())
    }

    fn streamed(text: &str, max: usize) -> Result<ManagedList, String> {
        ManagedList::from_json_text(text.as_bytes(), max).map_err(|e| e.to_string())
    }

    /// Valid bodies, every kind of refusal and the orders between them, malformed and deep
    /// text: the same list or the same message as parsing the body into a value and checking
    /// that.
    #[test]
    fn reads_bodies_as_the_value_path_does() {
        let deep = format!(
            "{{\"x\": {}1{}, \"items\": []}}",
            "[".repeat(40),
            "]".repeat(40)
        );
        let bodies = [
            r#"{"items": []}"#,
            r#"{"items": ["192.0.2.0/24", "2001:db8::/32", "e7d705a3286e19ea42f587b344ee6865", "t13d1516h2_8daaf6152771_02713d6af862"]}"#,
            r#"  {"items": ["10.0.0.1"]}  "#,
            r#"{"items": ["10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.2"]}"#,
            r#"{"items": ["10.0.0.1", "x", "10.0.0.1"]}"#,
            r#"{"items": ["10.0.0.1", 1, 2, 1]}"#,
            r#"{"items": ["10.0.0.1", 1.0, 1]}"#,
            r#"{"items": ["10.0.0.1", [1], {"a": 1}, {"a": 1}]}"#,
            r#"{"items": ["10.0.0.1", "10.0.0.256"]}"#,
            r#"{"items": [null]}"#,
            r#"{"items": ["a", "b", "c", "d"]}"#,
            r#"{"items": ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]}"#,
            r#"{"items": [], "name": "x"}"#,
            r#"{"name": "x", "items": "nope"}"#,
            r#"{"b": 1, "a": 2}"#,
            r#"{}"#,
            r#"{"items": null}"#,
            r#"{"items": 1.5}"#,
            r#"{"items": {"a": []}}"#,
            r#"{"items": ["10.0.0.1"], "items": ["10.0.0.2", "10.0.0.2"]}"#,
            r#"{"items": ["10.0.0.1", "10.0.0.1"], "items": []}"#,
            r#"[1, 2]"#,
            r#""text""#,
            r#"12"#,
            r#"1.5"#,
            r#"true"#,
            r#"null"#,
            r#"{"items": ["10.0.0.1",]}"#,
            r#"{"items": ["10.0.0.1"]"#,
            r#"{"items": ["10.0.0.1"]} x"#,
            r#"{"items": ["\ud800"]}"#,
            r#"{"x": "\ud800", "items": []}"#,
            r#"{"items": ["a\u0000b"]}"#,
            r#"{"items": ["::ffff:192.0.2.1"], "extra": [1, 2, "#,
            r#"{"items": ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "x"#,
            &deep,
            "",
            "   ",
        ];
        for body in bodies {
            for max in [0, 3, 10] {
                assert_eq!(
                    streamed(body, max),
                    through_value(body, max),
                    "{body} (max {max})"
                );
            }
        }
    }

    /// A form's `items=[...]` text is read as the value path reads it.
    #[test]
    fn reads_items_text_as_the_value_path_does() {
        for text in [
            r#"[]"#,
            r#"["192.0.2.0/24", "10.0.0.1"]"#,
            r#"["10.0.0.1", "10.0.0.1"]"#,
            r#"["10.0.0.1", 7]"#,
            r#"{"a": 1}"#,
            r#""x""#,
            r#"["10.0.0.1""#,
            "[[[[[1]]]]]",
        ] {
            for (max, depth) in [(1, 31), (5, 31), (5, 3)] {
                let expected = parse_json(text.as_bytes(), depth)
                    .map_err(|e| e.to_string())
                    .and_then(|items| {
                        ManagedList::from_json(&serde_json::json!({ "items": items }), max)
                            .map_err(|e| e.to_string())
                    });
                let got = ManagedList::from_items_json_text(text.as_bytes(), depth, max)
                    .map_err(|e| e.to_string());
                assert_eq!(got, expected, "{text} (max {max}, depth {depth})");
            }
        }
    }

    /// Items past the limit are counted, not kept; the count is the whole array's.
    #[test]
    fn items_past_the_limit_are_only_counted() {
        let mut items = ManagedListItems::new(2);
        for text in ["10.0.0.1", "10.0.0.2"] {
            items.push(Value::from(text));
        }
        assert!(items.is_full());
        items.push(Value::from("10.0.0.3"));
        assert!(items.entries.is_empty() && items.refused.is_none());
        for _ in 0..3 {
            items.push_past_limit();
        }
        assert_eq!(
            items.finish().unwrap_err().to_string(),
            "Payload validation error: 'Array is too long (6), maximum 2' on property items."
        );
    }
}
