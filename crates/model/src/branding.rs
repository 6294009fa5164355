//! Tenant branding settings (`PATCH /branding`) and the string formats branding shares with
//! organizations: colours and strict `https` URIs.
use serde_json::{Map, Number, Value};

use crate::schema::{
    check_number, check_string, format_error, type_name, AtPath, ObjectReader, ObjectSchema,
    Reason, StringRule,
};
use crate::ValidationError;

/// The longest URI accepted for a logo, favicon or font.
const MAX_URI_LEN: usize = 2000;

/// An HTML colour: `#` followed by 3, 4, 6 or 8 hex digits (any case).
pub(crate) fn check_color(value: &Value) -> Result<String, Reason> {
    let text = check_string(value, StringRule::ANY)?;
    let ok = match text.strip_prefix('#') {
        Some(hex) => {
            matches!(hex.len(), 3 | 4 | 6 | 8) && hex.bytes().all(|c| c.is_ascii_hexdigit())
        }
        None => false,
    };
    if ok {
        Ok(text.to_owned())
    } else {
        Err(format_error("html-color", text))
    }
}

/// An absolute `https` URI with a host: `https://` (scheme in any case), then a non-empty
/// authority, no spaces or control characters, at most 2000 characters.
pub(crate) fn check_https_uri(value: &Value) -> Result<String, Reason> {
    let text = check_string(value, StringRule::between(0, MAX_URI_LEN))?;
    // `split_at_checked` never cuts a character: a text whose eighth byte falls inside one
    // (`https:/é`) simply has no `https://` prefix.
    let rest = match text.split_at_checked(8) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https://") => Some(rest),
        _ => None,
    };
    let ok = rest.is_some_and(|rest| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        !host.is_empty() && !host.starts_with(':')
    }) && !text.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(text.to_owned())
    } else {
        Err(format_error("strict-https-uri-or-null", text))
    }
}

/// The member `key` of `o` checked with `check`; `Ok(None)` when absent.
pub(crate) fn member<'a, T>(
    o: &ObjectReader<'a>,
    key: &str,
    check: impl FnOnce(&'a Value) -> Result<T, Reason>,
) -> Result<Option<T>, ValidationError> {
    match o.get(key) {
        None => Ok(None),
        Some(value) => check(value).at(&o.path_of(key)).map(Some),
    }
}

/// An `https` URI or `null` (`Ok(None)`).
pub(crate) fn check_https_uri_or_null(value: &Value) -> Result<Option<String>, Reason> {
    match value {
        Value::Null => Ok(None),
        Value::String(_) => check_https_uri(value).map(Some),
        other => Err(format!(
            "Expected type string,null but found type {}",
            type_name(other)
        )),
    }
}

/// A colour or `null`.
fn check_color_or_null(value: &Value) -> Result<Option<String>, Reason> {
    match value {
        Value::Null => Ok(None),
        Value::String(_) => check_color(value).map(Some),
        other => Err(format!(
            "Expected type string,null but found type {}",
            type_name(other)
        )),
    }
}

/// The login page's background: a colour or a linear gradient.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PageBackground {
    /// A plain colour (`#rrggbb`, ...).
    Color(String),
    /// `{"type": "linear-gradient", "start", "end", "angle_deg"}`.
    LinearGradient {
        /// The colour at the start.
        start: String,
        /// The colour at the end.
        end: String,
        /// The angle in degrees, exactly as sent.
        angle_deg: Number,
    },
}

const GRADIENT: ObjectSchema<'static> = ObjectSchema {
    allowed: &["type", "start", "end", "angle_deg"],
    required: &["type", "start", "end", "angle_deg"],
    min_properties: 0,
};

impl PageBackground {
    fn from_json(value: &Value, path: &str) -> Result<Option<Self>, ValidationError> {
        match value {
            Value::Null => Ok(None),
            Value::String(_) => check_color(value).at(path).map(|c| Some(Self::Color(c))),
            Value::Object(_) => {
                let o = ObjectReader::new(value, path, &GRADIENT)?;
                o.enum_string("type", &["linear-gradient"])?;
                let start = o.required("start", member(&o, "start", check_color)?)?;
                let end = o.required("end", member(&o, "end", check_color)?)?;
                let angle = o.required(
                    "angle_deg",
                    member(&o, "angle_deg", |v| {
                        check_number(v, f64::MIN, f64::MAX)?;
                        match v {
                            Value::Number(n) => Ok(n.clone()),
                            other => Err(crate::schema::type_error("number", other)),
                        }
                    })?,
                )?;
                Ok(Some(Self::LinearGradient {
                    start,
                    end,
                    angle_deg: angle,
                }))
            }
            other => Err(ValidationError::new(
                path,
                format!(
                    "Expected type string,object,null but found type {}",
                    type_name(other)
                ),
            )),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Color(c) => Value::String(c.clone()),
            Self::LinearGradient {
                start,
                end,
                angle_deg,
            } => serde_json::json!({
                "type": "linear-gradient", "start": start, "end": end, "angle_deg": angle_deg
            }),
        }
    }
}

