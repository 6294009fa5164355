//! Form bodies as a generic client can build them: the form variant of every component schema a
//! form body uses (without what a form cannot carry) and the `deepObject` encoding of nested
//! objects.
use serde_json::{json, Map, Value};

use super::operation::{schema_name, Operation};

/// The form media type.
pub(super) const FORM: &str = "application/x-www-form-urlencoded";

/// Suffix of the form variant of a component schema (`NetworkAclCreateForm`).
pub(super) const FORM_SUFFIX: &str = "Form";

/// Object member names a form can carry in brackets: not empty, no bracket, not all digits (a
/// digit segment is an array index).
const FORM_MEMBER_NAME: &str = "^[^\\[\\]]*[^\\[\\]0-9][^\\[\\]]*$";

/// Adds the form variant of every component a form body uses, and each form body's encoding.
pub(super) fn add_form_schemas(document: &mut Value, operations: &[Operation]) {
    let Some(schemas) = document
        .pointer("/components/schemas")
        .and_then(Value::as_object)
        .cloned()
    else {
        return;
    };
    let mut bodies: Vec<String> = Vec::new();
    for op in operations {
        if let (Some(body), true) = (op.body, op.form) {
            let name = schema_name(body).to_owned();
            if !bodies.contains(&name) {
                bodies.push(name);
            }
        }
    }
    // The components reachable from the form bodies, each turned into its form variant.
    let mut pending: Vec<String> = bodies.clone();
    let mut variants = Map::new();
    while let Some(name) = pending.pop() {
        let form_name = format!("{name}{FORM_SUFFIX}");
        if variants.contains_key(&form_name) {
            continue;
        }
        let Some(schema) = schemas.get(&name) else {
            continue;
        };
        let mut variant = form_variant(schema, &mut pending);
        if bodies.contains(&name) {
            drop_top_level_arrays(&mut variant, &schemas);
            if let Value::Object(map) = &mut variant {
                // An empty form is an empty body, `{}`, read as the JSON one: the body keeps its
                // own least count of members (only a nested object that is empty sends nothing).
                match schema.get("minProperties") {
                    Some(least) => map.insert("minProperties".into(), least.clone()),
                    None => map.remove("minProperties"),
                };
                map.insert(
                    "description".into(),
                    json!(
                        "The form body: nested objects as bracketed keys \
                           (`deepObject`), array items by index or `[]`; what a form cannot \
                           carry (null, empty objects and arrays, fractional numbers, \
                           top-level arrays) is left out; the JSON body takes it."
                    ),
                );
            }
        }
        variants.insert(form_name, variant);
    }
    let encodings: Vec<(String, Value)> = bodies
        .iter()
        .map(|name| {
            let variant = &variants[&format!("{name}{FORM_SUFFIX}")];
            (name.clone(), deep_object_encoding(variant, &schemas))
        })
        .collect();
    // A body whose every member is a top-level array has no form a generic client can spell
    // (`PUT /_netacl/v1/managed-lists/{name}`: `items`); the server still takes its bracketed
    // form (`items[0]=...`), the document offers JSON only.
    let unspellable: Vec<String> = bodies
        .iter()
        .filter(|name| {
            variants[&format!("{name}{FORM_SUFFIX}")]
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        })
        .cloned()
        .collect();
    for name in &unspellable {
        variants.remove(&format!("{name}{FORM_SUFFIX}"));
    }
    if let Some(target) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        target.extend(variants);
    }
    if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
        for item in paths.values_mut().filter_map(Value::as_object_mut) {
            for operation in item.values_mut() {
                let Some(form) = operation
                    .pointer_mut("/requestBody/content/application~1x-www-form-urlencoded")
                else {
                    continue;
                };
                let body = form
                    .pointer("/schema/$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.rsplit('/').next())
                    .and_then(|n| n.strip_suffix(FORM_SUFFIX))
                    .map(str::to_owned);
                if let Some((_, encoding)) =
                    encodings.iter().find(|(n, _)| Some(n) == body.as_ref())
                {
                    form["encoding"] = encoding.clone();
                }
                if body.as_ref().is_some_and(|name| unspellable.contains(name)) {
                    if let Some(content) = operation
                        .pointer_mut("/requestBody/content")
                        .and_then(Value::as_object_mut)
                    {
                        content.remove(FORM);
                    }
                }
            }
        }
    }
}

