//! JSON Schema's `integer` is a value, not a spelling: `635.0` is an integer there (JSON Schema
//! 2020-12, "Validation" §6.1.1 and "Core" §4.2.2: a number with a zero fractional part). A
//! JSON request body is read, then every number the operation's body schema declares `integer`
//! that is written with a zero fraction (`635.0`, `6.35e2`) becomes that integer before the
//! body is validated, so the server accepts what its OpenAPI document accepts. It is then
//! stored and answered as the integer (`635`), as if it had been sent so; a value sent without
//! a fraction is untouched. Only places the schema types `integer` are read this way: free-form
//! members (metadata) keep exactly what was sent, and `635.5` stays a number, refused by the
//! validator with its property path.
//!
//! Bound: a number of magnitude 2^53 or more written with a fraction is left as it is (and
//! refused where an integer is required): above 2^53 a JSON number's text no longer maps to one
//! integer once read as a double (`9007199254740993.0` reads as `9007199254740992`), so taking
//! it would store another value than the one sent. Integers that large are written without a
//! fraction.
//!
//! Which schema applies is set per route ([`scope`], the route table and the operator's
//! report route); [`read_json_body`](crate::http::body::read_json_body) applies it.
use std::future::Future;

use serde_json::{json, Map, Value};

/// 2^53: below it every integer is exactly one double and every double with a zero fraction
/// is exactly one integer.
const EXACT_BELOW: f64 = 9_007_199_254_740_992.0;

/// How deep `$ref` and combinators are followed without descending into the value (a guard
/// against a schema that refers to itself; the document has no such loop).
const MAX_SCHEMA_STEPS: usize = 256;

/// The body schema of the operation being served: its name among `components`.
#[derive(Clone, Copy)]
pub(crate) struct BodySchema {
    components: &'static Map<String, Value>,
    name: &'static str,
}

tokio::task_local! {
    static BODY_SCHEMA: BodySchema;
}

/// Runs `handler` with `name` (a component of `components`) as the body schema that
/// [`apply_current`] reads.
pub(crate) async fn scope<F: Future>(
    components: &'static Map<String, Value>,
    name: &'static str,
    handler: F,
) -> F::Output {
    BODY_SCHEMA
        .scope(BodySchema { components, name }, handler)
        .await
}

/// Applies the body schema of the operation being served, if any (see the module docs).
pub(crate) fn apply_current(value: &mut Value) {
    let _ = BODY_SCHEMA.try_with(|body| {
        if let Some(schema) = body.components.get(body.name) {
            apply(value, schema, body.components);
        }
    });
}

/// Turns every number `schema` types `integer` that is written with a zero fraction (below
/// 2^53 in magnitude) into that integer; `$ref`s are resolved in `components`.
pub(crate) fn apply(value: &mut Value, schema: &Value, components: &Map<String, Value>) {
    walk(value, schema, components, 0);
}

fn walk(value: &mut Value, schema: &Value, components: &Map<String, Value>, steps: usize) {
    if steps > MAX_SCHEMA_STEPS {
        return;
    }
    let Value::Object(schema) = schema else {
        return;
    };
    if let Some(target) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| components.get(name))
    {
        walk(value, target, components, steps + 1);
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(combinator) {
            for branch in branches {
                walk(value, branch, components, steps + 1);
            }
        }
    }
    if declares_integer(schema.get("type")) {
        make_integral(value);
    }
    match value {
        Value::Object(members) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, member) in members.iter_mut() {
                if let Some(property) = properties.and_then(|p| p.get(name)) {
                    walk(member, property, components, steps + 1);
                } else if let Some(additional) = additional {
                    walk(member, additional, components, steps + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for value in items.iter_mut() {
                    walk(value, item, components, steps + 1);
                }
            }
        }
        _ => {}
    }
}

fn declares_integer(kind: Option<&Value>) -> bool {
    match kind {
        Some(Value::String(kind)) => kind == "integer",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "integer"),
        _ => false,
    }
}

