//! The compaction plan: how far a summary budget reaches from `from`, and whether compacting now
//! is worth it (the churn guard). Pure: the store reads the token counts and the conversation's
//! rejection streak, and this decides.

use crate::coverage::distinctive::checks;
use crate::coverage::{Policy, Role, TurnFacts};
use serde::{Deserialize, Serialize};

/// Rejected proposals in a row from one `from` after which the plan advises `wait`.
pub const REJECTIONS_BEFORE_WAIT: u32 = 3;

/// A range is worth a summary only if it holds at least this many times the summary budget:
/// below that, its summary may be no smaller than the range (and an orchestrator that compacts
/// whatever is above its threshold ends up summarizing one turn at a time).
pub const WORTHWHILE_BUDGETS: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Advice {
    Compact,
    RaiseBudget,
    Wait,
}

impl Advice {
    pub fn as_str(self) -> &'static str {
        match self {
            Advice::Compact => "compact",
            Advice::RaiseBudget => "raise_budget",
            Advice::Wait => "wait",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdviceReason {
    /// The range fits the budget and is worth a summary.
    Fits,
    /// Not even the turn `from` fits: `required_budget` is what it alone needs.
    FirstTurnOverBudget,
    /// The range holds fewer than `worthwhile_tokens`, and more turns may lengthen it.
    RangeTooSmall,
    /// The range holds fewer than `worthwhile_tokens` because its next turn does not fit the
    /// budget (the ceiling, or its anchors' share): waiting cannot lengthen it.
    /// `budget_for_next_turn` is what taking in that turn needs.
    NextTurnOverBudget,
    /// The last `recent_rejections` proposals from `from` were rejected.
    RecentRejections,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The largest `to` whose range fits the budget; `None` when not even `from` fits.
    pub to: Option<i64>,
    /// Tokens of `[from, to]`, or of `from` alone when nothing fits.
    pub prefix_tokens: u64,
    /// What `[from, to]` needs, or what `from` alone needs when nothing fits.
    pub required_budget: u64,
    /// Tokens the range's anchors take written out (one separator each).
    pub anchor_tokens: u64,
    pub advice: Advice,
    pub reason: AdviceReason,
    pub recent_rejections: u32,
    pub worthwhile_tokens: u64,
    /// When the range was cut short of the compactable turns by the budget: the budget that
    /// would take in its next turn.
    pub budget_for_next_turn: Option<u64>,
}

/// The rejection streak as the conversation keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rejections {
    pub from: Option<i64>,
    pub streak: u32,
}

/// How far the ceiling lets a budget reach from `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    pub from: i64,
    /// Each turn that fits, with the tokens and required budget of the range up to it.
    fits: Vec<(i64, u64, u64)>,
    /// What `from` alone needs, when it does not fit.
    first: Option<(u64, u64)>,
    /// The required budget of the range through the first turn that did not fit, if any.
    next: Option<u64>,
}

impl Reach {
    /// The largest `to` the compression ceiling allows (rule 1), if any.
    pub fn to(&self) -> Option<i64> {
        self.fits.last().map(|&(id, _, _)| id)
    }
}

/// Rule 1 from `from` over `turns` (id, role, tokens of every turn from `from` on, in order).
pub fn reach(
    from: i64,
    turns: impl IntoIterator<Item = (i64, Role, u32)>,
    summary_budget: i64,
    policy: &Policy,
) -> Reach {
    let budget = u64::try_from(summary_budget).unwrap_or(0);
    let (mut prose, mut tool) = (0u64, 0u64);
    let mut fits = Vec::new();
    let mut first = None;
    let mut next = None;
    for (id, role, tokens) in turns {
        match role {
            Role::Tool => tool += u64::from(tokens),
            Role::System | Role::User | Role::Assistant => prose += u64::from(tokens),
        }
        let required = policy.required_budget(prose, tool);
        first.get_or_insert((prose + tool, required));
        if required > budget {
            next = Some(required);
            break;
        }
        fits.push((id, prose + tool, required));
    }
    Reach {
        from,
        fits,
        first,
        next,
    }
}

