"""The coverage map (/ui) in Chromium: the key prompt, the strip and its bands drawn to scale in
the status colours reconstruct answers, clicks that open the right turn with its summary and
evidence or its missing anchors, the list page, a keyless service, and 10,000 turns. Run by
.ci/ui.sh; fixtures in conftest.py."""

import os
import socket
import subprocess
import tempfile
import time

from conftest import BIN, KEY, URL, Watched, ok, rest

STRIP_H = 44  # map.js: the strip's height below the bands
BAND_H = 16
COLOURS = {"live": (0x9A, 0xA5, 0xB1), "summary": (0x2E, 0x9D, 0x5B), "raw_log": (0xD9, 0x82, 0x2B),
           "pinned": (0x7B, 0x52, 0xC7)}
BAND = (0x3B, 0x4A, 0x5A)


def status_of(answer, turn):
    """The colour reconstruct's answer calls for; a pinned turn no checkpoint spans is pinned."""
    pinned = answer["reason"] == "pinned" or (turn["pinned"] and answer["source"] == "live")
    return "pinned" if pinned else answer["source"]


def open_map(page, name):
    page.goto(f"{URL}/ui/conversations/{name}")
    page.locator("body[data-state=ready]").wait_for(timeout=120_000)


def span(page, which, t):
    return page.evaluate("([w, t]) => window.coverageMap.spanOf(w, t)", [which, t])


def pixel(page, which, x, y):
    return tuple(page.evaluate(
        "([w, x, y]) => Array.from(document.getElementById(w).getContext('2d').getImageData(x, y, 1, 1).data)",
        [which, int(x), int(y)])[:3])


def click_turn(page, which, t):
    """A real mouse click at the middle of where turn `t` is drawn."""
    s = span(page, which, t)
    box = page.locator(f"#{which}").bounding_box()
    page.mouse.click(box["x"] + s["x"] + s["width"] / 2, box["y"] + s["top"] + STRIP_H / 2)
    return s


def test_the_key_prompt_asks_once_re_asks_after_a_refused_key_and_keeps_the_key_for_the_tab(watched, tau):
    page = watched.page
    page.goto(f"{URL}/ui/conversations/{tau['name']}")
    page.locator("#key-dialog[open]").wait_for()
    assert page.text_content("#key-message") == "This service needs an API key."
    page.fill("#key-input", "not-the-key")
    page.click("#key-form button")
    page.locator("#key-message", has_text="That key was refused").wait_for()
    assert page.evaluate("document.getElementById('key-dialog').open")
    page.fill("#key-input", KEY)
    page.click("#key-form button")
    page.locator("body[data-state=ready]").wait_for()
    assert page.evaluate("sessionStorage.getItem('gatekeeper-api-key')") == KEY
    # Each prompt followed exactly one refused request: no request was sent twice without a key.
    assert len(watched.errors) == 2 and all("401" in e for e in watched.errors), watched.errors
    page.reload()
    page.locator("body[data-state=ready]").wait_for()
    assert not page.evaluate("document.getElementById('key-dialog').open")
    assert len(watched.errors) == 2, watched.errors


def test_every_turn_is_drawn_to_scale_in_the_colour_reconstruct_answers_for_it(page, tau):
    open_map(page, tau["name"])
    n, turns, truth = tau["n"], tau["turns"], tau["truth"]
    width = page.evaluate("document.getElementById('overview').clientWidth")
    total = sum(max(1, t["tokens"]) for t in turns)
    spans = [span(page, "overview", t) for t in range(n)]
    assert abs(sum(s["width"] for s in spans) - width) < 0.01
    seen = set()
    for t, s in enumerate(spans):
        expected = status_of(truth[t], turns[t])
        assert page.evaluate(f"window.coverageMap.statusOf({t})") == expected, t
        assert abs(s["width"] - width * max(1, turns[t]["tokens"]) / total) < 0.01, (t, s)
        if s["width"] >= 3:
            assert pixel(page, "overview", s["x"] + s["width"] / 2, s["top"] + STRIP_H / 2) == COLOURS[expected], t
            seen.add(expected)
    assert seen == set(COLOURS), seen  # the fixture makes turns of every status
    for v in tau["verdicts"]:
        # Its band spans [from, advanced_to], above the strip (sampled right of its label).
        right = spans[v["advanced_to"]]["x"] + spans[v["advanced_to"]]["width"] - 3
        assert pixel(page, "overview", right, 2 + (BAND_H - 4) / 2) == BAND, v["checkpoint_id"]
    legend = page.text_content("#legend")
    covered = sum(1 for a in truth if a["source"] == "summary")
    assert f"summary: {covered} turns" in legend and "pinned: 2 pinned" in legend, legend


