//! A byte-pair vocabulary: each token's rank by its bytes, and tiktoken's merge, counting only.
//!
//! The merge is tiktoken's (`_byte_pair_merge` for short pieces, the heap version for pieces of
//! 100 bytes or more, as tiktoken chooses), so counts are tiktoken's by construction; tests
//! compare them with tiktoken-rs on real and generated text. The ranks live in one table of
//! concatenated token bytes and an open-addressing index, a few megabytes, instead of the
//! hash maps of owned byte strings tiktoken-rs keeps (tens of megabytes with its decoder).
//! Most lookups are of a few bytes (a pair, a short word), so tokens of up to [`PACKED`] bytes
//! have a table of their own keyed by the bytes packed in a word: a lookup there is a multiply
//! and a probe of one entry that holds the rank, with no hash of a slice and no comparison of
//! bytes elsewhere in memory.

use std::collections::BinaryHeap;
use std::hash::BuildHasher;

use foldhash::fast::FixedState;

/// No merge: the pair is not a token.
const NONE: u32 = u32::MAX;

/// Pieces shorter than this merge in a plain array; longer ones through a heap (tiktoken's
/// threshold), so a long piece costs n log n rather than n².
const SHORT_PIECE: usize = 100;

/// Tokens of at most this many bytes are found by [`pack`]ed key: the bytes and their length
/// fill a `u64`.
const PACKED: usize = 7;

