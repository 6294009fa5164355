//! `--geoip-city` / `--geoip-asn` of `netacl eval` and `netacl bench`: the databases compiled
//! into the policy's geo intervals, as the edge does.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use netacl_edge::geo::GeoEnricher;
use netacl_eval::CompiledPolicy;

/// `policy` with the intervals compiled from the databases (unchanged when none is given).
///
/// # Errors
///
/// A database that cannot be loaded (named), or whose networks cannot be walked.
pub fn enrich(
    policy: CompiledPolicy,
    city: Option<&Path>,
    asn: Option<&Path>,
) -> anyhow::Result<CompiledPolicy> {
    if city.is_none() && asn.is_none() {
        return Ok(policy);
    }
    let enricher = GeoEnricher::open(city, asn).context("cannot load the GeoIP databases")?;
    let compiled = enricher
        .intervals(&policy.geo_values())
        .context("cannot compile the GeoIP databases")?;
    Ok(policy.with_geo(Arc::new(compiled.intervals)))
}