def test_a_click_on_a_covered_turn_shows_the_turn_and_its_summary_with_the_evidence_highlighted(page, tau):
    open_map(page, tau["name"])
    covered = [t for t, a in enumerate(tau["truth"]) if a["source"] == "summary"]
    t = max(covered, key=lambda t: tau["turns"][t]["tokens"])
    click_turn(page, "overview", t)
    page.locator(f"#detail[data-turn='{t}'][data-source=summary]").wait_for()
    answer = tau["truth"][t]
    assert page.text_content("#turn-text") == tau["turns"][t]["content"]
    assert page.text_content("#summary-text") == answer["text"]
    chars = list(answer["text"])
    expected = {"".join(chars[e["start"] : e["end"]]) for e in answer["evidence"]}
    marks = page.locator("#summary-text mark.evidence").all_text_contents()
    assert marks and set(marks) == expected, (marks, expected)
    assert f"Turn {t}" in page.text_content("#detail-title")


def test_a_click_on_an_uncovered_turn_in_the_lens_shows_its_raw_text_and_the_missing_anchors(page, tau):
    open_map(page, tau["name"])
    first = tau["verdicts"][0]
    detail = next(d for d in first["turns"] if d["reason"] == "anchor_missing" and d["missing_anchors"])
    u = detail["id"]
    click_turn(page, "overview", u)  # centres the lens on it
    page.locator(f"#detail[data-turn='{u}']").wait_for()
    page.locator("#detail").evaluate("d => delete d.dataset.turn")
    click_turn(page, "lens", u)
    page.locator(f"#detail[data-turn='{u}'][data-source=raw_log]").wait_for()
    assert page.text_content("#turn-text") == tau["turns"][u]["content"]
    assert page.locator("#missing-anchors li").all_text_contents() == detail["missing_anchors"]
    assert "(anchor_missing)" in page.text_content("#detail-facts")
    said = [a.lower() for a in detail["missing_anchors"] if a.lower() in tau["turns"][u]["content"].lower()]
    marks = [m.lower() for m in page.locator("#turn-text mark.missing").all_text_contents()]
    assert set(said) == set(marks), (said, marks)
    if os.environ.get("UI_SCREENSHOT"):
        page.screenshot(path=os.environ["UI_SCREENSHOT"], full_page=True)


def test_the_pinned_turn_and_a_live_turn_say_what_they_are(page, tau):
    open_map(page, tau["name"])
    click_turn(page, "overview", tau["pinned"])
    page.locator(f"#detail[data-turn='{tau['pinned']}'][data-source=raw_log]").wait_for()
    facts = page.text_content("#detail-facts")
    assert "raw_log (pinned)" in facts and "pinnedyes" in facts, facts
    # Pinned with no checkpoint spanning it: drawn pinned, answered live.
    p = tau["pinned_live"]
    assert page.evaluate(f"window.coverageMap.statusOf({p})") == "pinned"
    click_turn(page, "overview", p)
    page.locator(f"#detail[data-turn='{p}'][data-source=live]").wait_for()
    facts = page.text_content("#detail-facts")
    assert "sourcelive" in facts and "pinnedyes" in facts, facts
    live = tau["n"] - 1
    click_turn(page, "overview", live)
    page.locator(f"#detail[data-turn='{live}'][data-source=live]").wait_for()
    assert page.text_content("#turn-text") == tau["turns"][live]["content"]


def test_a_click_on_a_band_shows_its_checkpoint(page, tau):
    open_map(page, tau["name"])
    v = tau["verdicts"][1]
    s = span(page, "overview", v["advanced_to"])
    box = page.locator("#overview").bounding_box()
    page.mouse.click(box["x"] + s["x"] + s["width"] - 3, box["y"] + 6)
    page.locator(f"#detail[data-checkpoint='{v['checkpoint_id']}']").wait_for()
    assert page.text_content("#summary-text").startswith(tau["turns"][v["from"]]["content"][:40])