/// `bytes` (at most [`PACKED`]) in the low bytes of a word and their length in the top one,
/// so no two byte strings share a key and only the empty one is 0.
fn pack(bytes: &[u8]) -> u64 {
    let mut word = [0; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    word[PACKED] = bytes.len() as u8;
    u64::from_le_bytes(word)
}

/// A packed table entry: a token's key and rank; the empty entry is `(0, NONE)`, so a probe
/// that reaches one answers NONE.
#[derive(Clone, Copy)]
struct Packed {
    key: u64,
    rank: u32,
}

const EMPTY: Packed = Packed { key: 0, rank: NONE };

pub struct Vocabulary {
    /// Every token's bytes, in rank order.
    bytes: Vec<u8>,
    /// Where token `r` starts in `bytes`; `starts[r + 1]` is where it ends.
    starts: Vec<u32>,
    /// Tokens of up to [`PACKED`] bytes, open addressing by the key's Fibonacci hash.
    packed: Vec<Packed>,
    /// How far a key's hash is shifted to index `packed`.
    packed_shift: u32,
    /// Longer tokens, open addressing by the bytes' hash: `rank + 1`, or 0 for an empty slot.
    slots: Vec<u32>,
    hasher: FixedState,
}

impl Vocabulary {
    /// The vocabulary whose token of rank `r` is the `r`th of `tokens`.
    pub fn new<T: AsRef<[u8]>>(tokens: impl IntoIterator<Item = T>) -> Self {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for token in tokens {
            starts.push(offset(bytes.len()));
            bytes.extend_from_slice(token.as_ref());
        }
        starts.push(offset(bytes.len()));
        let count = starts.len() - 1;
        let is_packed = |rank: usize| starts[rank + 1] - starts[rank] <= PACKED as u32;
        let short = (0..count).filter(|&rank| is_packed(rank)).count();
        // At most two-thirds full, so a probe meets an empty entry soon; o200k's 132,360 short
        // tokens fill half of 4 MiB (twice their count would round up to 8).
        let packed_len = (short * 3 / 2).next_power_of_two().max(2);
        let mut vocabulary = Self {
            packed: vec![EMPTY; packed_len],
            packed_shift: 64 - packed_len.trailing_zeros(),
            slots: vec![0; ((count - short) * 2).next_power_of_two().max(2)],
            hasher: FixedState::with_seed(0x6761_7465_6b65_6570),
            bytes,
            starts,
        };
        for rank in 0..count {
            let token = vocabulary.token(rank);
            if token.len() <= PACKED {
                let key = pack(token);
                let slot = vocabulary
                    .packed_probe(key)
                    .find(|&slot| vocabulary.packed[slot].key == 0)
                    .unwrap_or_else(|| unreachable!("the table has more entries than it fills"));
                vocabulary.packed[slot] = Packed {
                    key,
                    rank: offset(rank),
                };
            } else {
                let slot = vocabulary
                    .probe(token)
                    .find(|&slot| vocabulary.slots[slot] == 0)
                    .unwrap_or_else(|| unreachable!("the table has twice the slots it fills"));
                vocabulary.slots[slot] = offset(rank + 1);
            }
        }
        vocabulary
    }

    /// The entries where the token of `key` may be, in the order they are tried.
    fn packed_probe(&self, key: u64) -> impl Iterator<Item = usize> {
        let mask = self.packed.len() - 1;
        let first = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.packed_shift) as usize;
        (0..self.packed.len()).map(move |step| first.wrapping_add(step) & mask)
    }

    /// The slots where `bytes` may be, in the order they are tried: each at most once.
    fn probe(&self, bytes: &[u8]) -> impl Iterator<Item = usize> {
        let mask = self.slots.len() - 1;
        let first = self.hasher.hash_one(bytes) as usize;
        (0..self.slots.len()).map(move |step| first.wrapping_add(step) & mask)
    }

    /// How many tokens the vocabulary holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Fails unless both tables place their tokens near their home slots: any hash finds
    /// every token, so only the probes' length shows a hash that spreads them badly.
    #[cfg(test)]
    pub fn assert_probes_are_short(&self) {
        let (mut packed, mut long) = (Vec::new(), Vec::new());
        for rank in 0..self.len() {
            let token = self.token(rank);
            if token.len() <= PACKED {
                let key = pack(token);
                packed.push(
                    self.packed_probe(key)
                        .position(|slot| self.packed[slot].key == key),
                );
            } else {
                let entry = offset(rank + 1);
                long.push(self.probe(token).position(|slot| self.slots[slot] == entry));
            }
        }
        // o200k's tables are about half full: the mean is about half a step past the home slot.
        for (table, steps) in [("packed", packed), ("long", long)] {
            let steps: Vec<usize> = steps.into_iter().map(Option::unwrap).collect();
            let mean = steps.iter().sum::<usize>() as f64 / steps.len() as f64;
            let max = steps.iter().max().copied().unwrap_or(0);
            assert!(mean < 1.0 && max < 64, "{table}: mean {mean}, max {max}");
        }
    }

    fn token(&self, rank: usize) -> &[u8] {
        &self.bytes[self.starts[rank] as usize..self.starts[rank + 1] as usize]
    }

    /// The rank of the token that is exactly `bytes`.
    pub fn rank(&self, bytes: &[u8]) -> Option<u32> {
        if bytes.len() <= PACKED {
            let key = pack(bytes);
            for slot in self.packed_probe(key) {
                let entry = self.packed[slot];
                if entry.key == key || entry.key == 0 {
                    return (entry.rank != NONE).then_some(entry.rank);
                }
            }
            unreachable!("the table has more entries than it fills, so a probe meets an empty one")
        }
        for slot in self.probe(bytes) {
            match self.slots[slot] {
                0 => return None,
                entry if self.token(entry as usize - 1) == bytes => return Some(entry - 1),
                _ => {}
            }
        }
        unreachable!("the table has twice the slots it fills, so a probe meets an empty one")
    }

    fn rank_or_none(&self, bytes: &[u8]) -> u32 {
        self.rank(bytes).unwrap_or(NONE)
    }

    /// How many tokens byte-pair encoding makes of one pre-tokenized piece.
    pub fn count(&self, piece: &[u8]) -> usize {
        if piece.is_empty() {
            0
        } else if piece.len() == 1 || self.rank(piece).is_some() {
            // Every byte is a token; most pieces are one whole token.
            1
        } else if piece.len() < SHORT_PIECE {
            self.count_short(piece)
        } else {
            self.count_long(piece)
        }
    }

    /// tiktoken's `_byte_pair_merge`: merge the lowest-ranked adjacent pair (the leftmost of
    /// equals) until no pair is a token. `parts` holds each part's start and the rank of the
    /// pair it would form with the next part.
    fn count_short(&self, piece: &[u8]) -> usize {
        // A piece shorter than SHORT_PIECE has at most that many parts and ends.
        let mut parts = [(0usize, NONE); SHORT_PIECE];
        let mut len = piece.len() + 1;
        let mut min = (NONE, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.rank_or_none(&piece[i..i + 2]);
            if rank < min.0 {
                min = (rank, i);
            }
            parts[i] = (i, rank);
        }
        parts[piece.len() - 1] = (piece.len() - 1, NONE);
        parts[piece.len()] = (piece.len(), NONE);
        // The rank of part i merged with the two after it (before the one between is removed).
        let merged_rank = |parts: &[(usize, u32)], len: usize, i: usize| {
            if i + 3 < len {
                self.rank_or_none(&piece[parts[i].0..parts[i + 3].0])
            } else {
                NONE
            }
        };
        // Each merge joins two parts, so there are fewer merges than bytes.
        for _ in 1..piece.len() {
            if min.0 == NONE {
                break;
            }
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = merged_rank(&parts, len, i - 1);
            }
            parts[i].1 = merged_rank(&parts, len, i);
            parts.copy_within(i + 2..len, i + 1);
            len -= 1;
            min = (NONE, usize::MAX);
            // The last part (the piece's end) pairs with nothing: its rank is NONE.
            for (i, &(_, rank)) in parts[..len].iter().enumerate() {
                if rank < min.0 {
                    min = (rank, i);
                }
            }
        }
        len - 1
    }

    /// tiktoken's `_byte_pair_merge_large`: the same merges in the same order, the candidates in
    /// a heap and the parts linked by their ends.
    fn count_long(&self, piece: &[u8]) -> usize {
        struct Part {
            prev: usize,
            end: usize,
            next_end: usize,
            next_rank: u32,
        }
        let mut parts = Vec::with_capacity(piece.len());
        parts.push(Part {
            prev: usize::MAX,
            end: 1,
            next_end: 2,
            next_rank: NONE,
        });
        let mut heap = BinaryHeap::with_capacity(piece.len());
        for i in 0..piece.len() - 1 {
            if let Some(rank) = self.rank(&piece[i..i + 2]) {
                heap.push(Merge { start: i, rank });
                parts[i].next_rank = rank;
            }
            parts.push(Part {
                prev: i,
                end: i + 2,
                next_end: i + 3,
                next_rank: NONE,
            });
        }
        let propose =
            |parts: &mut Vec<Part>, heap: &mut BinaryHeap<Merge>, start: usize, next_end: usize| {
                parts[start].next_end = next_end;
                parts[start].next_rank = NONE;
                if next_end <= piece.len()
                    && let Some(rank) = self.rank(&piece[start..next_end])
                {
                    heap.push(Merge { start, rank });
                    parts[start].next_rank = rank;
                }
            };
        while let Some(left) = heap.pop() {
            if left.rank != parts[left.start].next_rank {
                continue; // superseded by a merge made since it was proposed
            }
            let left_start = left.start;
            let right_start = parts[left_start].end;
            let right_end = parts[left_start].next_end;
            let right_next_end = parts[right_start].next_end;
            parts[left_start].end = right_end;
            propose(&mut parts, &mut heap, left_start, right_next_end);
            if right_end < parts.len() {
                parts[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = parts[left_start].prev;
                propose(&mut parts, &mut heap, prev_start, right_end);
            }
            parts[right_start].next_rank = NONE;
        }
        let mut count = 0;
        let mut i = 0;
        while i < parts.len() {
            count += 1;
            i = parts[i].end;
        }
        count
    }
}

