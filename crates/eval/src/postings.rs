//! Posting lists: for one signal value, which rules it concerns.
//!
//! A posting holds five sorted lists of rule ordinals, stored back to back in one arena:
//! the rules *anchored* on this signal whose `match` lists the value, one list per request
//! scope (a candidate generator per scope: rules of other scopes never cost a step), the other
//! rules whose `match` lists the value (checked by membership), and the rules whose `not_match`
//! lists it.
//!
//! Most values concern a single rule in a single role (a CIDR of one block list, one rule's
//! ASN). Such a posting is not stored at all: its *reference* (the `u32` the indexes hold)
//! carries the rule ordinal, the role and, for anchors, the request scopes inline, so a lookup
//! that hits it touches no posting memory.

/// The number of request scopes (management, authentication, dynamic client registration).
pub(crate) const REQUEST_SCOPES: usize = 3;

const LISTS: usize = REQUEST_SCOPES + 2;
const MEMBERS: usize = REQUEST_SCOPES;
const EXCLUDED: usize = REQUEST_SCOPES + 1;
/// The list code of members in [`Postings::add_sorted`].
pub(crate) const MEMBERS_LIST: u8 = MEMBERS as u8;
/// The list code of excluded rules in [`Postings::add_sorted`].
pub(crate) const EXCLUDED_LIST: u8 = EXCLUDED as u8;

/// No rule: an empty stream's head, above every ordinal.
pub(crate) const NO_RULE: u32 = u32::MAX;

/// A reference with this bit is an inline single-rule posting.
const INLINE: u32 = 1 << 31;
const KIND_SHIFT: u32 = 29;
const KIND_ANCHOR: u32 = 0;
const KIND_MEMBER: u32 = 1;
const KIND_EXCLUDED: u32 = 2;
const MASK_SHIFT: u32 = 26;
/// Ordinals below this fit an inline reference.
pub(crate) const INLINE_ORDINALS: u32 = 1 << 25;
const ORDINAL: u32 = INLINE_ORDINALS - 1;

/// Every posting list of a policy.
#[derive(Debug, Clone, Default)]
pub(crate) struct Postings {
    arena: Vec<u32>,
    /// Per posting: where each of its lists ends in the arena; list `i` starts where list
    /// `i - 1` ends (list 0 where the previous posting's last list ends).
    bounds: Vec<[u32; LISTS + 1]>,
}

impl Postings {
    /// Stores a posting from `(list, rule)` pairs sorted by list then rule (list 0..3: anchors
    /// per request scope, 3: members, 4: excluded; duplicates are dropped) and returns its
    /// reference (inline when it concerns one rule in one role).
    pub(crate) fn add_sorted(&mut self, items: &[(u8, u32)]) -> u32 {
        let first = items.first().copied();
        if let Some((_, rule)) = first {
            let one_rule = items.iter().all(|&(_, r)| r == rule);
            let lists = items
                .iter()
                .fold(0u32, |mask, &(list, _)| mask | (1 << list));
            if one_rule && rule < INLINE_ORDINALS {
                let kind = match lists {
                    1..=0b111 => Some((KIND_ANCHOR, lists)),
                    m if m == 1 << MEMBERS => Some((KIND_MEMBER, 0)),
                    m if m == 1 << EXCLUDED => Some((KIND_EXCLUDED, 0)),
                    _ => None,
                };
                if let Some((kind, scopes)) = kind {
                    return INLINE | (kind << KIND_SHIFT) | (scopes << MASK_SHIFT) | rule;
                }
            }
        }
        let mut bounds = [self.arena.len() as u32; LISTS + 1];
        let mut last: Option<(u8, u32)> = None;
        for &(list, rule) in items {
            if last == Some((list, rule)) {
                continue;
            }
            last = Some((list, rule));
            self.arena.push(rule);
            // Every list from `list` on ends at least here.
            for bound in &mut bounds[usize::from(list) + 1..] {
                *bound = self.arena.len() as u32;
            }
        }
        self.bounds.push(bounds);
        (self.bounds.len() - 1) as u32
    }

    #[inline(always)]
    fn list(&self, posting: u32, which: usize) -> &[u32] {
        let b = &self.bounds[posting as usize];
        &self.arena[b[which] as usize..b[which + 1] as usize]
    }

    /// The ordinal an inline reference carries (the caller keeps it somewhere to borrow from).
    #[cfg(test)]
    pub(crate) fn inline_rule(reference: u32) -> u32 {
        reference & ORDINAL
    }

    /// The rules anchored on the posting `reference` for request scope `scope`, in order, as
    /// the first one ([`NO_RULE`] when there is none) and the others. An inline posting
    /// answers from the reference alone.
    #[inline(always)]
    pub(crate) fn anchor_stream(&self, reference: u32, scope: usize) -> (u32, &[u32]) {
        if reference & INLINE == 0 {
            return match self.list(reference, scope).split_first() {
                Some((&head, rest)) => (head, rest),
                None => (NO_RULE, &[]),
            };
        }
        if (reference >> KIND_SHIFT) & 0b11 == KIND_ANCHOR
            && (reference >> MASK_SHIFT) & (1 << scope) != 0
        {
            (reference & ORDINAL, &[])
        } else {
            (NO_RULE, &[])
        }
    }

    /// Whether `rule` lists the value of the posting `reference` in a `match` it is not
    /// anchored on.
    #[inline(always)]
    pub(crate) fn is_member(&self, reference: u32, rule: u32) -> bool {
        self.in_list(reference, KIND_MEMBER, MEMBERS, rule)
    }

