use crate::{Criteria, RuleScope};

/// What a matching rule does (`rule.action`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Refuse the request.
    Block,
    /// Let the request through and stop evaluating.
    Allow,
    /// Monitoring mode: record the match, enforce nothing, keep evaluating.
    Log,
    /// Send the client elsewhere.
    Redirect {
        /// Absolute URI, 1..2000 characters.
        redirect_uri: String,
    },
}

impl Action {
    /// The wire name of the action (`block`, `allow`, `log`, `redirect`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Block => "block",
            Action::Allow => "allow",
            Action::Log => "log",
            Action::Redirect { .. } => "redirect",
        }
    }

    /// Whether a match ends evaluation (everything but `log`).
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Action::Log)
    }
}

/// A validated `rule`: an action, a scope, and either `match_all: true` or at least one of
/// `match` / `not_match`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub(crate) action: Action,
    pub(crate) scope: RuleScope,
    pub(crate) match_all: bool,
    pub(crate) match_criteria: Option<Criteria>,
    pub(crate) not_match: Option<Criteria>,
}

impl Rule {
    /// The action taken when the rule matches.
    pub fn action(&self) -> &Action {
        &self.action
    }

    /// Which requests the rule applies to.
    pub fn scope(&self) -> RuleScope {
        self.scope
    }

    /// `rule.match_all`: the rule matches every request of its scope (it then has neither
    /// `match` nor `not_match`).
    pub fn match_all(&self) -> bool {
        self.match_all
    }

    /// `rule.match`: every named signal must match.
    pub fn match_criteria(&self) -> Option<&Criteria> {
        self.match_criteria.as_ref()
    }

    /// `rule.not_match`: no named signal may match.
    pub fn not_match(&self) -> Option<&Criteria> {
        self.not_match.as_ref()
    }

    /// Both halves the rule has, `match` then `not_match`: what a walk over every signal or
    /// list a rule names reads.
    pub fn criteria(&self) -> impl Iterator<Item = &Criteria> {
        self.match_criteria.iter().chain(&self.not_match)
    }
}