fn make_integral(value: &mut Value) {
    let Value::Number(number) = value else {
        return;
    };
    if !number.is_f64() {
        return;
    }
    let Some(float) = number.as_f64() else {
        return;
    };
    if float.fract() != 0.0 || float.abs() >= EXACT_BELOW {
        return;
    }
    // Exact: |float| < 2^53 with no fraction (the casts cannot saturate or round).
    *value = if float < 0.0 {
        Value::from(float as i64)
    } else {
        Value::from(float as u64)
    };
}

/// The OpenAPI document's `x-netacl-refusals-beyond-schema` entry for the bound above: a number
/// of magnitude 2^53 or more written with a fraction is refused where an integer is required,
/// which JSON Schema cannot say (it calls `9007199254740992.0` an integer).
pub(crate) fn large_fraction_refusal() -> Value {
    json!({
        "message": "invalid type: floating point `-?[0-9.eE+-]+`, expected ",
        "why": "A number written with a fraction is read as an integer only below 2^53 in \
                magnitude (beyond it a double no longer names the integer its text wrote); \
                write larger integers without a fraction."
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn components() -> Map<String, Value> {
        let Value::Object(map) = json!({
            "Rule": {"type": "object", "properties": {
                "priority": {"type": "integer"},
                "weight": {"type": "number"},
                "asns": {"type": "array", "items": {"type": "integer"}},
                "metadata": {"type": "object"},
                "counts": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
                "either": {"oneOf": [{"type": "string"}, {"$ref": "#/components/schemas/Count"}]}
            }},
            "Count": {"type": "integer"}
        }) else {
            unreachable!("an object")
        };
        map
    }

    #[test]
    fn integers_written_with_a_zero_fraction_become_integers_where_the_schema_says_integer() {
        let components = components();
        let schema = json!({"$ref": "#/components/schemas/Rule"});
        let mut body = json!({
            "priority": 635.0, "weight": 2.0, "asns": [64500.0, 1, -0.0, 6.4501e4],
            "metadata": {"n": 3.0}, "counts": {"a": 7.0, "b": null}, "either": 9.0,
            "unknown": 1.0
        });
        apply(&mut body, &schema, &components);
        assert_eq!(
            body,
            json!({
                "priority": 635, "weight": 2.0, "asns": [64500, 1, 0, 64501],
                "metadata": {"n": 3.0}, "counts": {"a": 7, "b": null}, "either": 9,
                "unknown": 1.0
            })
        );
        assert!(body["priority"].is_u64());
        assert!(body["weight"].is_f64(), "a number stays as sent");
        assert!(
            body["metadata"]["n"].is_f64(),
            "free-form members stay as sent"
        );
    }

    #[test]
    fn fractions_and_numbers_past_2_53_stay_as_sent() {
        let components = components();
        let schema = json!({"$ref": "#/components/schemas/Rule"});
        for (sent, kept) in [
            (json!(635.5), true),
            (json!(9_007_199_254_740_992.0), true),
            (json!(-9_007_199_254_740_992.0), true),
            (json!(9_007_199_254_740_991.0), false),
            (json!(-5.0), false),
        ] {
            let mut body = json!({ "priority": sent.clone() });
            apply(&mut body, &schema, &components);
            assert_eq!(body["priority"].is_f64(), kept, "{sent}");
            assert_eq!(body["priority"].as_f64(), sent.as_f64(), "{sent}");
        }
    }

    #[test]
    fn a_schema_that_refers_to_itself_ends() {
        let Value::Object(components) = json!({"Loop": {"$ref": "#/components/schemas/Loop"}})
        else {
            unreachable!("an object")
        };
        let mut body = json!(1.0);
        apply(
            &mut body,
            &json!({"$ref": "#/components/schemas/Loop"}),
            &components,
        );
        assert_eq!(body, json!(1.0));
    }
}