/// The branding colours. For each member: `None` = not set, `Some(None)` = set to `null`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrandingColors {
    /// The colour of primary elements.
    pub primary: Option<Option<String>>,
    /// The page background.
    pub page_background: Option<Option<PageBackground>>,
}

/// The branding font. `None` = not set, `Some(None)` = set to `null`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrandingFont {
    /// The font file's `https` URL.
    pub url: Option<Option<String>>,
}

/// A tenant's branding settings, as stored and answered. Every member is optional; a member that
/// was set to `null` is kept (and answered) as `null`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrandingSettings {
    /// The colours.
    pub colors: Option<BrandingColors>,
    /// The favicon's `https` URL.
    pub favicon_url: Option<Option<String>>,
    /// The logo's `https` URL.
    pub logo_url: Option<Option<String>>,
    /// The font.
    pub font: Option<BrandingFont>,
}

/// A validated `PATCH /branding` body: a non-empty subset of the settings, merged member-wise
/// into the stored settings with [`BrandingSettings::apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct BrandingPatch {
    changes: BrandingSettings,
}

const SETTINGS: ObjectSchema<'static> = ObjectSchema {
    allowed: &["colors", "favicon_url", "logo_url", "font"],
    required: &[],
    min_properties: 0,
};

const COLORS: ObjectSchema<'static> = ObjectSchema {
    allowed: &["primary", "page_background"],
    required: &[],
    min_properties: 0,
};

const FONT: ObjectSchema<'static> = ObjectSchema {
    allowed: &["url"],
    required: &[],
    min_properties: 0,
};

impl BrandingSettings {
    /// Validates stored settings (the form [`BrandingSettings::to_json`] gives; may be `{}`).
    pub fn from_json(value: &Value) -> Result<Self, ValidationError> {
        settings_from_json(value, 0)
    }

    /// The settings as JSON; members never set are absent, members set to `null` are `null`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(colors) = &self.colors {
            let mut c = Map::new();
            if let Some(primary) = &colors.primary {
                c.insert("primary".into(), opt_string(primary));
            }
            if let Some(bg) = &colors.page_background {
                let v = bg.as_ref().map_or(Value::Null, PageBackground::to_json);
                c.insert("page_background".into(), v);
            }
            out.insert("colors".into(), Value::Object(c));
        }
        if let Some(url) = &self.favicon_url {
            out.insert("favicon_url".into(), opt_string(url));
        }
        if let Some(url) = &self.logo_url {
            out.insert("logo_url".into(), opt_string(url));
        }
        if let Some(font) = &self.font {
            let mut f = Map::new();
            if let Some(url) = &font.url {
                f.insert("url".into(), opt_string(url));
            }
            out.insert("font".into(), Value::Object(f));
        }
        Value::Object(out)
    }

    /// These settings with `patch` merged in: members the patch sets replace the stored ones
    /// (`null` included); `colors` and `font` are merged member by member; a gradient replaces
    /// the whole background.
    pub fn apply(&self, patch: &BrandingPatch) -> BrandingSettings {
        let p = &patch.changes;
        let colors = match (&self.colors, &p.colors) {
            (old, None) => old.clone(),
            (None, Some(new)) => Some(new.clone()),
            (Some(old), Some(new)) => Some(BrandingColors {
                primary: new.primary.clone().or_else(|| old.primary.clone()),
                page_background: new
                    .page_background
                    .clone()
                    .or_else(|| old.page_background.clone()),
            }),
        };
        let font = match (&self.font, &p.font) {
            (old, None) => old.clone(),
            (None, Some(new)) => Some(new.clone()),
            (Some(old), Some(new)) => Some(BrandingFont {
                url: new.url.clone().or_else(|| old.url.clone()),
            }),
        };
        BrandingSettings {
            colors,
            favicon_url: p.favicon_url.clone().or_else(|| self.favicon_url.clone()),
            logo_url: p.logo_url.clone().or_else(|| self.logo_url.clone()),
            font,
        }
    }
}

impl BrandingPatch {
    /// Validates a `PATCH /branding` body: an object with at least one of `colors`,
    /// `favicon_url`, `logo_url`, `font`; URLs are `https` URIs or `null`; colours are `#` and
    /// 3, 4, 6 or 8 hex digits (or `null`); `colors.page_background` may also be a
    /// `linear-gradient` object. Unknown properties are refused at every level.
    pub fn from_json(body: &Value) -> Result<Self, ValidationError> {
        settings_from_json(body, 1).map(|changes| Self { changes })
    }

    /// The changes as JSON (only the members the patch sets).
    pub fn to_json(&self) -> Value {
        self.changes.to_json()
    }
}

fn opt_string(value: &Option<String>) -> Value {
    value.clone().map_or(Value::Null, Value::String)
}