def test_the_list_page_lists_the_conversations_and_opens_one_by_name(page, tau):
    page.goto(f"{URL}/ui/")
    page.locator("body[data-state=ready]").wait_for()
    names = page.locator("#conversations tbody a").all_text_contents()
    assert tau["name"] in names, names
    row = page.locator("#conversations tbody tr", has_text=tau["name"])
    assert row.locator("td").nth(1).text_content() == str(tau["n"])
    assert row.locator("td").nth(2).text_content() == f"#{tau['verdicts'][1]['checkpoint_id']}"
    page.fill("#prefix", "no-such-prefix-")
    page.click("#filter-form button")
    page.locator("#list-note", has_text="No conversations").wait_for()
    page.fill("#open-name", tau["name"])
    with page.expect_navigation():
        page.click("#open-form button")
    page.locator("body[data-state=ready]").wait_for()
    assert page.text_content("#title") == tau["name"]


def test_a_conversation_that_does_not_exist_shows_the_services_problem(watched):
    watched.log_in("/ui/conversations/no-such-conversation", state="error")
    assert "no-such-conversation" in watched.page.text_content("#error")
    # The browser reports the 404 itself; nothing else went wrong.
    assert len(watched.errors) == 1 and "404" in watched.errors[0], watched.errors
    watched.errors.clear()


def test_a_service_without_keys_is_used_on_loopback_without_a_prompt(browser):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as data:
        env = {k: v for k, v in os.environ.items() if k != "GATEKEEPER_API_KEYS"}
        env.update(GATEKEEPER_DATA_DIR=data, DATABASE_URL="")
        server = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{port}"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(100):
                if _ready(url):
                    break
                time.sleep(0.1)
            ok("POST", "/v1/conversations/keyless/turns", {"turns": [{"role": "user", "content": "Hello there"}]},
               key=None, url=url)
            w = Watched(browser)
            w.page.goto(f"{url}/ui/conversations/keyless")
            w.page.locator("body[data-state=ready]").wait_for()
            assert not w.page.evaluate("document.getElementById('key-dialog').open")
            assert "1 turns" in w.page.text_content("#facts")
            assert w.errors == [], w.errors
            w.context.close()
        finally:
            server.terminate()
            server.wait()


def _ready(url):
    try:
        return rest("GET", "/healthz", key=None, url=url)[0] == 200
    except OSError:
        return False


def test_ten_thousand_turns_draw_at_once_and_a_click_in_the_lens_opens_the_exact_turn(page, big):
    started = time.monotonic()
    open_map(page, big["name"])
    wall = (time.monotonic() - started) * 1000
    own = page.evaluate("document.body.dataset.drawMs")
    facts = page.text_content("#facts")
    print(f"\n10,000 turns: ready {wall:.0f} ms after navigation (the page's own count {own} ms; {facts})")
    assert page.evaluate("window.coverageMap.turns") == big["n"]
    covered = sum(b - a + 1 for v in big["verdicts"] for a, b in v["covered"])
    uncovered = sum(b - a + 1 for v in big["verdicts"] for a, b in v["uncovered"])
    legend = page.text_content("#legend")
    assert f"summary: {covered} turns" in legend and f"raw_log: {uncovered - 1} turns" in legend, legend
    assert "pinned: 1 pinned" in legend and "live: 500 turns" in legend, legend
    assert "drawn from 22 requests" in facts, facts  # not one per turn: 3 + 19 checkpoints
    # The overview puts ~7 turns in a pixel; a click there opens one of them, the lens the exact one.
    click_turn(page, "overview", 5000)
    page.locator("#detail[data-turn]").wait_for()
    assert abs(int(page.get_attribute("#detail", "data-turn")) - 5000) <= 10
    target = int(page.get_attribute("#detail", "data-turn")) + 3
    click_turn(page, "lens", target)
    page.locator(f"#detail[data-turn='{target}']").wait_for()
    assert page.text_content("#turn-text") == big["texts"][target]["content"]
