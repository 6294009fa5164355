//! Validation of arbitrary JSON bodies by every validator the admin API runs.

use netacl_model::{
    parse_json, BrandingPatch, BrandingSettings, ConnectionView, DirectoryData, Limits,
    ManagedList, NetworkAcl, NetworkAclKeySpec, NetworkAclPatch, NetworkAclSpec,
    OrganizationConnection, OrganizationConnectionPatch, OrganizationPatch, OrganizationSpec,
    RuleSet, MAX_NESTING_DEPTH,
};
use serde_json::{json, Value};

/// The most items a managed list may hold here (the server's `--max-entries` default is far
/// larger; a small cap lets the fuzzer reach the limit).
const MAX_LIST_ITEMS: usize = 64;

/// Arbitrary bytes as a request body: read as the server reads JSON bodies
/// ([`parse_json`], bounded at [`MAX_NESTING_DEPTH`] levels), then given to every body
/// validator of the admin API: network ACL create/replace, PATCH, stored records and rule
/// files; organization create and PATCH, an organization's connection (add and PATCH, both
/// views); branding PATCH; directory import; managed lists; network ACL key create.
///
/// Never panics; a value accepted comes back from `to_json` as a body that validates to the
/// same value (network ACLs, branding, managed lists); a PATCH applies without panic; an
/// accepted network ACL key holds 32 to 64 bytes with a lowercase hex SHA-256 fingerprint, and
/// no refusal of a key body quotes its `value` (the material is write-only).
pub fn bodies(data: &[u8]) {
    let Ok(value) = parse_json(data, MAX_NESTING_DEPTH) else {
        return;
    };
    validate_all(&value);
}

/// Every body validator on one JSON value (see [`bodies`]).
pub(crate) fn validate_all(value: &Value) {
    // Small caps, so that the fuzzer reaches them.
    let limits = Limits::new(16, 32, 8, 64);

    if let Ok(spec) = NetworkAclSpec::from_json(value, &limits) {
        let again = NetworkAclSpec::from_json(&spec.to_json(), &limits)
            .unwrap_or_else(|e| panic!("to_json of an accepted spec is refused: {e}"));
        assert_eq!(again, spec, "network ACL spec round trip");
    }
    if let Ok(patch) = NetworkAclPatch::from_json(value, &limits) {
        let current = NetworkAclSpec::from_json(
            &json!({"description": "current", "active": true, "priority": 7,
                    "rule": {"action": {"block": true}, "scope": "tenant",
                             "match": {"asns": [64500]}}}),
            &limits,
        )
        .expect("a valid spec");
        let _ = patch.apply(&current);
    }
    let _ = NetworkAcl::from_json(value, &limits);
    let _ = RuleSet::from_json(value, 1, &limits);

    let _ = OrganizationSpec::from_json(value);
    let _ = OrganizationPatch::from_json(value);
    for view in [ConnectionView::Enabled, ConnectionView::All] {
        if let Ok(connection) = OrganizationConnection::from_json(value, view) {
            if let Ok(patch) = OrganizationConnectionPatch::from_json(value, view) {
                let _ = patch.apply(&connection);
            }
        }
        let _ = OrganizationConnectionPatch::from_json(value, view);
    }

    if let Ok(patch) = BrandingPatch::from_json(value) {
        let again = BrandingPatch::from_json(&patch.to_json())
            .unwrap_or_else(|e| panic!("to_json of an accepted branding patch is refused: {e}"));
        assert_eq!(again, patch, "branding patch round trip");
        let settings = BrandingSettings::default().apply(&patch);
        let _ = settings.to_json();
    }

    let _ = DirectoryData::from_json(value);

    if let Ok(list) = ManagedList::from_json(value, MAX_LIST_ITEMS) {
        let body = json!({"items": list.items_json()});
        let again = ManagedList::from_json(&body, MAX_LIST_ITEMS)
            .unwrap_or_else(|e| panic!("the items of an accepted list are refused: {e}"));
        assert_eq!(again, list, "managed list round trip");
    }
    let _ = ManagedList::from_json_items(value, "items", MAX_LIST_ITEMS);

    match NetworkAclKeySpec::from_json(value) {
        Ok(key) => {
            let bytes = key.material.expose().len();
            assert!((32..=64).contains(&bytes), "{bytes} bytes of key material");
            let fingerprint = key.material.fingerprint();
            assert!(
                fingerprint.len() == 64
                    && fingerprint
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "fingerprint {fingerprint:?}"
            );
        }
        Err(err) => {
            if let Some(material) = value.get("value").and_then(Value::as_str) {
                let message = err.to_string();
                // A refusal may quote the field it refuses (an `alg` that is no algorithm, a
                // property that is not allowed): the material counts as quoted only when no
                // other field of the body, name or value, holds it as well.
                let elsewhere = value.as_object().is_some_and(|fields| {
                    fields
                        .iter()
                        .filter(|(name, _)| name.as_str() != "value")
                        .any(|(name, field)| {
                            name.contains(material) || field.to_string().contains(material)
                        })
                });
                assert!(
                    material.len() < 8 || elsewhere || !message.contains(material),
                    "a refused key body quotes its value: {message}"
                );
            }
        }
    }
}
