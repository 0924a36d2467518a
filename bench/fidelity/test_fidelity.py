"""Checks of the benchmark's own parts (no service needed):

    bench/fidelity/.venv/bin/python -m unittest discover -s bench/fidelity
"""

import unittest
from collections import Counter

import agent
import data
import oracle
import summarizer as S
import tokens
from service import Answer


class TokensTest(unittest.TestCase):
    def test_counts_like_the_service(self):
        # The service's own README example: 23 and 16 tokens.
        self.assertEqual(tokens.count("I want to cancel reservation ZFA04Y, flight HAT170 on 2024-05-15."), 23)
        self.assertEqual(tokens.count("Done: ZFA04Y is cancelled and 312 USD will be refunded."), 16)

    def test_head_cuts_at_the_budget(self):
        text = "one two three four five six seven"
        self.assertEqual(tokens.count(tokens.head(text, 3)), 3)
        self.assertEqual(tokens.head(text, 100), text)


class DataTest(unittest.TestCase):
    def test_tool_calls_render_as_the_cli_does(self):
        turn = {"role": "assistant", "content": "", "tool_calls": [
            {"name": "get_user_details", "arguments": '{"user_id": "mia_li_3668"}'},
            {"name": "think", "arguments": {"thought": "x"}}]}
        self.assertEqual(data.render(turn), 'get_user_details({"user_id": "mia_li_3668"})\nthink({"thought":"x"})')
        self.assertEqual(data.render({"role": "user", "content": "hi", "tool_calls": []}), "hi")

    def test_sessions_keep_one_system_prompt_and_fold_the_tail(self):
        conv = lambda name, n: {"conversation": name, "turns": [{"role": "system", "content": "policy"}] + [
            {"role": "user", "content": f"{name} {i}"} for i in range(n)]}
        sessions = data.build_sessions([conv("a", 3), conv("b", 3), conv("c", 5), conv("d", 2)], min_turns=6)
        # a+b: 1 system + 6 turns; c: 1 system + 5; d's 2 turns are too few and join c's session.
        self.assertEqual([len(s.turns) for s in sessions], [7, 8])
        self.assertEqual([s.conversations for s in sessions], [("a", "b"), ("c", "d")])
        for s in sessions:
            self.assertEqual(Counter(t.role for t in s.turns)["system"], 1)
            self.assertEqual(s.turns[0].role, "system")


class OracleTest(unittest.TestCase):
    def test_content_words(self):
        words = oracle.content_words("Hi! Thanks, please cancel ZFA04Y on 2024-05-15 for 12 USD, ok? user_id mia_li_3668")
        self.assertEqual(words, ["cancel", "zfa04y", "2024-05-15", "usd", "user_id", "mia_li_3668"])

    def test_rarest_word_is_the_key_fact(self):
        facts = oracle.session_facts(["cancel flight HAT170", "cancel flight", "flight flight status"])
        self.assertEqual(facts[0][0], "hat170")
        self.assertEqual(facts[1], ["cancel", "flight"])
        self.assertEqual(facts[2], ["status", "flight"])

    def test_fact_in_needs_word_edges(self):
        self.assertTrue(oracle.fact_in("zfa04y", "user: cancel zfa04y."))
        self.assertFalse(oracle.fact_in("312", "refund 3120 usd"))
        self.assertTrue(oracle.fact_in("2024-05-15", "on 2024-05-15, flight"))


