//! Which member should hold which slot: a pure function of the set of
//! member names, so every member computes the same answer from the same
//! view of the ring.
//!
//! Each slot prefers members by rendezvous (highest-random-weight)
//! hashing of `member/slot`; slots are handed out in order to the most
//! preferred member that still has room, each member taking at most
//! `ceil(SLOTS / members)`. The result is balanced to one slot, and a
//! member joining or leaving moves few slots beyond its own share.

use super::slots::{SLOTS, SlotSet, fnv1a_64};

/// The slots each of `members` should hold, in the order of `members`.
/// Duplicate names count once (the first gets the slots); no members
/// means no assignment.
pub fn assign(members: &[&str]) -> Vec<SlotSet> {
    let mut sorted: Vec<&str> = members.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = vec![SlotSet::empty(); members.len()];
    if sorted.is_empty() {
        return out;
    }
    let capacity = SLOTS.div_ceil(sorted.len());
    let mut counts = vec![0usize; sorted.len()];
    let mut by_sorted = vec![SlotSet::empty(); sorted.len()];
    let mut ranked: Vec<(u64, usize)> = Vec::with_capacity(sorted.len());
    let mut buf = String::new();
    for slot in 0..SLOTS {
        ranked.clear();
        for (i, name) in sorted.iter().enumerate() {
            buf.clear();
            buf.push_str(name);
            buf.push('/');
            buf.push_str(&slot.to_string());
            ranked.push((fnv1a_64(&buf), i));
        }
        // Highest weight first; names break ties (sorted index).
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        if let Some(&(_, winner)) = ranked.iter().find(|(_, i)| counts[*i] < capacity) {
            counts[winner] += 1;
            by_sorted[winner].insert(slot);
        }
    }
    for (i, name) in members.iter().enumerate() {
        if let Ok(pos) = sorted.binary_search(name)
            && members.iter().position(|m| m == name) == Some(i)
        {
            out[i] = by_sorted[pos];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_has_exactly_one_member_and_the_split_is_even() {
        let sets = assign(&["shard-a", "shard-b", "shard-c"]);
        let mut union = SlotSet::empty();
        for s in &sets {
            assert!(union.intersection(s).is_empty(), "overlap");
            union = union.union(s);
            assert!((340..=342).contains(&s.len()), "{}", s.len());
        }
        assert_eq!(union, SlotSet::full());
    }

    #[test]
    fn the_order_of_the_view_does_not_matter() {
        let a = assign(&["x", "y", "z"]);
        let b = assign(&["z", "x", "y"]);
        assert_eq!(a[0], b[1]);
        assert_eq!(a[1], b[2]);
        assert_eq!(a[2], b[0]);
    }

    #[test]
    fn a_member_joining_moves_little_more_than_its_share() {
        let before = assign(&["a", "b", "c"]);
        let after = assign(&["a", "b", "c", "d"]);
        let moved: usize = (0..3).map(|i| before[i].minus(&after[i]).len()).sum();
        // The newcomer's share is 256 slots; the cascade of capacities
        // moves some more, far from reshuffling everything.
        assert!((256..=420).contains(&moved), "{moved} slots moved");
    }

    #[test]
    fn no_members_and_duplicates() {
        assert!(assign(&[]).is_empty());
        let sets = assign(&["a", "a"]);
        assert_eq!(sets[0], SlotSet::full());
        assert!(sets[1].is_empty());
    }
}
