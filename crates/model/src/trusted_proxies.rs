//! The networks of the reverse proxies whose forwarding headers are believed (the edge's
//! `--trusted-proxy`, the admin API's `--trusted-proxy`): one parser and one membership test for
//! every component that reads a forwarding header.
use std::net::IpAddr;

use ipnet::{Ipv4Net, Ipv6Net};

/// An error in the trusted-proxy configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrustedProxyError {
    /// A `--trusted-proxy` value is neither an address nor a CIDR.
    #[error(
        "invalid trusted-proxy CIDR {value:?}: expected an address or a CIDR such as 10.0.0.0/8"
    )]
    InvalidCidr {
        /// The value as given.
        value: String,
    },
}

/// The networks whose forwarding headers are believed.
///
/// ```
/// use netacl_model::TrustedProxies;
///
/// let trusted = TrustedProxies::parse(["10.0.0.0/8", "2001:db8::1"]).unwrap();
/// assert!(trusted.contains("10.1.2.3".parse().unwrap()));
/// assert!(trusted.contains("::ffff:10.1.2.3".parse().unwrap()));
/// assert!(!trusted.contains("192.0.2.1".parse().unwrap()));
/// assert!(TrustedProxies::parse(["10.0.0.0/33"]).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    v4: Vec<Ipv4Net>,
    v6: Vec<Ipv6Net>,
}

impl TrustedProxies {
    /// No trusted proxies: the client address is always the peer.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses CIDRs or bare addresses (`10.0.0.0/8`, `192.0.2.7`, `2001:db8::/32`). An
    /// IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is taken as the IPv4 network it maps.
    pub fn parse<I, S>(values: I) -> Result<Self, TrustedProxyError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = Self::default();
        for value in values {
            let value = value.as_ref().trim();
            let invalid = || TrustedProxyError::InvalidCidr {
                value: value.to_owned(),
            };
            let net: ipnet::IpNet = match value.parse::<ipnet::IpNet>() {
                Ok(net) => net,
                Err(_) => value.parse::<IpAddr>().map_err(|_| invalid())?.into(),
            };
            out.push(net);
        }
        Ok(out)
    }

    /// Adds a network.
    pub fn push(&mut self, net: ipnet::IpNet) {
        match net {
            ipnet::IpNet::V4(n) => self.v4.push(n.trunc()),
            ipnet::IpNet::V6(n) => match mapped_v4_net(n) {
                Some(v4) => self.v4.push(v4),
                None => self.v6.push(n.trunc()),
            },
        }
    }

    /// Whether no network is trusted.
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Whether `ip` (an IPv4-mapped IPv6 address taken as the IPv4 address) lies inside a
    /// trusted network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.v4.iter().any(|n| n.contains(&a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(a) => self.v4.iter().any(|n| n.contains(&a)),
                None => self.v6.iter().any(|n| n.contains(&a)),
            },
        }
    }
}

fn mapped_v4_net(net: Ipv6Net) -> Option<Ipv4Net> {
    let v4 = net.network().to_ipv4_mapped()?;
    let prefix = net.prefix_len().checked_sub(96)?;
    Ipv4Net::new(v4, prefix).ok().map(|n| n.trunc())
}
