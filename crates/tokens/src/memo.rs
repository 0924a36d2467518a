//! The counts of recently seen pieces, remembered per thread.
//!
//! Most pieces are one token, found by one probe of the vocabulary's rank table; but that table
//! is megabytes, probed at random, so nearly every probe waits on memory; and a piece that is
//! not a token (a rare word, an identifier) costs tiktoken's merge, a probe per pair and per
//! merge. Words recur, in a turn, a conversation and a batch, so each thread keeps the last
//! count of each short piece in a table small enough to stay in the CPU's caches, as Hugging
//! Face's BPE keeps a cache of words: counting every tau-bench turn took about 40 % less time
//! (docs/performance.md). A count depends only on the piece and the vocabulary, so an entry
//! never goes stale; the table is direct-mapped (a new piece replaces the one in its slot).

use std::hash::BuildHasher;

use foldhash::fast::FixedState;

/// Longer pieces (few: most words and numbers are shorter) are counted every time.
pub const MAX_PIECE: usize = 13;

/// Entries per thread: 8,192 × 16 bytes, 128 KiB. Measured over every tau-bench turn, twice
/// as many counted no faster.
const SLOTS: usize = 8192;

/// A piece, its length (0: an empty slot), which vocabulary counted it, and its count.
#[derive(Clone, Copy)]
struct Entry {
    bytes: [u8; MAX_PIECE],
    len: u8,
    vocabulary: u8,
    count: u8,
}

const EMPTY: Entry = Entry {
    bytes: [0; MAX_PIECE],
    len: 0,
    vocabulary: 0,
    count: 0,
};

pub struct Memo {
    entries: Box<[Entry]>,
    hasher: FixedState,
}

impl Memo {
    /// A table of [`SLOTS`] entries, a power of two. (No `Default`: a mutant of this function
    /// that called it would recurse forever, which the optimized build makes a silent loop.)
    pub fn per_thread() -> Self {
        Self::with_slots(SLOTS)
    }

    /// A table of `slots` entries, a power of two.
    fn with_slots(slots: usize) -> Self {
        assert!(slots.is_power_of_two());
        Self {
            entries: vec![EMPTY; slots].into_boxed_slice(),
            hasher: FixedState::with_seed(0x6d65_6d6f_7069_6563),
        }
    }

    /// The count of `piece` by `vocabulary` (an id per vocabulary): remembered, or `count`'s
    /// answer, remembered when the piece is short enough and the answer fits an entry.
    pub fn count(
        &mut self,
        vocabulary: u8,
        piece: &[u8],
        count: impl FnOnce(&[u8]) -> usize,
    ) -> usize {
        if piece.len() > MAX_PIECE {
            return count(piece);
        }
        let slot = (self.hasher.hash_one(piece) as usize) & (self.entries.len() - 1);
        let entry = &mut self.entries[slot];
        if usize::from(entry.len) == piece.len()
            && entry.vocabulary == vocabulary
            && entry.bytes[..piece.len()] == *piece
        {
            return usize::from(entry.count);
        }
        let n = count(piece);
        // A piece of at most MAX_PIECE bytes has at most that many tokens.
        if let (Ok(len), Ok(tokens)) = (u8::try_from(piece.len()), u8::try_from(n)) {
            entry.bytes[..piece.len()].copy_from_slice(piece);
            entry.len = len;
            entry.vocabulary = vocabulary;
            entry.count = tokens;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many times `count` ran.
    fn counted(memo: &mut Memo, vocabulary: u8, piece: &[u8], answer: usize) -> (usize, bool) {
        let mut ran = false;
        let n = memo.count(vocabulary, piece, |_| {
            ran = true;
            answer
        });
        (n, ran)
    }

    #[test]
    fn a_piece_counted_once_is_answered_from_the_table_for_its_own_vocabulary_only() {
        let mut memo = Memo::per_thread();
        assert_eq!(counted(&mut memo, 0, b"ZFA04Y", 3), (3, true));
        assert_eq!(counted(&mut memo, 0, b"ZFA04Y", 9), (3, false));
        // The same bytes counted by another vocabulary are another entry.
        assert_eq!(counted(&mut memo, 1, b"ZFA04Y", 4), (4, true));
    }

    #[test]
    fn pieces_sharing_a_slot_replace_each_other_and_never_answer_for_each_other() {
        let mut memo = Memo::with_slots(1);
        assert_eq!(counted(&mut memo, 0, b"abc", 2), (2, true));
        // A prefix, a longer piece and another of the same length all share the one slot.
        assert_eq!(counted(&mut memo, 0, b"ab", 5), (5, true));
        assert_eq!(counted(&mut memo, 0, b"abc", 2), (2, true));
        assert_eq!(counted(&mut memo, 0, b"abcd", 3), (3, true));
        assert_eq!(counted(&mut memo, 0, b"abcx", 4), (4, true));
        assert_eq!(counted(&mut memo, 0, b"abcx", 0), (4, false));
    }

    #[test]
    fn pieces_longer_than_an_entry_are_counted_every_time() {
        let mut memo = Memo::per_thread();
        let long = [b'x'; MAX_PIECE + 1];
        assert_eq!(counted(&mut memo, 0, &long, 7), (7, true));
        assert_eq!(counted(&mut memo, 0, &long, 7), (7, true));
        let longest = [b'x'; MAX_PIECE];
        assert_eq!(counted(&mut memo, 0, &longest, 7), (7, true));
        assert_eq!(counted(&mut memo, 0, &longest, 7), (7, false));
    }
}
