"""The fixed pieces of the Reports' summaries, shared by the fold (storage/report_fold.py, in the writer) and
the reports (services/reports.py): the first-response histogram's buckets and the bot outcomes' groups."""
import bisect
from collections.abc import Mapping

# Bucket upper edges in whole seconds: every second up to 10, then steps of at most 10% (a bucket's edge is
# at most 1.1 times its lower edge + 1 s), up to 30 days; one more bucket holds anything longer.
def _edges() -> tuple[int, ...]:
    edges, edge = [0], 1
    while edge < 30 * 86400:
        edges.append(edge)
        edge = max(edge + 1, int(edge * 1.1))
    edges.append(30 * 86400)
    return tuple(edges)


EDGES = _edges()
OVERFLOW = len(EDGES)  # the bucket past the last edge


def bucket_of(seconds: float) -> int:
    """The bucket of a response time: the first whose upper edge is >= seconds (ceil to whole seconds)."""
    whole = -int(-seconds // 1)
    return bisect.bisect_left(EDGES, max(whole, 0))


def bucket_value(bucket: int) -> int:
    """What a bucket reports: its upper edge in seconds (the overflow bucket reports the last edge)."""
    return EDGES[min(bucket, OVERFLOW - 1)]


def percentile(counts: Mapping[int, int], fraction: float) -> int | None:
    """The nearest-rank percentile of a histogram {bucket: count}: the upper edge of the bucket holding the
    ceil(fraction * n)-th smallest value, or None when it is empty."""
    total = sum(counts.values())
    if not total:
        return None
    rank, seen = max(1, -int(-fraction * total // 1)), 0
    for bucket in sorted(counts):
        seen += counts[bucket]
        if seen >= rank:
            return bucket_value(bucket)
    return None


# Bot outcomes (services/bot.py OUTCOMES) in the Reports' groups; anything else counts as "other".
OUTCOME_GROUPS = {"rule": "rule", "greeting": "rule", "fallback": "rule", "provider": "provider",
                  "handoff": "handoff", "provider_failed": "failed", "not_sent": "failed", "busy": "failed",
                  "no_credits": "failed"}
GROUPS = ("rule", "provider", "handoff", "failed", "other")


def outcome_group(outcome: str) -> str:
    return OUTCOME_GROUPS.get(outcome, "other")