/// The form variant of a schema: `null` left out (forms cannot carry it), objects and arrays
/// not empty (an empty one sends nothing; [`add_form_schemas`] gives a body its own count back), numbers as integers (the form reader coerces 64-bit
/// integers only), member names a bracket key can spell; `$ref`s to form variants, queued in
/// `pending`.
fn form_variant(schema: &Value, pending: &mut Vec<String>) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let value = match key.as_str() {
            "$ref" => {
                let target = value.as_str().unwrap_or("");
                let name = target.rsplit('/').next().unwrap_or("").to_owned();
                let form = format!("#/components/schemas/{name}{FORM_SUFFIX}");
                pending.push(name);
                Value::String(form)
            }
            "properties" => Value::Object(
                value
                    .as_object()
                    .map(|props| {
                        props
                            .iter()
                            .map(|(k, v)| (k.clone(), form_variant(v, pending)))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "items" | "not" => form_variant(value, pending),
            "additionalProperties" if value.is_object() => form_variant(value, pending),
            "oneOf" | "anyOf" | "allOf" => Value::Array(
                value
                    .as_array()
                    .map(|branches| {
                        branches
                            .iter()
                            .filter(|b| b.get("type") != Some(&json!("null")))
                            .map(|b| form_variant(b, pending))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "type" => match value {
                Value::Array(types) => {
                    let kept: Vec<Value> = types
                        .iter()
                        .filter(|t| *t != "null")
                        .map(|t| {
                            if t == "number" {
                                json!("integer")
                            } else {
                                t.clone()
                            }
                        })
                        .collect();
                    match kept.as_slice() {
                        [one] => one.clone(),
                        _ => Value::Array(kept),
                    }
                }
                Value::String(t) if t == "number" => json!("integer"),
                other => other.clone(),
            },
            "enum" => Value::Array(
                value
                    .as_array()
                    .map(|v| v.iter().filter(|x| !x.is_null()).cloned().collect())
                    .unwrap_or_default(),
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    let kind = out.get("type").cloned();
    let is = |name: &str| kind.as_ref().is_some_and(|k| k == name);
    if is("object") || out.contains_key("properties") {
        let least = out
            .get("minProperties")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        out.insert("minProperties".into(), least.max(1).into());
        if out
            .get("additionalProperties")
            .is_some_and(Value::is_object)
        {
            out.insert("propertyNames".into(), json!({"pattern": FORM_MEMBER_NAME}));
        }
    }
    if is("array") {
        let least = out.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        out.insert("minItems".into(), least.max(1).into());
    }
    if is("integer") {
        out.entry("minimum").or_insert(json!(i64::MIN));
        out.entry("maximum").or_insert(json!(i64::MAX));
    }
    Value::Object(out)
}

/// The schema `value` names (a `$ref` to a component, resolved once), or itself.
pub(super) fn resolved<'a>(value: &'a Value, schemas: &'a Map<String, Value>) -> &'a Value {
    value
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .and_then(|name| {
            schemas
                .get(name)
                .or_else(|| schemas.get(name.strip_suffix(FORM_SUFFIX).unwrap_or(name)))
        })
        .unwrap_or(value)
}

/// Whether a schema describes an array.
pub(super) fn is_array(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("array"))
        || schema
            .get("type")
            .and_then(Value::as_array)
            .is_some_and(|t| t.contains(&json!("array")))
}

/// Whether a schema describes (or may describe) an object.
pub(super) fn is_object(schema: &Value, schemas: &Map<String, Value>) -> bool {
    let schema = resolved(schema, schemas);
    schema.get("type") == Some(&json!("object"))
        || schema.get("properties").is_some()
        || ["oneOf", "anyOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|b| b.iter().any(|b| is_object(b, schemas)))
        })
}

/// Leaves out the top-level array properties of a form body: no generic form encoding spells
/// an array at the top (OpenAPI's `deepObject` is for objects).
fn drop_top_level_arrays(body: &mut Value, schemas: &Map<String, Value>) {
    let Some(properties) = body.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    let arrays: Vec<String> = properties
        .iter()
        .filter(|(_, schema)| is_array(resolved(schema, schemas)))
        .map(|(name, _)| name.clone())
        .collect();
    for name in &arrays {
        properties.remove(name);
    }
    if let Some(required) = body.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|r| !arrays.iter().any(|a| r == a));
    }
}

/// `deepObject` encoding of every object property of a form body.
fn deep_object_encoding(body: &Value, schemas: &Map<String, Value>) -> Value {
    let mut encoding = Map::new();
    if let Some(properties) = body.get("properties").and_then(Value::as_object) {
        for (name, schema) in properties {
            if is_object(schema, schemas) {
                encoding.insert(
                    name.clone(),
                    json!({"style": "deepObject", "explode": true}),
                );
            }
        }
    }
    Value::Object(encoding)
}