class SummarizerTest(unittest.TestCase):
    turns = [S.RangeTurn(i, "user" if i % 2 else "assistant",
                         f"Reservation R{i:04d} for passenger number {i} flies from JFK to SEA, and the fare is {100 + i} dollars")
             for i in range(60)]

    def test_planned_stays_under_the_budget_and_ends_a_sentence(self):
        out = S.planned(S.Summarizer(), self.turns, 200)
        self.assertLess(tokens.count(out.text), 200)
        self.assertTrue(out.text.endswith("."))
        self.assertEqual(out.finish_reason, "stop")

    def test_naive_is_cut_at_the_budget(self):
        out = S.naive(S.Summarizer(), self.turns, 200)
        self.assertEqual(tokens.count(out.text), 200)
        self.assertEqual(out.finish_reason, "length")

    def test_anchored_keeps_anchors_first(self):
        anchors = {i: [f"R{i:04d}"] for i in range(60)}
        out = S.anchored(S.Summarizer(), self.turns, 200, anchors)
        kept = sum(S.has_anchor(out.text, a[0]) for a in anchors.values())
        lines = out.text.count("\n") + 1
        self.assertEqual(kept, lines)  # every fragment taken carried its turn's anchor

    def test_long_json_is_cut_into_fragments(self):
        text = ", ".join(f'"k{i}": "value {i}"' for i in range(50))
        frags = S.fragments([S.RangeTurn(0, "tool", text)])
        self.assertGreater(len(frags), 3)
        self.assertTrue(all(len(f.text) <= S.MAX_FRAGMENT_CHARS for f in frags))


class FakeClient:
    """Answers plans from a script, accepts every proposal: the orchestrator's side only."""

    def __init__(self, plans):
        self.plans = list(plans)
        self.posted = []
        self.planned_budgets = []

    def get(self, path):
        if "compaction-plan" in path:
            self.planned_budgets.append(int(path.rsplit("=", 1)[1]))
            return Answer(200, self.plans.pop(0))
        raise AssertionError(path)

    def post(self, path, body, idempotency_key=None):
        self.posted.append(body)
        return Answer(201, {"outcome": "accepted", "checkpoint_id": len(self.posted), "covered": [[body["from"], body["to"]]]})


class OrchestratorTest(unittest.TestCase):
    """The plan's `advice` and `turns` (since issue 11) as the orchestrator reads them."""

    session = data.Session(0, ("x",), tuple(data.Turn("user", f"Book flight HAT{i:03d} today.") for i in range(30)))

    def orchestrator(self, strategy, plans):
        o = agent.Orchestrator(FakeClient(plans), S.Summarizer(), strategy, self.session)
        for i, t in enumerate(self.session.turns):
            o.run.texts.append(t.text)
            o.run.roles.append(t.role)
            o.run.tokens.append(tokens.count(t.text))
            o.run.anchors.append([f"HAT{i:03d}"])
        return o

    def test_wait_advice_pauses(self):
        o = self.orchestrator("planned", [{"from": 0, "to": 3, "advice": "wait", "advice_reason": "too_small"}])
        o.compact(20)
        self.assertEqual(o.client.posted, [])
        self.assertEqual(o.run.pauses, {"advice_wait": 1})
        self.assertEqual(o.paused_until, 20 + 1 + agent.WAIT_TURNS)

    def test_raise_budget_plans_again_with_more(self):
        o = self.orchestrator("planned", [
            {"from": 0, "to": None, "advice": "raise_budget", "required_budget": 1500},
            {"from": 0, "to": 2, "advice": "compact", "required_budget": 1500}])
        o.compact(20)
        self.assertEqual(o.client.planned_budgets, [agent.BUDGET, 2048])
        self.assertEqual(o.client.posted[0]["summary_budget"], 2048)
        self.assertEqual(o.run.budget_raises, 1)

    def test_empty_plan_pauses(self):
        o = self.orchestrator("planned", [{"from": 0, "to": None}])
        o.compact(20)
        self.assertEqual(o.run.pauses, {"plan_empty": 1})

    def test_anchored_takes_the_plans_anchors(self):
        plan = {"from": 0, "to": 2, "advice": "compact",
                "turns": [{"id": 0, "anchors": ["today"]}, {"id": 1, "anchors": []}, {"id": 2, "anchors": ["HAT002"]}]}
        o = self.orchestrator("anchored", [plan])
        self.assertEqual(o.anchors_for(plan, 0, 2), {0: ["today"], 1: [], 2: ["HAT002"]})
        self.assertEqual(o.anchors_for({"from": 0, "to": 1}, 0, 1), {0: ["HAT000"], 1: ["HAT001"]})
        o.compact(20)
        body = o.client.posted[0]
        self.assertEqual((body["from"], body["to"], body["finish_reason"]), (0, 2, "stop"))
        self.assertNotIn("consumed", body)


if __name__ == "__main__":
    unittest.main()
