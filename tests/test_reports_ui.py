"""Issue 43 §6 in headless Chromium against the real server over HTTPS: the Reports page shows a person's first
response as a figure of its own (the bot's handoff message does not hide it), heads its data tables with words
that are not clipped, names the responders (a user's name, else the email), and gives a series the same colour on
every chart where it means the same thing (and different colours for different things on one chart)."""
from datetime import datetime, timedelta, timezone

import pytest

from tests import db_direct
from tests.parley_process import ParleyProcess
from tests.report_seed import Seeder, recent_on_one_day, seed_history
from tests.ui_helpers import sign_in

# Legend labels that mean one thing: one colour for all of them, wherever they show.
SAME = [("failed", "failed attempts"), ("opted out",), ("replies", "messages in")]


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    with ParleyProcess(tmp_path_factory.mktemp("reports-ui") / "data") as process:
        yield process


def test_browser_reports_page_shows_a_persons_first_response_names_and_one_colour_per_meaning(page, parley):
    account_id = parley.first_run["account_id"]
    cx = db_direct.connect(parley)
    at = recent_on_one_day(timedelta(hours=1), timedelta(minutes=5))
    first = seed_history(cx, account_id, days=5, end=at).date()  # up to the day before at's: that day is at's alone
    seeder = Seeder(cx, account_id, user_names=("mia",), seed=5)
    contact = seeder.contact(at, "Handed off")
    seeder.message(contact, at, "inbound", "contact", outcome="handoff")
    seeder.message(contact, at + timedelta(seconds=1), "outbound", "bot")
    seeder.message(contact, at + timedelta(minutes=5), "outbound", "user", user_id=seeder.users[0])
    cx.close()
    today = datetime.now(timezone.utc).date()

    sign_in(page, parley)
    page.goto(parley.base + f"/reports?from={at.date()}&to={at.date()}")
    figure = page.inner_text("#people-first-response")
    assert figure.startswith("A person's first response: 5 min median"), figure  # bucketed: 312 s reads 5 min
    page.goto(parley.base + f"/reports?from={first}&to={today}")
    assert "A person's first response:" in page.inner_text("#people-first-response")

    # Responders by name: the bot, all people, a named user by name, one without a name by email.
    labels = page.evaluate("""() => [...document.querySelectorAll('#report-first-response svg text.axis')]
        .map(text => text.firstChild.textContent)""")  # the label shown, not its <title>
    assert labels[:2] == ["Bot", "All people"] and "Ana Silva" in labels and "Mia Silva" in labels
    assert any(label.startswith("raj.") for label in labels), labels  # no name: the email (shortened to fit)

    # The data tables: headed in words, none clipped.
    for summary in page.locator("section.report details summary").all():
        summary.click()
    heads = page.locator("#report-first-response th").all_inner_texts()
    assert heads == ["Responder id", "Responder", "First responses", "Median time", "9 in 10 within"]
    clipped = page.evaluate("""() => [...document.querySelectorAll('.report-data th')]
        .filter(th => th.scrollWidth > th.clientWidth + 1).map(th => th.textContent)""")
    assert clipped == []

    # Colours: each legend swatch's computed fill, by chart and label.
    swatches = page.evaluate("""() => [...document.querySelectorAll('section.report')].flatMap(section =>
        [...section.querySelectorAll('text.legend')].map(text => [section.id, text.textContent,
            getComputedStyle(text.previousElementSibling).fill]))""")
    fill = {}
    for chart, label, colour in swatches:
        assert colour not in ("", "none", "rgb(0, 0, 0)"), (chart, label)
        fill.setdefault(label, set()).add(colour)
    assert all(len(colours) == 1 for colours in fill.values()), fill  # one label, one colour on every chart
    for group in SAME:
        assert len({c for label in group for c in fill[label]}) == 1, group
    for chart in {c for c, _, _ in swatches}:
        colours = [colour for c, _, colour in swatches if c == chart]
        assert len(colours) == len(set(colours)), chart  # different things, different colours
    assert page.console_errors == []
