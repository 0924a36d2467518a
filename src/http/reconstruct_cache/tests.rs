//! The cache's own rules: which heads are trusted, and how erasures are forgotten.

use super::*;

fn conversation(name: &str) -> ConversationKey {
    (TenantId::single(), ConversationId::parse(name).unwrap())
}

fn head(latest_checkpoint: Option<i64>) -> Head {
    Head {
        incarnation: 7,
        latest_checkpoint,
    }
}

fn cache_with_feed_up() -> ReconstructCache {
    let cache = ReconstructCache::new(1 << 20).unwrap();
    cache.on_feed(FeedEvent::Connected);
    cache
}

#[test]
fn no_id_is_trusted_before_the_feed_is_up() {
    let cache = ReconstructCache::new(1 << 20).unwrap();
    let started = cache.read_started();
    cache.learn(&conversation("c"), head(Some(1)), started);
    assert_eq!(cache.known_head(&conversation("c")), None);
}

#[test]
fn an_id_read_while_nothing_moved_is_remembered() {
    let cache = cache_with_feed_up();
    let started = cache.read_started();
    cache.learn(&conversation("c"), head(Some(1)), started);
    assert_eq!(cache.known_head(&conversation("c")), Some(head(Some(1))));
}

#[test]
fn an_id_read_across_a_reported_checkpoint_is_not_remembered() {
    let cache = cache_with_feed_up();
    let started = cache.read_started();
    // The checkpoint's report arrives while the read is in flight (of any conversation:
    // which one the read is older than cannot be told cheaply).
    cache.on_feed(FeedEvent::Checkpoint {
        tenant: "default",
        conversation: "other",
    });
    cache.learn(&conversation("c"), head(Some(1)), started);
    assert_eq!(cache.known_head(&conversation("c")), None);
}

#[test]
fn a_reported_checkpoint_forgets_only_its_own_conversation() {
    let cache = cache_with_feed_up();
    for name in ["c", "d"] {
        let started = cache.read_started();
        cache.learn(&conversation(name), head(Some(1)), started);
    }
    cache.on_feed(FeedEvent::Checkpoint {
        tenant: TenantId::single().as_str(),
        conversation: "c",
    });
    assert_eq!(cache.known_head(&conversation("c")), None);
    assert_eq!(cache.known_head(&conversation("d")), Some(head(Some(1))));
}

#[tokio::test]
async fn conversations_reported_erased_together_are_forgotten_together_off_the_feeds_task() {
    let cache = Arc::new(cache_with_feed_up());
    let names: Vec<String> = (0..100).map(|i| format!("e{i}")).collect();
    for name in names.iter().map(String::as_str).chain(["kept"]) {
        remember_an_answer(&cache, name);
    }
    let tenant = TenantId::single();
    for name in &names {
        cache.on_feed(FeedEvent::Erased {
            tenant: tenant.as_str(),
            conversation: name,
        });
    }
    // Untrusted at once, so never answered again; dropped later, all in one pass.
    assert_eq!(cache.known_head(&conversation("e0")), None);
    assert!(
        cache.holds(&conversation("e0")),
        "not dropped on the feed's task"
    );
    assert_eq!(cache.reported_erased.lock().unwrap().len(), names.len());
    let forgetting = tokio::spawn(cache.clone().forget_reported_erasures());
    for _ in 0..500 {
        if names.iter().all(|name| !cache.holds(&conversation(name))) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    forgetting.abort();
    for name in &names {
        assert!(!cache.holds(&conversation(name)), "{name} is forgotten");
    }
    assert!(cache.holds(&conversation("kept")), "only the erased are");
    assert!(cache.reported_erased.lock().unwrap().is_empty());
}

/// The conversation's head is known and its turn 0 answered from memory.
fn remember_an_answer(cache: &ReconstructCache, name: &str) {
    let started = cache.read_started();
    cache.learn(&conversation(name), head(Some(1)), started);
    let key = AnswerKey {
        tenant: TenantId::single(),
        conversation: ConversationId::parse(name).unwrap(),
        incarnation: 7,
        turn: 0,
        latest_checkpoint: Some(1),
    };
    cache.keep(key, answer());
}

// One worker thread: a pass made on it would hold every other task until it ends.
#[tokio::test(flavor = "current_thread")]
async fn a_local_erasure_is_forgotten_when_it_returns_and_its_pass_leaves_the_worker_free() {
    let cache = Arc::new(ReconstructCache::new(64 << 20).unwrap());
    cache.on_feed(FeedEvent::Connected);
    // Enough answers that the pass over them takes milliseconds.
    for i in 0..50_000 {
        remember_an_answer(&cache, &format!("k{i}"));
    }
    remember_an_answer(&cache, "gone");
    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                ticks.fetch_add(1, SeqCst);
                tokio::task::yield_now().await;
            }
        }
    });
    cache.conversations_erased(vec![conversation("gone")]).await;
    let ran_meanwhile = ticks.load(SeqCst);
    ticker.abort();
    assert!(
        ran_meanwhile > 0,
        "the worker ran other tasks during the pass"
    );
    assert!(
        !cache.holds(&conversation("gone")),
        "forgotten when it returns"
    );
    assert_eq!(cache.known_head(&conversation("gone")), None);
    assert!(
        cache.holds(&conversation("k0")),
        "only the erased conversation"
    );
    assert_eq!(cache.known_head(&conversation("k0")), Some(head(Some(1))));
}

fn answer() -> ReconstructResponse {
    ReconstructResponse {
        turn: 0,
        source: crate::api::Source::RawLog,
        checkpoint_id: None,
        text: "a raw turn".into(),
        role: crate::coverage::Role::User,
        reason: None,
        evidence: vec![],
    }
}

#[test]
fn a_lost_feed_forgets_every_id_until_it_is_back() {
    let cache = cache_with_feed_up();
    let started = cache.read_started();
    cache.learn(&conversation("c"), head(Some(1)), started);
    cache.on_feed(FeedEvent::Lost);
    assert_eq!(cache.known_head(&conversation("c")), None);
    let started = cache.read_started();
    cache.learn(&conversation("c"), head(Some(2)), started);
    assert_eq!(cache.known_head(&conversation("c")), None, "not while down");
    cache.on_feed(FeedEvent::Connected);
    assert_eq!(
        cache.known_head(&conversation("c")),
        None,
        "nothing from before"
    );
    let started = cache.read_started();
    cache.learn(&conversation("c"), head(Some(2)), started);
    assert_eq!(cache.known_head(&conversation("c")), Some(head(Some(2))));
}