    /// Whether `rule` lists the value of the posting `reference` in its `not_match`.
    #[inline(always)]
    pub(crate) fn is_excluded(&self, reference: u32, rule: u32) -> bool {
        self.in_list(reference, KIND_EXCLUDED, EXCLUDED, rule)
    }

    #[inline(always)]
    fn in_list(&self, reference: u32, inline_kind: u32, which: usize, rule: u32) -> bool {
        if reference & INLINE != 0 {
            return (reference >> KIND_SHIFT) & 0b11 == inline_kind && reference & ORDINAL == rule;
        }
        crate::search::contains_sorted(self.list(reference, which), rule)
    }

    /// The lists of the posting `reference` for request scope `scope`: anchors, members,
    /// excluded. `single` must hold `inline_rule(reference)`.
    #[cfg(test)]
    pub(crate) fn lists<'a>(
        &'a self,
        reference: u32,
        single: &'a u32,
        scope: usize,
    ) -> (&'a [u32], &'a [u32], &'a [u32]) {
        const NOTHING: &[u32] = &[];
        if reference & INLINE == 0 {
            return (
                self.list(reference, scope),
                self.list(reference, MEMBERS),
                self.list(reference, EXCLUDED),
            );
        }
        let one = std::slice::from_ref(single);
        match (reference >> KIND_SHIFT) & 0b11 {
            KIND_ANCHOR if (reference >> MASK_SHIFT) & (1 << scope) != 0 => (one, NOTHING, NOTHING),
            KIND_MEMBER => (NOTHING, one, NOTHING),
            KIND_EXCLUDED => (NOTHING, NOTHING, one),
            _ => (NOTHING, NOTHING, NOTHING),
        }
    }

    /// Postings stored (inline ones are not).
    pub(crate) fn len(&self) -> usize {
        self.bounds.len()
    }

    pub(crate) fn shrink(&mut self) {
        self.arena.shrink_to_fit();
        self.bounds.shrink_to_fit();
    }

    pub(crate) fn bytes(&self) -> usize {
        self.arena.capacity() * 4 + self.bounds.capacity() * std::mem::size_of::<[u32; LISTS + 1]>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_keep_lists_apart_and_unique() {
        let mut postings = Postings::default();
        let a = postings.add_sorted(&[(0, 1), (0, 3), (0, 3), (2, 2), (3, 4), (3, 9)]);
        let b = postings.add_sorted(&[(4, 7), (4, 8)]);
        let none: &[u32] = &[];
        let single = 0;
        assert_eq!(
            postings.lists(a, &single, 0),
            (&[1, 3][..], &[4, 9][..], none)
        );
        assert_eq!(postings.lists(a, &single, 1), (none, &[4, 9][..], none));
        assert_eq!(postings.lists(a, &single, 2), (&[2][..], &[4, 9][..], none));
        assert_eq!(postings.lists(b, &single, 0), (none, none, &[7, 8][..]));
        assert_eq!(postings.len(), 2);
    }

    #[test]
    fn single_rule_postings_are_inline() {
        let mut postings = Postings::default();
        let tenant_anchor = postings.add_sorted(&[(0, 5), (1, 5), (2, 5)]);
        let management_anchor = postings.add_sorted(&[(0, 6)]);
        let member = postings.add_sorted(&[(3, 7), (3, 7)]);
        let excluded = postings.add_sorted(&[(4, 8)]);
        let both = postings.add_sorted(&[(0, 9), (4, 9)]);
        assert_eq!(postings.len(), 1, "only the mixed posting is stored");
        let none: &[u32] = &[];
        let lists = |r: u32, scope: usize| {
            let single = Postings::inline_rule(r);
            let (a, m, e) = postings.lists(r, &single, scope);
            (a.to_vec(), m.to_vec(), e.to_vec())
        };
        for scope in 0..3 {
            assert_eq!(lists(tenant_anchor, scope), (vec![5], vec![], vec![]));
        }
        assert_eq!(lists(management_anchor, 0), (vec![6], vec![], vec![]));
        assert_eq!(lists(management_anchor, 1), (vec![], vec![], vec![]));
        assert_eq!(lists(member, 2), (vec![], vec![7], vec![]));
        assert_eq!(lists(excluded, 1), (vec![], vec![], vec![8]));
        let single = 0;
        assert_eq!(postings.lists(both, &single, 0), (&[9][..], none, &[9][..]));
    }

    #[test]
    fn membership_agrees_with_the_lists() {
        let mut postings = Postings::default();
        let long: Vec<(u8, u32)> = (0..20).map(|r| (3, r * 3)).collect();
        let refs = [
            postings.add_sorted(&[(0, 1), (0, 3), (2, 2), (3, 4), (3, 9), (4, 7)]),
            postings.add_sorted(&long),
            postings.add_sorted(&[(0, 5), (1, 5)]),
            postings.add_sorted(&[(3, 6)]),
            postings.add_sorted(&[(4, 8)]),
        ];
        for &r in &refs {
            let single = Postings::inline_rule(r);
            for scope in 0..REQUEST_SCOPES {
                let (anchors, members, excluded) = postings.lists(r, &single, scope);
                let (head, rest) = postings.anchor_stream(r, scope);
                let stream: Vec<u32> = std::iter::once(head)
                    .filter(|&h| h != NO_RULE)
                    .chain(rest.iter().copied())
                    .collect();
                assert_eq!(stream, anchors);
                for rule in 0..70 {
                    assert_eq!(postings.is_member(r, rule), members.contains(&rule));
                    assert_eq!(postings.is_excluded(r, rule), excluded.contains(&rule));
                }
            }
        }
    }
}