fn settings_from_json(
    value: &Value,
    min_properties: usize,
) -> Result<BrandingSettings, ValidationError> {
    let schema = ObjectSchema {
        min_properties,
        ..SETTINGS
    };
    let o = ObjectReader::new(value, "", &schema)?;
    let colors = match o.object("colors", &COLORS)? {
        None => None,
        Some(c) => Some(BrandingColors {
            primary: member(&c, "primary", check_color_or_null)?,
            page_background: match c.get("page_background") {
                None => None,
                Some(v) => Some(PageBackground::from_json(v, &c.path_of("page_background"))?),
            },
        }),
    };
    let favicon_url = member(&o, "favicon_url", check_https_uri_or_null)?;
    let logo_url = member(&o, "logo_url", check_https_uri_or_null)?;
    let font = match o.object("font", &FONT)? {
        None => None,
        Some(f) => Some(BrandingFont {
            url: member(&f, "url", check_https_uri_or_null)?,
        }),
    };
    Ok(BrandingSettings {
        colors,
        favicon_url,
        logo_url,
        font,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(body: Value) -> String {
        BrandingPatch::from_json(&body).unwrap_err().to_string()
    }

    #[test]
    fn colors_and_uris() {
        for ok in ["#fff", "#FFFF", "#a1b2c3", "#a1b2c3d4"] {
            assert!(check_color(&json!(ok)).is_ok(), "{ok}");
        }
        for bad in ["fff", "#ff", "#fffff", "#ggg", "#a1b2c3d", "", "#"] {
            assert_eq!(
                check_color(&json!(bad)).unwrap_err(),
                format!("Object didn't pass validation for format html-color: {bad}")
            );
        }
        for ok in [
            "https://example.com/logo.png",
            "HTTPS://cdn.example.com",
            "https://u@h:443/x",
            "https://bücher.example/lögo.png",
        ] {
            assert!(check_https_uri(&json!(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.com",
            // The eighth byte inside a character: refused, never a panic.
            "https:/é",
            "https:/é/logo.png",
            "https:/😀",
            "HTTPS:/ü.example",
            "é",
            "https://",
            "https:///x",
            "https://a b",
            "ftp://x",
            "//x",
            "https://:80/",
        ] {
            assert!(check_https_uri(&json!(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn patch_validation() {
        assert_eq!(
            err(json!({})),
            "Payload validation error: 'Too few properties defined (0), minimum 1'."
        );
        assert_eq!(
            err(json!({"colour": "#fff"})),
            "Payload validation error: 'Additional properties not allowed: colour'."
        );
        assert_eq!(
            err(json!({"colors": {"primary": "red"}})),
            "Payload validation error: 'Object didn't pass validation for format html-color: red' on property colors.primary."
        );
        assert_eq!(
            err(json!({"colors": {"page_background": {"type": "radial-gradient", "start": "#000", "end": "#fff", "angle_deg": 3}}})),
            "Payload validation error: 'No enum match for: \"radial-gradient\"' on property colors.page_background.type."
        );
        assert_eq!(
            err(json!({"colors": {"page_background": {"type": "linear-gradient", "start": "#000", "end": "#fff"}}})),
            "Payload validation error: 'Missing required property: angle_deg' on property colors.page_background."
        );
        assert_eq!(
            err(json!({"colors": {"page_background": {"type": "linear-gradient", "start": "#000", "end": "#fff", "angle_deg": "9"}}})),
            "Payload validation error: 'Expected type number but found type string' on property colors.page_background.angle_deg."
        );
        assert_eq!(
            err(json!({"logo_url": "http://x.example"})),
            "Payload validation error: 'Object didn't pass validation for format strict-https-uri-or-null: http://x.example' on property logo_url."
        );
        assert_eq!(
            err(json!({"font": {"url": 3}})),
            "Payload validation error: 'Expected type string,null but found type integer' on property font.url."
        );
        assert_eq!(
            err(json!({"font": {"size": 3}})),
            "Payload validation error: 'Additional properties not allowed: size' on property font."
        );
    }

    #[test]
    fn merge_is_member_wise() {
        let stored = BrandingSettings::default().apply(
            &BrandingPatch::from_json(&json!({
                "colors": {"primary": "#111", "page_background": "#222"},
                "logo_url": "https://example.com/a.png",
                "font": {"url": "https://example.com/f.woff"}
            }))
            .unwrap(),
        );
        let patch = BrandingPatch::from_json(&json!({
            "colors": {"page_background": {"type": "linear-gradient", "start": "#000", "end": "#fff", "angle_deg": 37.5}},
            "logo_url": null,
            "favicon_url": "https://example.com/f.ico"
        }))
        .unwrap();
        let merged = stored.apply(&patch);
        let expected = json!({
            "colors": {"primary": "#111", "page_background": {"type": "linear-gradient", "start": "#000", "end": "#fff", "angle_deg": 37.5}},
            "favicon_url": "https://example.com/f.ico",
            "logo_url": null,
            "font": {"url": "https://example.com/f.woff"}
        });
        assert_eq!(merged.to_json(), expected);
        assert_eq!(BrandingSettings::from_json(&expected).unwrap(), merged);
        assert_eq!(
            BrandingSettings::from_json(&json!({})).unwrap(),
            BrandingSettings::default()
        );
    }
}
