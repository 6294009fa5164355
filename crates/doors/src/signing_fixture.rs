//! Tests' signed requests: an enforcer that blocks every request not signed (RFC 9421) with the
//! network ACL key [`KEY_ID`], and the `Signature-Input` / `Signature` pair for a request,
//! its signature base written by hand from RFC 9421 §2.5.
use std::sync::Arc;

use aws_lc_rs::hmac;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use netacl_edge::httpsig::SigningKeys;
use netacl_edge::{ClientAddrResolver, Enforcer, ForwardedHeader, TrustedProxies};

/// The key the enforcer's rule names.
pub(crate) const KEY_ID: &str = "nak_Proxy";
/// Its material.
pub(crate) const MATERIAL: [u8; 32] = [7; 32];

/// An enforcer trusting `trusted` as proxies, whose one rule blocks what is not signed with
/// [`KEY_ID`].
pub(crate) fn enforcer(trusted: &[&str]) -> Enforcer {
    let enforcer = Enforcer::new(
        Arc::new(netacl_eval::Engine::new()),
        ClientAddrResolver::new(
            TrustedProxies::parse(trusted.iter().copied()).unwrap(),
            ForwardedHeader::XForwardedFor,
        ),
    );
    let records = serde_json::json!([{
        "id": "acl_6dL8L5Vqc1TxxXRuLhzD7c", "description": "t", "active": true, "priority": 1,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "not_match": {"http_message_signature": {"keys": [{"id": KEY_ID}]}}},
        "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
    }]);
    let rules =
        netacl_model::RuleSet::from_json(&records, 1, &netacl_model::Limits::default()).unwrap();
    let keys = SigningKeys::new([(KEY_ID, &MATERIAL[..])]);
    enforcer
        .apply_rules_with_keys(
            &rules,
            &netacl_eval::ManagedIndex::empty(),
            Some(Arc::new(keys)),
        )
        .unwrap();
    enforcer
}

/// One signature's inputs: which components it covers and their values.
pub(crate) struct Signed<'a> {
    /// The key material it is made with.
    pub(crate) material: &'a [u8],
    /// `@method`, `@authority`, `@path`, and `@scheme` when given.
    pub(crate) method: &'a str,
    pub(crate) authority: &'a str,
    pub(crate) path: &'a str,
    pub(crate) scheme: Option<&'a str>,
}

impl Signed<'_> {
    /// `(Signature-Input, Signature)`, created now and valid for five minutes.
    pub(crate) fn fields(&self) -> (String, String) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut covered = String::from("\"@method\" \"@authority\" \"@path\"");
        let mut base = format!(
            "\"@method\": {}\n\"@authority\": {}\n\"@path\": {}\n",
            self.method, self.authority, self.path
        );
        if let Some(scheme) = self.scheme {
            covered.push_str(" \"@scheme\"");
            base.push_str(&format!("\"@scheme\": {scheme}\n"));
        }
        let params = format!(
            "({covered});created={now};expires={};keyid=\"{KEY_ID}\"",
            now + 300
        );
        base.push_str(&format!("\"@signature-params\": {params}"));
        let mac = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, self.material),
            base.as_bytes(),
        );
        (
            format!("sig1={params}"),
            format!("sig1=:{}:", STANDARD.encode(mac.as_ref())),
        )
    }
}