/// A summary must have room for more than its anchors: a planned range's anchors may take at
/// most this share of the budget (numerator, denominator).
pub const ANCHOR_SHARE: (u64, u64) = (1, 2);

/// The plan: the reach shortened until the range's anchors (as rule 2b picks them for the
/// shortened range; `facts` holds the turns of the reach) take at most [`ANCHOR_SHARE`] of the
/// budget, `from` alone always kept; and the advice. `count` counts tokens.
pub fn plan(
    reach: &Reach,
    facts: &[TurnFacts],
    summary_budget: i64,
    rejections: Rejections,
    policy: &Policy,
    count: impl Fn(&str) -> u32,
) -> Plan {
    let budget = u64::try_from(summary_budget).unwrap_or(0);
    let allowance = budget * ANCHOR_SHARE.0 / ANCHOR_SHARE.1;
    let anchor_tokens = |len: usize| -> u64 {
        let turns: Vec<&TurnFacts> = facts[..len].iter().collect();
        checks(&turns, policy)
            .iter()
            .flat_map(|c| c.anchors())
            .map(|a| u64::from(count(a)) + 1)
            .sum()
    };
    // Anchors grow with the range, nearly monotonically (a turn added can make another's
    // anchors shared, or swap them): bisection finds a long prefix that fits in a few steps.
    let reachable = reach.fits.len().min(facts.len());
    let (mut fitting, mut tokens) = (reachable.min(1), anchor_tokens(reachable.min(1)));
    let (mut low, mut high) = (fitting, reachable);
    while low < high {
        let mid = (low + high).div_ceil(2);
        let t = anchor_tokens(mid);
        if t <= allowance {
            (low, fitting, tokens) = (mid, mid, t);
        } else {
            high = mid - 1;
        }
    }
    let (to, prefix_tokens, required_budget) = match fitting.checked_sub(1) {
        Some(last) => {
            let (to, prefix, required) = reach.fits[last];
            (Some(to), prefix, required)
        }
        None => {
            let (prefix, required) = reach.first.unwrap_or((0, 0));
            (None, prefix, required)
        }
    };
    let recent_rejections = if rejections.from == Some(reach.from) {
        rejections.streak
    } else {
        0
    };
    let worthwhile_tokens = budget.saturating_mul(WORTHWHILE_BUDGETS);
    // Cut short by the anchors' share: the budget whose share holds one more turn's anchors
    // (and whose ceiling holds it); by the ceiling: what the range through the next turn needs.
    let budget_for_next_turn = if to.is_some() && fitting < reachable {
        let share = (anchor_tokens(fitting + 1) * ANCHOR_SHARE.1).div_ceil(ANCHOR_SHARE.0);
        Some(share.max(reach.fits[fitting].2))
    } else if fitting == reach.fits.len() {
        reach.next.filter(|_| to.is_some())
    } else {
        None
    };
    let (advice, reason) = if to.is_none() {
        (Advice::RaiseBudget, AdviceReason::FirstTurnOverBudget)
    } else if recent_rejections >= REJECTIONS_BEFORE_WAIT {
        (Advice::Wait, AdviceReason::RecentRejections)
    } else if prefix_tokens < worthwhile_tokens && budget_for_next_turn.is_some() {
        (Advice::RaiseBudget, AdviceReason::NextTurnOverBudget)
    } else if prefix_tokens < worthwhile_tokens {
        (Advice::Wait, AdviceReason::RangeTooSmall)
    } else {
        (Advice::Compact, AdviceReason::Fits)
    };
    Plan {
        to,
        prefix_tokens,
        required_budget,
        anchor_tokens: if to.is_some() { tokens } else { 0 },
        advice,
        reason,
        recent_rejections,
        worthwhile_tokens,
        budget_for_next_turn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::{TermProfile, TurnAnchors};

    fn user(id: i64, tokens: u32) -> (i64, Role, u32) {
        (id, Role::User, tokens)
    }

    fn facts(turns: &[(i64, Role, u32)], anchor: &str) -> Vec<TurnFacts> {
        turns
            .iter()
            .map(|&(id, role, tokens)| TurnFacts {
                id,
                role,
                tokens,
                anchors: TurnAnchors::Given(vec![anchor.to_owned()]),
                pinned: false,
                profile: TermProfile::default(),
            })
            .collect()
    }

    /// One token per character: easy to count in the cases.
    fn chars(text: &str) -> u32 {
        text.chars().count() as u32
    }

    fn plan_of(turns: Vec<(i64, Role, u32)>, budget: i64, rejections: Rejections) -> Plan {
        let policy = Policy::default();
        let reach = reach(turns[0].0, turns.clone(), budget, &policy);
        plan(
            &reach,
            &facts(&turns, "ZFA04Y"),
            budget,
            rejections,
            &policy,
            chars,
        )
    }

    #[test]
    fn advice_follows_the_range_the_budget_and_the_rejections() {
        struct Case {
            name: &'static str,
            turns: Vec<(i64, Role, u32)>,
            budget: i64,
            rejections: Rejections,
            to: Option<i64>,
            advice: Advice,
            reason: AdviceReason,
            recent: u32,
        }
        let none = Rejections::default();
        let three_from_0 = Rejections {
            from: Some(0),
            streak: 3,
        };
        let cases = [
            Case {
                name: "a range of the budget is worth compacting",
                turns: vec![user(0, 50), user(1, 50)],
                budget: 100,
                rejections: none,
                to: Some(1),
                advice: Advice::Compact,
                reason: AdviceReason::Fits,
                recent: 0,
            },
            Case {
                name: "one token short of the budget waits",
                turns: vec![user(0, 50), user(1, 49)],
                budget: 100,
                rejections: none,
                to: Some(1),
                advice: Advice::Wait,
                reason: AdviceReason::RangeTooSmall,
                recent: 0,
            },
            Case {
                name: "a first turn over the ceiling needs a bigger budget",
                turns: vec![user(0, 501), user(1, 10)],
                budget: 100,
                rejections: none,
                to: None,
                advice: Advice::RaiseBudget,
                reason: AdviceReason::FirstTurnOverBudget,
                recent: 0,
            },
            Case {
                name: "three rejections from this from wait",
                turns: vec![user(0, 300)],
                budget: 100,
                rejections: three_from_0,
                to: Some(0),
                advice: Advice::Wait,
                reason: AdviceReason::RecentRejections,
                recent: 3,
            },
            Case {
                name: "two rejections do not",
                turns: vec![user(0, 300)],
                budget: 100,
                rejections: Rejections {
                    from: Some(0),
                    streak: 2,
                },
                to: Some(0),
                advice: Advice::Compact,
                reason: AdviceReason::Fits,
                recent: 2,
            },
            Case {
                name: "rejections from another from do not count",
                turns: vec![(5, Role::User, 300)],
                budget: 100,
                rejections: three_from_0,
                to: Some(5),
                advice: Advice::Compact,
                reason: AdviceReason::Fits,
                recent: 0,
            },
            Case {
                name: "a budget too small wins over rejections",
                turns: vec![user(0, 600)],
                budget: 100,
                rejections: three_from_0,
                to: None,
                advice: Advice::RaiseBudget,
                reason: AdviceReason::FirstTurnOverBudget,
                recent: 3,
            },
        ];
        for case in cases {
            let plan = plan_of(case.turns, case.budget, case.rejections);
            assert_eq!(
                (plan.to, plan.advice, plan.reason, plan.recent_rejections),
                (case.to, case.advice, case.reason, case.recent),
                "{}",
                case.name
            );
            assert_eq!(plan.worthwhile_tokens, case.budget as u64, "{}", case.name);
        }
    }

    #[test]
    fn the_range_stops_before_the_turn_that_crosses_the_ceiling() {
        let turns = vec![user(3, 250), user(4, 250), (5, Role::Tool, 3)];
        let plan = plan_of(turns, 100, Rejections::default());
        assert_eq!(
            (plan.to, plan.prefix_tokens, plan.required_budget),
            (Some(4), 500, 100)
        );
        assert_eq!(
            plan.anchor_tokens, 14,
            "two anchors of 6 tokens, a separator each"
        );
    }

    #[test]
    fn the_range_stops_where_its_anchors_would_take_over_half_the_budget() {
        // Each turn's anchor takes 7 tokens: half of a 40-token budget holds two of them.
        let turns: Vec<_> = (0..5).map(|id| user(id, 10)).collect();
        let plan = plan_of(turns.clone(), 40, Rejections::default());
        assert_eq!(
            (plan.to, plan.anchor_tokens, plan.prefix_tokens),
            (Some(1), 14, 20)
        );
        // The first turn stays even when its anchors alone are over the share.
        let plan = plan_of(turns, 10, Rejections::default());
        assert_eq!((plan.to, plan.anchor_tokens), (Some(0), 7));
    }

    #[test]
    fn a_range_too_small_because_its_next_turn_does_not_fit_advises_raising_the_budget() {
        // Cut by the ceiling: a 5,000-token tool output after a 50-token question.
        let turns = vec![user(0, 50), (1, Role::Tool, 5_000), user(2, 50)];
        let plan = plan_of(turns.clone(), 100, Rejections::default());
        assert_eq!(
            (plan.to, plan.advice, plan.reason),
            (
                Some(0),
                Advice::RaiseBudget,
                AdviceReason::NextTurnOverBudget
            )
        );
        let raised = plan
            .budget_for_next_turn
            .expect("the budget that takes turn 1");
        assert_eq!(
            plan_of(turns.clone(), raised as i64, Rejections::default()).to,
            Some(1)
        );
        assert_eq!(
            plan_of(turns, raised as i64 - 1, Rejections::default()).to,
            Some(0)
        );

        // Cut by the anchors' share: 20 tokens of a 40-token budget, two anchors of 7 each.
        let turns: Vec<_> = (0..5).map(|id| user(id, 10)).collect();
        let plan = plan_of(turns.clone(), 40, Rejections::default());
        assert_eq!(
            (plan.to, plan.advice, plan.budget_for_next_turn),
            (Some(1), Advice::RaiseBudget, Some(42))
        );
        assert_eq!(
            plan_of(turns.clone(), 42, Rejections::default()).to,
            Some(2)
        );
        assert_eq!(plan_of(turns, 41, Rejections::default()).to, Some(1));
    }

    #[test]
    fn a_worthwhile_range_cut_by_the_budget_says_what_its_next_turn_needs_and_compacts() {
        let turns = vec![user(3, 250), user(4, 250), (5, Role::Tool, 3)];
        let plan = plan_of(turns.clone(), 100, Rejections::default());
        assert_eq!(plan.advice, Advice::Compact);
        let raised = plan.budget_for_next_turn.expect("turn 5 did not fit");
        assert_eq!(
            plan_of(turns, raised as i64, Rejections::default()).to,
            Some(5)
        );
        // Exactly the budget's worth is worth a summary, whatever follows.
        let plan = plan_of(
            vec![user(0, 100), (1, Role::Tool, 5_000)],
            100,
            Rejections::default(),
        );
        assert_eq!((plan.to, plan.advice), (Some(0), Advice::Compact));
    }

    #[test]
    fn a_range_that_reaches_the_end_of_the_log_has_no_next_turn_to_budget_for() {
        let plan = plan_of(vec![user(0, 50), user(1, 49)], 100, Rejections::default());
        assert_eq!(
            (plan.advice, plan.reason, plan.budget_for_next_turn),
            (Advice::Wait, AdviceReason::RangeTooSmall, None)
        );
        let plan = plan_of(vec![user(0, 600)], 100, Rejections::default());
        assert_eq!((plan.to, plan.budget_for_next_turn), (None, None));
    }
}
