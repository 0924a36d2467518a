use super::*;
use crate::coverage::terms::term_keys;

fn texts(q: &str) -> Vec<String> {
    parse_query(q)
        .unwrap()
        .terms
        .into_iter()
        .map(|t| t.text)
        .collect()
}

fn ignored(q: &str) -> Vec<String> {
    parse_query(q).unwrap().ignored
}

#[test]
fn a_query_is_cut_into_identifier_aware_terms() {
    let cases: &[(&str, &[&str])] = &[
        ("ZFA04Y", &["zfa04y"]),
        ("src/store/mod.rs", &["src/store/mod.rs"]),
        ("get_user", &["get_user"]),
        ("HTTP 503", &["http", "503"]),
        ("2024-05-15", &["2024-05-15"]),
        ("the refund, voucher", &["refund", "voucher"]),
        ("Refund refund REFUND", &["refund"]),
        ("(order #W123)", &["order", "w123"]),
        ("a I x ZFA04Y", &["zfa04y"]),
    ];
    for (q, want) in cases {
        assert_eq!(texts(q), *want, "query {q:?}");
    }
}

#[test]
fn words_a_query_cannot_search_are_listed_as_ignored_never_dropped_silently() {
    assert_eq!(parse_query(""), Err(QueryError::Empty));
    assert_eq!(parse_query("   "), Ok(Query::default()));
    assert_eq!(texts("the a of ?!"), Vec::<String>::new());
    assert_eq!(ignored("the a of ?! the"), vec!["the", "a", "of"]);
    assert_eq!(ignored("refund the order"), vec!["the"]);
    let long = "é".repeat(MAX_QUERY_CHARS + 1);
    assert_eq!(
        parse_query(&long),
        Err(QueryError::TooLong {
            chars: MAX_QUERY_CHARS + 1
        })
    );
    let longest = format!("{} ab", "é".repeat(MAX_QUERY_CHARS - 3));
    assert_eq!(texts(&longest), vec!["ab"], "characters, not bytes");
    assert_eq!(
        ignored(&longest),
        vec!["é".repeat(MAX_QUERY_CHARS - 3)],
        "longer than a key"
    );
    let many: Vec<String> = (0..=MAX_QUERY_TERMS).map(|i| format!("w{i}")).collect();
    let query = parse_query(&many.join(" ")).unwrap();
    assert_eq!(query.terms.len(), MAX_QUERY_TERMS);
    assert_eq!(
        query.ignored,
        vec![format!("w{MAX_QUERY_TERMS}")],
        "past the most terms"
    );
}

#[test]
fn a_run_longer_than_an_index_key_is_searched_word_by_word() {
    let run = format!("{}/{}", "segment".repeat(8), "tail".repeat(3));
    assert_eq!(texts(&run), vec!["segment".repeat(8), "tail".repeat(3)]);
    assert!(ignored(&run).is_empty());
}

#[test]
fn every_query_term_of_a_turns_text_is_among_the_keys_the_turn_is_indexed_under() {
    let text = "Order ZFA04Y failed with HTTP 503 at src/store/mod.rs in get_user on 2024-05-15.";
    let keys = term_keys(text);
    for q in [
        "ZFA04Y",
        "src/store/mod.rs",
        "mod.rs",
        "store",
        "get_user",
        "user",
        "HTTP 503",
        "2024-05-15",
        "failed",
    ] {
        for term in parse_query(q).unwrap().terms {
            assert!(
                keys.binary_search(&term.key).is_ok(),
                "{q:?}: {}",
                term.text
            );
        }
    }
}

#[test]
fn a_turn_is_indexed_under_its_conversation_and_its_terms() {
    assert_ne!(conversation_key("a", "c"), conversation_key("b", "c"));
    assert_ne!(conversation_key("a", "bc"), conversation_key("ab", "c"));
    let terms = parse_query("ZFA04Y refund").unwrap().terms;
    let raw: Vec<TermKey> = terms.iter().map(|t| t.key).collect();
    let keys = index_keys(conversation_key("t", "c"), &raw);
    assert_eq!(keys, vec![conversation_key("t", "c"), raw[0], raw[1]]);
    assert_eq!(Scope::Conversation("c").key("t"), Some(keys[0]));
    assert_eq!(
        Scope::Tenant {
            conversation_prefix: None
        }
        .key("t"),
        None
    );
    assert_eq!(
        key_document(&[TermKey(1), TermKey(0xabcdef12)]),
        "k00000001 kabcdef12"
    );
}

fn posting(conversation: &str, turn: i64, tokens: u32) -> Posting {
    Posting {
        conversation: conversation.into(),
        turn,
        role: Role::User,
        tokens,
    }
}

fn order(ranked: &[Ranked]) -> Vec<(String, i64)> {
    ranked
        .iter()
        .map(|r| (r.conversation.clone(), r.turn))
        .collect()
}

#[test]
fn turns_holding_more_and_rarer_terms_rank_first_and_shorter_ones_before_longer() {
    // Term 0 is rare (one turn), term 1 common (four turns).
    let postings = vec![
        vec![posting("c", 3, 50)],
        vec![
            posting("c", 1, 50),
            posting("c", 2, 50),
            posting("c", 3, 50),
            posting("c", 4, 500),
        ],
    ];
    let ranked = rank(&postings, 100);
    assert_eq!(ranked[0].turn, 3, "both terms");
    assert_eq!(ranked[0].terms, vec![0, 1]);
    assert_eq!(ranked.last().unwrap().turn, 4, "the long turn last");
    // Ties (same terms, same size) go to the newer turn.
    assert_eq!(order(&ranked[1..3]), vec![("c".into(), 2), ("c".into(), 1)]);
    assert!(ranked.windows(2).all(|w| w[0].score >= w[1].score));
}

