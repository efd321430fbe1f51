"""Bot keyword matching at the limits (issue 18, item 1): what the compiled matcher (services/bot_match.py)
costs for one configuration at services/bot_settings.py's limits, measured in-process (no server).

Configurations: "spread": MAX_KEYWORDS handoff keywords and MAX_RULES rules sharing the rest of
MAX_TOTAL_KEYWORDS, each of MAX_KEYWORD_LENGTH / 4 characters; "overlapping": keywords built so that one position of the
text ends as many of them as the length limit allows ("a", "aa", ... each failing its word boundary: the
most checks a text can cause). Messages: MAX_MATCHED_CHARS of text with no keyword (the whole scan), a 65 KB
message (only its matched part is scanned), and the on-loop bound. Figures: the build (once per settings
save) and one match, median and max of repeated runs, in ms. Goal: a match the bot runs on the event loop
(work bound <= services.bot.MATCH_ON_LOOP_WORK) stays under 1 ms; longer ones go to a worker thread.
"""
import random
import statistics
import string
import time

NAME = "bot_matching"
TITLE = "Bot keyword matching at the limits"


def _timed(fn, repeat):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - started))
    return {"median_ms": round(statistics.median(times), 3), "max_ms": round(max(times), 3)}


def _configurations():
    from services import bot_settings as limits
    rng = random.Random(18)

    def word():
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(limits.MAX_KEYWORD_LENGTH // 4))

    rule_keywords = [word() for _ in range(limits.MAX_TOTAL_KEYWORDS - limits.MAX_KEYWORDS)]
    spread = ([word() for _ in range(limits.MAX_KEYWORDS)],
              [{"keywords": rule_keywords[i::limits.MAX_RULES], "answer": "x"} for i in range(limits.MAX_RULES)])
    chain = ["a" * n for n in range(1, limits.MAX_KEYWORD_LENGTH + 1)]
    overlapping = ([], [{"keywords": chain[i:i + limits.MAX_KEYWORDS], "answer": "x"}
                        for i in range(0, len(chain), limits.MAX_KEYWORDS)])
    return {"spread": spread, "overlapping": overlapping}


def measure(repeat=50):
    from services import bot, bot_match
    rng = random.Random(1)
    prose = " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
                     for _ in range(20000))
    results = {}
    for name, (handoff, rules) in _configurations().items():
        build = _timed(lambda: bot_match.Matcher(handoff, rules), 3)
        matcher = bot_match.Matcher(handoff, rules)
        worst = "a" * bot_match.MAX_MATCHED_CHARS if name == "overlapping" else prose
        on_loop = worst[:max(1, bot.MATCH_ON_LOOP_WORK // (1 + matcher.outputs_per_char))]
        results[name] = {
            "keywords": len(handoff) + sum(len(r["keywords"]) for r in rules), "build": build,
            "matched_part": _timed(lambda: matcher.first(worst[:bot_match.MAX_MATCHED_CHARS]), repeat),
            "message_65kb": _timed(lambda: matcher.first(prose[:65536]), repeat),
            "on_loop_chars": len(on_loop), "on_loop": _timed(lambda: matcher.first(on_loop), repeat),
        }
    return results


def run(ctx):
    return measure()


def render(r):
    lines = ["| Configuration | Keywords | Build ms | Match, matched part (median / max ms) | "
             "Match, 65 KB message | Largest on-loop match (chars: median / max ms) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, m in r.items():
        lines.append(f"| {name} | {m['keywords']} | {m['build']['median_ms']} | {m['matched_part']['median_ms']} / "
                     f"{m['matched_part']['max_ms']} | {m['message_65kb']['median_ms']} / {m['message_65kb']['max_ms']}"
                     f" | {m['on_loop_chars']}: {m['on_loop']['median_ms']} / {m['on_loop']['max_ms']} |")
    return lines


def goals(r):
    from bench.report import goal
    worst = max(m["on_loop"]["median_ms"] for m in r.values())
    return [goal("bot matching on the event loop, at the limits: median <= 1 ms", worst, 1.0, worst <= 1.0)]


if __name__ == "__main__":
    import json
    print(json.dumps(measure(), indent=2))
