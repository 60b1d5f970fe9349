//! The hash space: KEP-5866's 64-bit FNV-1a hash of an owner's UID, cut
//! into [`SLOTS`] equal slots, and sets of slots written as text (on a
//! member's Lease) and as KEP-5866 `shardSelector` expressions.

use std::fmt;
use std::str::FromStr;

/// How many equal slices the 64-bit hash space is cut into. Members hold
/// whole slots; a slot is the unit of handover.
pub const SLOTS: usize = 1024;

/// A slot is the hash's top 10 bits.
const SLOT_SHIFT: u32 = 64 - SLOTS.trailing_zeros();

const WORDS: usize = SLOTS / 64;

/// The 64-bit FNV-1a hash of `value`'s bytes: the hash KEP-5866's
/// `shardRange(object.metadata.uid, …)` places objects by (Go's
/// `hash/fnv.New64a`).
pub fn fnv1a_64(value: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    value
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// The slot an owner with this UID belongs to.
pub fn slot_of_uid(uid: &str) -> usize {
    // The shift leaves 10 bits: always below SLOTS.
    (fnv1a_64(uid) >> SLOT_SHIFT) as usize
}

/// A set of slots.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SlotSet([u64; WORDS]);

impl SlotSet {
    /// No slot.
    pub const fn empty() -> Self {
        Self([0; WORDS])
    }

    /// Every slot.
    pub const fn full() -> Self {
        Self([u64::MAX; WORDS])
    }

    /// Adds `slot` (ignored if not below [`SLOTS`]).
    pub fn insert(&mut self, slot: usize) {
        if slot < SLOTS {
            self.0[slot / 64] |= 1 << (slot % 64);
        }
    }

    /// Removes `slot`.
    pub fn remove(&mut self, slot: usize) {
        if slot < SLOTS {
            self.0[slot / 64] &= !(1 << (slot % 64));
        }
    }

    /// Whether `slot` is in the set.
    pub fn contains(&self, slot: usize) -> bool {
        slot < SLOTS && self.0[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// Whether the owner with this UID falls in the set.
    pub fn contains_uid(&self, uid: &str) -> bool {
        self.contains(slot_of_uid(uid))
    }

    /// How many slots.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether no slot is in the set.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The slots in `self` and not in `other`.
    pub fn minus(&self, other: &Self) -> Self {
        let mut out = *self;
        for (o, x) in out.0.iter_mut().zip(other.0) {
            *o &= !x;
        }
        out
    }

    /// The slots in both.
    pub fn intersection(&self, other: &Self) -> Self {
        let mut out = *self;
        for (o, x) in out.0.iter_mut().zip(other.0) {
            *o &= x;
        }
        out
    }

    /// The slots in either.
    pub fn union(&self, other: &Self) -> Self {
        let mut out = *self;
        for (o, x) in out.0.iter_mut().zip(other.0) {
            *o |= x;
        }
        out
    }

    /// The slots, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..SLOTS).filter(|s| self.contains(*s))
    }

    /// Runs of consecutive slots, as half-open `[start, end)` slot ranges.
    pub fn runs(&self) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for s in self.iter() {
            match runs.last_mut() {
                Some((_, end)) if *end == s => *end = s + 1,
                _ => runs.push((s, s + 1)),
            }
        }
        runs
    }

    /// The hash ranges `[start, end)` the set covers (`end` may be 2^64).
    pub fn hash_ranges(&self) -> Vec<(u64, u128)> {
        self.runs()
            .into_iter()
            .map(|(s, e)| ((s as u64) << SLOT_SHIFT, (e as u128) << SLOT_SHIFT))
            .collect()
    }

    /// The set as a KEP-5866 `shardSelector`: one
    /// `shardRange(object.metadata.uid, '0x…', '0x…')` per run of slots,
    /// joined by `||`; bounds are 16 lowercase hex digits (17 for 2^64).
    /// Empty for an empty set (which selects nothing: do not send it).
    pub fn shard_selector(&self) -> String {
        self.hash_ranges()
            .into_iter()
            .map(|(start, end)| {
                format!("shardRange(object.metadata.uid, '0x{start:016x}', '0x{end:016x}')")
            })
            .collect::<Vec<_>>()
            .join(" || ")
    }
}

impl fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlotSet({self})")
    }
}

/// Inclusive runs, `0-99,512,700-701`; empty for no slot.
impl fmt::Display for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (start, end)) in self.runs().into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if end - start == 1 {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{}", end - 1)?;
            }
        }
        Ok(())
    }
}

/// Why a slot list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid slot list {text:?}: {why}")]
pub struct SlotParseError {
    text: String,
    why: &'static str,
}

impl FromStr for SlotSet {
    type Err = SlotParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |why| SlotParseError {
            text: text.to_owned(),
            why,
        };
        let mut set = SlotSet::empty();
        if text.trim().is_empty() {
            return Ok(set);
        }
        for part in text.split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let parse = |s: &str| s.trim().parse::<usize>().map_err(|_| err("not a number"));
            let (a, b) = (parse(a)?, parse(b)?);
            if a > b {
                return Err(err("a range ends before it starts"));
            }
            if b >= SLOTS {
                return Err(err("a slot is out of range (0-1023)"));
            }
            for s in a..=b {
                set.insert(s);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_64_matches_the_reference_vectors() {
        // From the FNV reference (draft-eastlake-fnv) test strings.
        assert_eq!(fnv1a_64(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn slots_are_the_top_bits_of_the_hash() {
        let uid = "5f3e0a52-8a4b-4c1e-9d0e-6c3a1b2f7e90";
        assert_eq!(slot_of_uid(uid) as u64, fnv1a_64(uid) >> 54);
        assert!(slot_of_uid(uid) < SLOTS);
    }

    #[test]
    fn slot_lists_round_trip_and_bad_ones_are_refused() {
        let mut set = SlotSet::empty();
        for s in [0, 1, 2, 7, 1022, 1023] {
            set.insert(s);
        }
        assert_eq!(set.to_string(), "0-2,7,1022-1023");
        assert_eq!("0-2,7,1022-1023".parse::<SlotSet>().unwrap(), set);
        assert_eq!("".parse::<SlotSet>().unwrap(), SlotSet::empty());
        assert_eq!(SlotSet::full().to_string(), "0-1023");
        for bad in ["x", "3-1", "0-1024", "1,,2", "-"] {
            let err = bad.parse::<SlotSet>().unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn selectors_cover_the_slots_as_kep_5866_ranges() {
        let mut set = SlotSet::empty();
        set.insert(0);
        set.insert(1023);
        assert_eq!(
            set.shard_selector(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x0040000000000000') || \
             shardRange(object.metadata.uid, '0xffc0000000000000', '0x10000000000000000')"
        );
        let ranges = set.hash_ranges();
        let uid = "abc";
        let h = u128::from(fnv1a_64(uid));
        let inside = ranges.iter().any(|(s, e)| u128::from(*s) <= h && h < *e);
        assert_eq!(inside, set.contains_uid(uid));
    }

    #[test]
    fn set_algebra() {
        let a: SlotSet = "0-9".parse().unwrap();
        let b: SlotSet = "5-14".parse().unwrap();
        assert_eq!(a.minus(&b).to_string(), "0-4");
        assert_eq!(a.intersection(&b).to_string(), "5-9");
        assert_eq!(a.union(&b).len(), 15);
        assert!(SlotSet::empty().is_empty());
    }
}