/// A candidate merge of the part at `start` with the next; the lowest rank first, then the
/// leftmost.
#[derive(PartialEq, Eq)]
struct Merge {
    start: usize,
    rank: u32,
}

impl Ord for Merge {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.start.cmp(&self.start))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

fn offset(n: usize) -> u32 {
    u32::try_from(n).expect("a vocabulary under 4 GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte, then merges that make "ab", "bc", "abc" and "bcbc"; and "xyz", which no
    /// merge reaches (a toy vocabulary).
    fn toy() -> Vocabulary {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.extend([&b"ab"[..], b"bc", b"abc", b"bcbc", b"xyz"].map(<[u8]>::to_vec));
        Vocabulary::new(&tokens)
    }

    #[test]
    fn ranks_are_found_by_bytes_and_absent_bytes_have_none() {
        let v = toy();
        assert_eq!(v.len(), 261);
        assert_eq!(v.rank(b"a"), Some(u32::from(b'a')));
        assert_eq!(v.rank(b"ab"), Some(256));
        assert_eq!(v.rank(b"abc"), Some(258));
        assert_eq!(v.rank(b"ca"), None);
        assert_eq!(v.rank(b""), None);
    }

    #[test]
    fn tokens_on_either_side_of_the_packed_length_are_found_and_nothing_else_is() {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.extend([&b"abcdefg"[..], b"abcdefgh", b"a\0", b"\0\0"].map(<[u8]>::to_vec));
        let v = Vocabulary::new(&tokens);
        assert_eq!(v.rank(b"abcdefg"), Some(256));
        assert_eq!(v.rank(b"abcdefgh"), Some(257));
        // Zero bytes are bytes: the length in the key tells "a" from "a\0".
        assert_eq!(v.rank(b"a\0"), Some(258));
        assert_eq!(v.rank(b"\0\0"), Some(259));
        assert_eq!(v.rank(b"\0"), Some(0));
        for absent in [
            &b""[..],
            b"a\0\0",
            b"\0\0\0",
            b"abcdef",
            b"abcdefgx",
            b"abcdefghi",
        ] {
            assert_eq!(v.rank(absent), None, "{absent:?}");
        }
    }

    #[test]
    fn the_lowest_ranked_pair_merges_first_in_short_and_long_pieces() {
        let v = toy();
        // "abc": "ab" (256) merges before "bc" (257), then "ab"+"c" is "abc": one token.
        assert_eq!(v.count(b"abc"), 1);
        // "abcbc": ab, c, bc, then "abc" + "bc" is no token; "cbc" neither: 2 tokens.
        assert_eq!(v.count(b"abcbc"), 2);
        // "xbcbc": "bc" twice (the leftmost first), then "bcbc": x + bcbc.
        assert_eq!(v.count(b"xbcbc"), 2);
        assert_eq!(v.count(b"xyw"), 3);
        // A piece that is a token is one token, as tiktoken has it, though merges never reach it.
        assert_eq!(v.count(b"xyz"), 1);
        assert_eq!(v.count_short(b"xyz"), 3);
        assert_eq!(v.count(b""), 0);
        // "xbcbcabc" is x, bcbc, abc; the heap version agrees with the array version.
        let long = b"xbcbcabc".repeat(20);
        assert!(long.len() >= SHORT_PIECE);
        assert_eq!(v.count(&long), 60);
        assert_eq!(v.count_short(&long[..96]), 36);
        assert_eq!(v.count_long(&long[..96]), 36);
        // From SHORT_PIECE bytes on, the heap version (the array has no room for more).
        assert_eq!(
            v.count(&long[..SHORT_PIECE]),
            v.count_long(&long[..SHORT_PIECE])
        );
    }
}
