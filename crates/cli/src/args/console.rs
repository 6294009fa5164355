//! The console's flags of `netacl serve`: how its sessions are bounded, and how it knows that a
//! browser reached it over HTTPS through a TLS-terminating proxy (`--public-url`,
//! `--trusted-proxy`), which makes the session cookie `Secure`. The same `--trusted-proxy` peers
//! are not counted per client by the admin API's listener
//! ([`ServeListenerArgs`](crate::args::listener::ServeListenerArgs)).
use anyhow::Context as _;
use netacl_server::{
    ConsoleSessionLimits, ServerConfig, DEFAULT_CONSOLE_SESSIONS,
    DEFAULT_CONSOLE_SESSIONS_PER_CLIENT, DEFAULT_CONSOLE_SESSIONS_PER_TENANT,
};

/// The console's flags (flattened into `netacl serve`'s arguments).
#[derive(clap::Args, Debug, Clone)]
pub struct ConsoleArgs {
    /// Console sessions one client of a tenant holds at most: its next sign-in replaces its
    /// oldest session.
    #[arg(long, env = "NETACL_CONSOLE_SESSIONS_PER_CLIENT", value_name = "N",
          default_value_t = DEFAULT_CONSOLE_SESSIONS_PER_CLIENT)]
    console_sessions_per_client: usize,
    /// Console sessions one tenant holds at most: a sign-in beyond replaces the tenant's oldest
    /// session (at least --console-sessions-per-client).
    #[arg(long, env = "NETACL_CONSOLE_SESSIONS_PER_TENANT", value_name = "N",
          default_value_t = DEFAULT_CONSOLE_SESSIONS_PER_TENANT)]
    console_sessions_per_tenant: usize,
    /// Console sessions the process holds at most, every tenant's (more than
    /// --console-sessions-per-tenant: no tenant fills them alone); when full, a sign-in
    /// replaces the oldest session of the tenant holding the most.
    #[arg(long, env = "NETACL_CONSOLE_SESSIONS", value_name = "N",
          default_value_t = DEFAULT_CONSOLE_SESSIONS)]
    console_sessions: usize,
    /// The URL browsers and clients reach the admin API at when a proxy is in front
    /// (https://admin.example.com): with https://, the console's session cookie is Secure
    /// whatever reaches this process.
    #[arg(long, env = "NETACL_PUBLIC_URL", value_name = "URL", value_parser = parse_public_url)]
    public_url: Option<http::Uri>,
    /// A reverse proxy in front of the admin API (an address or a CIDR; repeatable,
    /// comma-separated in the variable) whose `X-Forwarded-Proto: https` makes the console's
    /// session cookie Secure (the header from any other peer is ignored), and whose
    /// connections are not counted against --max-connections-per-client.
    #[arg(
        long = "trusted-proxy",
        env = "NETACL_TRUSTED_PROXIES",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    trusted_proxy: Vec<String>,
}

/// An absolute `http://` or `https://` URL with a host.
fn parse_public_url(value: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = value
        .parse()
        .map_err(|err| format!("not a URL ({err}): expected https://HOST[:PORT]"))?;
    let scheme = uri.scheme_str().unwrap_or_default();
    if !matches!(scheme, "http" | "https") || uri.host().is_none_or(str::is_empty) {
        return Err("expected an absolute URL: https://HOST[:PORT] or http://HOST[:PORT]".into());
    }
    Ok(uri)
}

impl ConsoleArgs {
    /// `--trusted-proxy`: the reverse proxies in front of the admin API, whose forwarding
    /// headers are believed and whose connections the listener does not count per client.
    pub fn trusted_proxies(&self) -> anyhow::Result<netacl_model::TrustedProxies> {
        netacl_model::TrustedProxies::parse(&self.trusted_proxy).context("invalid --trusted-proxy")
    }

    /// `config` with these settings; an error names the flags that do not fit together.
    pub fn apply(&self, mut config: ServerConfig) -> anyhow::Result<ServerConfig> {
        let limits = ConsoleSessionLimits::new(
            self.console_sessions_per_client,
            self.console_sessions_per_tenant,
            self.console_sessions,
        )
        .context(
            "invalid --console-sessions-per-client, --console-sessions-per-tenant or \
             --console-sessions",
        )?;
        config = config
            .with_console_sessions(limits)
            .with_trusted_proxies(self.trusted_proxies()?);
        if let Some(url) = &self.public_url {
            config = config.with_public_url(url.clone());
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_public_url;

    #[test]
    fn the_public_url_is_an_absolute_http_url() {
        for ok in [
            "https://admin.example.com",
            "http://127.0.0.1:8080/",
            "https://a.test:8443",
        ] {
            assert!(parse_public_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "admin.example.com",
            "/console",
            "ftp://a.test",
            "https://",
            "not a url",
        ] {
            assert!(parse_public_url(bad).is_err(), "{bad}");
        }
    }
}
