use std::fmt;

/// Which requests a rule applies to (`rule.scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleScope {
    /// Every request.
    Tenant,
    /// The management API (`/api/v2/...`, `/scim/...`).
    Management,
    /// Every request that is neither management nor dynamic client registration.
    Authentication,
    /// `/oidc/register`.
    DynamicClientRegistration,
}

impl RuleScope {
    /// All scopes, in wire order.
    pub const ALL: [RuleScope; 4] = [
        RuleScope::Tenant,
        RuleScope::Management,
        RuleScope::Authentication,
        RuleScope::DynamicClientRegistration,
    ];

    /// The wire name (`tenant`, `management`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleScope::Tenant => "tenant",
            RuleScope::Management => "management",
            RuleScope::Authentication => "authentication",
            RuleScope::DynamicClientRegistration => "dynamic_client_registration",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == s)
    }

    /// Whether a rule of this scope is considered for a request of `request` scope.
    pub fn covers(self, request: RequestScope) -> bool {
        match self {
            RuleScope::Tenant => true,
            RuleScope::Management => request == RequestScope::Management,
            RuleScope::Authentication => request == RequestScope::Authentication,
            RuleScope::DynamicClientRegistration => {
                request == RequestScope::DynamicClientRegistration
            }
        }
    }
}

impl fmt::Display for RuleScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of request is being evaluated; derived from the request path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RequestScope {
    /// The management API (`/api/v2`, `/api/v2/...`, `/scim`, `/scim/...`).
    Management,
    /// Anything else (login pages, `/authorize`, `/oauth/token`, ...).
    #[default]
    Authentication,
    /// Dynamic client registration (`/oidc/register`).
    DynamicClientRegistration,
}

impl RequestScope {
    /// All request scopes.
    pub const ALL: [RequestScope; 3] = [
        RequestScope::Management,
        RequestScope::Authentication,
        RequestScope::DynamicClientRegistration,
    ];

    /// The wire name (`management`, `authentication`, `dynamic_client_registration`).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestScope::Management => "management",
            RequestScope::Authentication => "authentication",
            RequestScope::DynamicClientRegistration => "dynamic_client_registration",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == s)
    }

    /// The scope of a request for `path`, a path already in normal form (see
    /// [`normalize_path`](crate::normalize_path); [`scope_of_path`](crate::scope_of_path) takes a
    /// path as received). A query is ignored. Segments are compared without case and empty
    /// segments are skipped, as many servers route them (`//API/v2` is `/api/v2` to them):
    /// `/api/v2` and `/scim` and below are `management`, exactly `/oidc/register` (a trailing `/`
    /// allowed) is `dynamic_client_registration`, anything else `authentication`.
    ///
    /// ```
    /// use netacl_model::RequestScope;
    /// assert_eq!(RequestScope::from_path("/api/v2/users"), RequestScope::Management);
    /// assert_eq!(RequestScope::from_path("/scim/v2/Users"), RequestScope::Management);
    /// assert_eq!(RequestScope::from_path("//API/V2"), RequestScope::Management);
    /// assert_eq!(RequestScope::from_path("/oidc/register"), RequestScope::DynamicClientRegistration);
    /// assert_eq!(RequestScope::from_path("/api/v2x"), RequestScope::Authentication);
    /// assert_eq!(RequestScope::from_path("/authorize"), RequestScope::Authentication);
    /// ```
    pub fn from_path(path: &str) -> Self {
        let path = path.split(['?', '#']).next().unwrap_or("");
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let is = |seg: Option<&str>, name: &str| seg.is_some_and(|s| s.eq_ignore_ascii_case(name));
        let first = segments.next();
        if is(first, "scim") {
            return RequestScope::Management;
        }
        let second = segments.next();
        if is(first, "api") && is(second, "v2") {
            RequestScope::Management
        } else if is(first, "oidc") && is(second, "register") && segments.next().is_none() {
            RequestScope::DynamicClientRegistration
        } else {
            RequestScope::Authentication
        }
    }
}

impl fmt::Display for RequestScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
