//! Anchor presence: normalization (NFKC, full case folding, whitespace) and word boundaries.

use gatekeeper_coverage::{anchor_present, locate};

#[test]
fn anchors_match_under_normalization_and_only_at_word_boundaries() {
    let cases: &[(&str, &str, &str, bool)] = &[
        (
            "a ligature in the anchor matches plain letters",
            "ﬁle",
            "the file is here",
            true,
        ),
        (
            "plain letters match a ligature in the summary",
            "file",
            "the ﬁle is here",
            true,
        ),
        (
            "full-width digits match ascii digits",
            "１２３４",
            "order 1234 shipped",
            true,
        ),
        (
            "ascii digits match full-width digits",
            "HAT1234",
            "ＨＡＴ１２３４ confirmed",
            true,
        ),
        ("the Kelvin sign is a K", "K9", "unit \u{212A}9 ready", true),
        (
            "Turkish dotted capital I matches itself in any case",
            "İstanbul",
            "flew to İSTANBUL today",
            true,
        ),
        (
            "Turkish dotted I does not fold to a plain i",
            "İstanbul",
            "flew to istanbul today",
            false,
        ),
        (
            "German sharp s matches SS",
            "straße",
            "HAUPTSTRASSE 5 and STRASSE 7",
            true,
        ),
        ("SS matches a sharp s", "STRASSE", "die Straße", true),
        (
            "composed and decomposed accents are one",
            "café",
            "met at the cafe\u{301} at noon",
            true,
        ),
        (
            "conjoining jamo compose into the syllables they spell",
            "한국",
            "flights to \u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8} today",
            true,
        ),
        (
            "decomposed accents match composed ones",
            "cafe\u{301}",
            "met at the café",
            true,
        ),
        (
            "an unaccented anchor is not the accented word",
            "cafe",
            "met at the café",
            false,
        ),
        (
            "Greek final sigma folds like sigma",
            "ΟΔΟΣ",
            "η οδος ήταν",
            true,
        ),
        (
            "case does not matter",
            "ZFA04Y",
            "reservation zfa04y was cancelled",
            true,
        ),
        (
            "whitespace runs are one space",
            "New York",
            "from new\n  YORK to",
            true,
        ),
        (
            "a non-breaking space is a space",
            "New York",
            "from New\u{a0}York",
            true,
        ),
        (
            "punctuation around an anchor is a boundary",
            "v1.2",
            "released (v1.2, stable)",
            true,
        ),
        (
            "an anchor ending in a period-free version inside a longer one",
            "v1.2",
            "released v1.23",
            false,
        ),
        (
            "a trailing sentence period is a boundary",
            "v1.2",
            "we shipped v1.2.",
            true,
        ),
        (
            "a substring inside a word does not count",
            "cat",
            "we concatenate",
            false,
        ),
        (
            "an anchor that is a prefix of a longer id does not count",
            "HAT1",
            "booked HAT12",
            false,
        ),
        (
            "the shorter id counts where it stands alone",
            "HAT1",
            "booked HAT12 and HAT1",
            true,
        ),
        (
            "an anchor with inner punctuation",
            "user_id:42",
            "key user_id:42 set",
            true,
        ),
        (
            "an underscore is not a letter, so it is a boundary",
            "user",
            "key user_id set",
            true,
        ),
        ("an anchor at the very edges of the text", "A1", "A1", true),
        (
            "emoji next to an anchor are boundaries",
            "ok",
            "👍ok👍",
            true,
        ),
        (
            "a combining mark after the match is part of the word",
            "e",
            "caf e\u{301}",
            false,
        ),
        // NFKC composes `e` + U+0301 into `é`, so the case above holds even for a matcher that
        // took marks for boundaries; these marks stay separate after normalization.
        (
            "the dot İ folds to is part of the word, so `i` is not in İSTANBUL",
            "i",
            "flew to İSTANBUL today",
            false,
        ),
        (
            "a mark with no precomposed form is part of its letter's word",
            "q",
            "the q\u{323} sound",
            false,
        ),
        (
            "an enclosing mark has no combining class, so it ends the word: `1` is in a keycap",
            "1",
            "press 1\u{20E3} to confirm",
            true,
        ),
        (
            "the letter stands alone after its marked twin",
            "q",
            "q\u{323} and q",
            true,
        ),
        // Anchors that begin with punctuation go through the automaton, not the word index.
        (
            "an anchor starting with a dollar sign",
            "$100",
            "refund of $100 issued",
            true,
        ),
        (
            "a dollar amount that is the start of a larger one",
            "$100",
            "refund of $1000",
            false,
        ),
        (
            "a dollar amount after a word character",
            "$100",
            "paid US$100 today",
            false,
        ),
        (
            "a dollar amount before a sentence period",
            "$100",
            "it cost $100.",
            true,
        ),
        (
            "an anchor starting with a hash",
            "#123",
            "see ticket #123, fixed",
            true,
        ),
        (
            "a hash number inside a longer one",
            "#123",
            "see ticket #1234",
            false,
        ),
        (
            "a hash anchor in full-width forms",
            "#123",
            "ticket ＃１２３ closed",
            true,
        ),
        (
            "an anchor that is only whitespace is never present",
            "   ",
            "a b c",
            false,
        ),
        ("an empty anchor is never present", "", "anything", false),
        (
            "CJK text needs the exact characters",
            "東京",
            "私は東京に行った",
            false,
        ),
        (
            "CJK text matches when standing alone",
            "東京",
            "行き先: 東京 (羽田)",
            true,
        ),
    ];
    for &(name, anchor, summary, expected) in cases {
        assert_eq!(
            anchor_present(anchor, summary),
            expected,
            "{name}: {anchor:?} in {summary:?}"
        );
    }
}

#[test]
fn overlapping_anchors_are_each_found() {
    let found = locate(&["ab-cd", "cd-ef", "b-c"], "x ab-cd-ef y");
    let names: Vec<&str> = found.iter().map(|e| e.anchor.as_str()).collect();
    assert_eq!(names, ["ab-cd", "cd-ef"]);
}

#[test]
fn an_occurrence_at_a_bad_boundary_does_not_hide_a_later_good_one() {
    let found = locate(&["HAT1"], "HAT12 then HAT1.");
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].start, found[0].end), (11, 15));
}

#[test]
fn evidence_is_in_character_offsets_of_the_original_summary() {
    let summary = "Ｒｅｓｅｒｖａｔｉｏｎ für Straße: ZFA04Y, cafe\u{301} — 東京";
    let chars: Vec<char> = summary.chars().collect();
    for (anchor, expected) in [
        ("ZFA04Y", "ZFA04Y"),
        ("STRASSE", "Straße"),
        ("reservation", "Ｒｅｓｅｒｖａｔｉｏｎ"),
        ("café", "cafe\u{301}"),
        ("東京", "東京"),
    ] {
        let found = locate(&[anchor], summary);
        assert_eq!(found.len(), 1, "{anchor}");
        let slice: String = chars[found[0].start..found[0].end].iter().collect();
        assert_eq!(slice, expected, "{anchor}");
    }
}