#[test]
fn scores_are_bm25_with_each_term_counted_once_and_b_one_half() {
    // Reference values worked out by hand from the formula (N = 100, k1 = 1.2, b = 0.5, mean
    // length 162.5 tokens): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), per term
    // (k1 + 1) / (1 + k1 (1 - b + b len / mean)).
    let postings = vec![
        vec![posting("c", 3, 50)],
        vec![
            posting("c", 1, 50),
            posting("c", 2, 50),
            posting("c", 3, 50),
            posting("c", 4, 500),
        ],
    ];
    let ranked = rank(&postings, 100);
    let score = |turn: i64| ranked.iter().find(|r| r.turn == turn).unwrap().score;
    for (turn, want) in [
        (3, 9.02465422084591),
        (2, 3.835165225597353),
        (4, 1.986067706112915),
    ] {
        assert!(
            (score(turn) - want).abs() < 1e-9,
            "turn {turn}: {} != {want}",
            score(turn)
        );
    }
}

#[test]
fn scopes_name_their_metric_label() {
    assert_eq!(Scope::Conversation("c").as_str(), "conversation");
    assert_eq!(
        Scope::Tenant {
            conversation_prefix: None
        }
        .as_str(),
        "tenant"
    );
}

#[test]
fn a_rare_term_outweighs_a_common_one() {
    let postings = vec![
        vec![posting("a", 1, 10)],
        (2..40).map(|i| posting("a", i, 10)).collect(),
    ];
    let ranked = rank(&postings, 1000);
    assert_eq!(ranked[0].turn, 1);
    assert!(ranked[0].score > ranked[1].score);
}

#[test]
fn nothing_found_ranks_nothing() {
    assert!(rank(&[vec![], vec![]], 10).is_empty());
}

fn chars(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

#[test]
fn a_snippet_shows_the_matches_around_the_first_one() {
    let text = format!(
        "{} Order ZFA04Y was cancelled; refund for ZFA04Y.",
        "x ".repeat(100)
    );
    let (held, s) = snippet(&text, &["zfa04y", "refund", "absent"]).unwrap();
    assert_eq!(held.len(), 2);
    assert!(s.text.contains("Order ZFA04Y"));
    assert_eq!(
        chars(&text, s.start, s.start + s.text.chars().count()),
        s.text
    );
    assert!(s.text.chars().count() <= SNIPPET_CHARS);
    let shown: Vec<String> = s
        .matches
        .iter()
        .map(|m| chars(&s.text, m.start, m.end))
        .collect();
    assert_eq!(
        shown,
        vec!["ZFA04Y", "refund"],
        "each term's first occurrence"
    );
}

#[test]
fn a_text_that_holds_none_of_the_terms_has_no_snippet() {
    // Inside a word is no match: word boundaries as the summary matcher reads them.
    assert_eq!(snippet("the zfa04yz order", &["zfa04y"]), None);
}

#[test]
fn snippet_offsets_count_characters_as_evidence_offsets_do() {
    let text = format!("{} ZFA04Y {}", "é".repeat(80), "ü".repeat(200));
    let (_, s) = snippet(&text, &["zfa04y"]).unwrap();
    assert_eq!(s.start, 80 + 1 - SNIPPET_LEAD);
    assert_eq!(
        chars(&s.text, s.matches[0].start, s.matches[0].end),
        "ZFA04Y"
    );
}

proptest::proptest! {
    #[test]
    fn every_word_of_a_text_is_found_by_a_query_for_it(
        words in proptest::collection::vec("[a-z0-9]{2,9}", 1..12),
        joiners in proptest::collection::vec(proptest::sample::select(vec![" ", "_", "/", "-", ".", ", "]), 12),
    ) {
        let mut text = String::new();
        for (i, w) in words.iter().enumerate() {
            if i > 0 { text.push_str(joiners[i]); }
            text.push_str(w);
        }
        let keys = term_keys(&text);
        for w in &words {
            if let Ok(query) = parse_query(w) {
                for t in query.terms {
                    proptest::prop_assert!(keys.binary_search(&t.key).is_ok());
                    proptest::prop_assert!(snippet(&text, &[t.text.as_str()]).is_some());
                }
            }
        }
    }

    #[test]
    fn ranking_holds_every_candidate_once_best_first(
        lists in proptest::collection::vec(proptest::collection::vec((0i64..30, 1u32..400), 0..20), 1..5),
    ) {
        let postings: Vec<Vec<Posting>> = lists.iter()
            .map(|l| l.iter().map(|&(t, n)| posting("c", t, n)).collect()).collect();
        let ranked = rank(&postings, 30);
        let mut distinct: Vec<i64> = lists.iter().flatten().map(|&(t, _)| t).collect();
        distinct.sort_unstable();
        distinct.dedup();
        proptest::prop_assert_eq!(ranked.len(), distinct.len());
        proptest::prop_assert!(ranked.windows(2).all(|w| w[0].score >= w[1].score));
        proptest::prop_assert!(ranked.iter().all(|r| r.score > 0.0 && !r.terms.is_empty()));
    }
}
