//! Posting lists: for one signal value, which rules it concerns.
//!
//! A posting holds five sorted lists of rule ordinals, stored back to back in one arena:
//! the rules *anchored* on this signal whose `match` lists the value, one list per request
//! scope (a candidate generator per scope: rules of other scopes never cost a step), the other
//! rules whose `match` lists the value (checked by membership), and the rules whose `not_match`
//! lists it.

/// The number of request scopes (management, authentication, dynamic client registration).
pub(crate) const REQUEST_SCOPES: usize = 3;

const LISTS: usize = REQUEST_SCOPES + 2;
const MEMBERS: usize = REQUEST_SCOPES;
const EXCLUDED: usize = REQUEST_SCOPES + 1;
/// The list code of members in [`Postings::add_sorted`].
pub(crate) const MEMBERS_LIST: u8 = MEMBERS as u8;
/// The list code of excluded rules in [`Postings::add_sorted`].
pub(crate) const EXCLUDED_LIST: u8 = EXCLUDED as u8;

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
    /// per request scope, 3: members, 4: excluded; duplicates are dropped) and returns its id.
    pub(crate) fn add_sorted(&mut self, items: impl IntoIterator<Item = (u8, u32)>) -> u32 {
        let mut bounds = [self.arena.len() as u32; LISTS + 1];
        let mut last: Option<(u8, u32)> = None;
        for (list, rule) in items {
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

    #[inline]
    fn list(&self, posting: u32, which: usize) -> &[u32] {
        let b = &self.bounds[posting as usize];
        &self.arena[b[which] as usize..b[which + 1] as usize]
    }

    /// Rules anchored on this value's signal, of a scope covering request scope `scope`.
    #[inline]
    pub(crate) fn anchors(&self, posting: u32, scope: usize) -> &[u32] {
        self.list(posting, scope)
    }

    /// Rules (not anchored on this signal) whose `match` lists the value.
    #[inline]
    pub(crate) fn members(&self, posting: u32) -> &[u32] {
        self.list(posting, MEMBERS)
    }

    /// Rules whose `not_match` lists the value.
    #[inline]
    pub(crate) fn excluded(&self, posting: u32) -> &[u32] {
        self.list(posting, EXCLUDED)
    }

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

/// Advances `*pos` over `list` to the first item `>= target` (galloping, so a walk over
/// increasing targets costs O(log gap) a step) and tells whether that item is `target`.
#[inline]
pub(crate) fn seek(list: &[u32], pos: &mut usize, target: u32) -> bool {
    let mut lo = *pos;
    if lo >= list.len() {
        return false;
    }
    if list[lo] >= target {
        return list[lo] == target;
    }
    // list[lo] < target: gallop.
    let mut step = 1;
    let mut hi = lo + 1;
    while hi < list.len() && list[hi] < target {
        lo = hi;
        step *= 2;
        hi = lo + step;
    }
    let hi = hi.min(list.len());
    // list[lo] < target; the answer lies in (lo, hi].
    let at = lo + 1 + list[lo + 1..hi].partition_point(|&x| x < target);
    *pos = at;
    at < list.len() && list[at] == target
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_keep_lists_apart_and_unique() {
        let mut postings = Postings::default();
        let a = postings.add_sorted([(0, 1), (0, 3), (0, 3), (2, 2), (3, 4), (3, 9)]);
        let b = postings.add_sorted([(4, 7)]);
        assert_eq!(postings.anchors(a, 0), &[1, 3]);
        assert_eq!(postings.anchors(a, 1), &[] as &[u32]);
        assert_eq!(postings.anchors(a, 2), &[2]);
        assert_eq!(postings.members(a), &[4, 9]);
        assert_eq!(postings.excluded(a), &[] as &[u32]);
        assert_eq!(postings.excluded(b), &[7]);
        assert_eq!(postings.members(b), &[] as &[u32]);
        assert_eq!(postings.len(), 2);
    }

    #[test]
    fn seek_agrees_with_binary_search_over_increasing_targets() {
        let list: Vec<u32> = (0..500u32).map(|i| i * 3 + (i % 7)).collect();
        let mut list = list;
        list.sort_unstable();
        list.dedup();
        for stride in [1u32, 2, 5, 17, 400] {
            let mut pos = 0;
            let mut target = 0;
            while target < 1600 {
                assert_eq!(
                    seek(&list, &mut pos, target),
                    list.binary_search(&target).is_ok(),
                    "target {target} stride {stride}"
                );
                target += stride;
            }
        }
        let mut pos = 0;
        assert!(!seek(&[], &mut pos, 1));
    }
}
