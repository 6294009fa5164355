//! The real-size MaxMind-format databases of the enrichment bench and of the `geo_load`
//! example: a City-like database of 1,050,000 networks (1,000,000 IPv4 /24s and 50,000 IPv6
//! /48s, 4,000 distinct location records shaped like GeoIP2 City records) and an ASN database
//! of 200,000 networks, written with `mmdb-writer`.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

use mmdb_writer::ipnet::{IpNet, Ipv4Net, Ipv6Net};
use mmdb_writer::{IpVersion, Value, Writer};

/// IPv4 networks of the City-like database.
pub const V4_NETWORKS: u32 = 1_000_000;
/// IPv6 networks of the City-like database.
pub const V6_NETWORKS: u32 = 50_000;
/// Networks of the ASN database.
pub const ASN_NETWORKS: u32 = 200_000;
const LOCATIONS: usize = 4_000;

const COUNTRIES: [(&str, &[&str]); 24] = [
    ("US", &["NY", "CA", "TX", "WA", "FL"]),
    ("GB", &["ENG", "SCT", "WLS"]),
    ("FR", &["75C", "IDF", "ARA"]),
    ("DE", &["BY", "BE", "HH"]),
    ("NL", &["NH", "ZH"]),
    ("SE", &["AB"]),
    ("ES", &["M", "B", "AN"]),
    ("IT", &["62", "25"]),
    ("PL", &["14"]),
    ("BR", &["SP", "RJ"]),
    ("AR", &["B"]),
    ("MX", &["CMX"]),
    ("CA", &["ON", "QC", "BC"]),
    ("JP", &["13", "27"]),
    ("KR", &["11"]),
    ("CN", &["BJ", "SH"]),
    ("IN", &["MH", "KA", "DL"]),
    ("SG", &[]),
    ("AU", &["NSW", "VIC"]),
    ("NZ", &["AUK"]),
    ("ZA", &["GP"]),
    ("NG", &["LA"]),
    ("RU", &["MOW"]),
    ("UA", &["30"]),
];

fn names(base: &str) -> Value {
    Value::map(
        ["de", "en", "es", "fr", "ja", "pt-BR", "ru", "zh-CN"]
            .iter()
            .map(|lang| (*lang, Value::String(format!("{base} ({lang})")))),
    )
}

/// A record shaped like a GeoIP2 City record.
fn location_record(index: usize) -> Value {
    let (country, subdivisions) = COUNTRIES[index % COUNTRIES.len()];
    let mut fields = vec![
        (
            "city",
            Value::map([
                ("geoname_id", Value::U32(100_000 + index as u32)),
                ("names", names(&format!("City {index}"))),
            ]),
        ),
        (
            "continent",
            Value::map([
                ("code", Value::from("XX")),
                ("geoname_id", Value::U32(6_255_148)),
                ("names", names("Continent")),
            ]),
        ),
        (
            "country",
            Value::map([
                (
                    "geoname_id",
                    Value::U32(1_000 + (index % COUNTRIES.len()) as u32),
                ),
                ("iso_code", Value::from(country)),
                ("names", names(country)),
            ]),
        ),
        (
            "location",
            Value::map([
                ("accuracy_radius", Value::U16(100)),
                ("latitude", Value::Double(index as f64 / 100.0)),
                ("longitude", Value::Double(-(index as f64) / 100.0)),
                ("time_zone", Value::from("Etc/UTC")),
            ]),
        ),
        (
            "registered_country",
            Value::map([
                ("geoname_id", Value::U32(1_000)),
                ("iso_code", Value::from(country)),
                ("names", names(country)),
            ]),
        ),
    ];
    if !subdivisions.is_empty() {
        let code = subdivisions[index / COUNTRIES.len() % subdivisions.len()];
        fields.push((
            "subdivisions",
            Value::array([Value::map([
                ("geoname_id", Value::U32(200_000 + index as u32)),
                ("iso_code", Value::from(code)),
                ("names", names(code)),
            ])]),
        ));
    }
    Value::map(fields)
}

/// The IPv4 networks: /24s spread over the space with gaps (one in three /24s from 1.0.0.0).
pub fn v4_network(i: u32) -> Ipv4Net {
    let base = (1u32 << 24) + i * 3 * 256;
    Ipv4Net::new(Ipv4Addr::from(base), 24).expect("valid prefix")
}

/// The IPv6 networks: /48s under `2a00::/16`.
pub fn v6_network(i: u32) -> Ipv6Net {
    let base = (0x2a00u128 << 112) | (u128::from(i) << 80);
    Ipv6Net::new(Ipv6Addr::from(base), 48).expect("valid prefix")
}

/// Writes `city.mmdb` and `asn.mmdb` into `dir` (a few seconds).
pub fn write_databases(dir: &Path) {
    let mut city = Writer::builder("NetACL-Bench-City")
        .ip_version(IpVersion::V6)
        .description(&[("en", "netacl bench database (benches/enrich.rs)")])
        .build();
    let records: Vec<Value> = (0..LOCATIONS).map(location_record).collect();
    for i in 0..V4_NETWORKS {
        let record = records[(i as usize * 7919) % LOCATIONS].clone();
        city.insert_value(IpNet::V4(v4_network(i)), record)
            .expect("insert");
    }
    for i in 0..V6_NETWORKS {
        let record = records[(i as usize * 104_729) % LOCATIONS].clone();
        city.insert_value(IpNet::V6(v6_network(i)), record)
            .expect("insert");
    }
    std::fs::write(dir.join("city.mmdb"), city.to_bytes().expect("write city"))
        .expect("write city");

    let mut asn = Writer::builder("NetACL-Bench-ASN")
        .ip_version(IpVersion::V6)
        .description(&[("en", "netacl bench database (benches/enrich.rs)")])
        .build();
    for i in 0..ASN_NETWORKS {
        // One ASN network per five city /24s, as a /22-ish block.
        let net = v4_network(i * 5);
        let record = Value::map([
            ("autonomous_system_number", Value::U32(1 + i % 400_000)),
            (
                "autonomous_system_organization",
                Value::String(format!("Example Network {}", i % 5_000)),
            ),
        ]);
        asn.insert_value(IpNet::V4(net), record).expect("insert");
    }
    std::fs::write(dir.join("asn.mmdb"), asn.to_bytes().expect("write asn")).expect("write asn");
}
