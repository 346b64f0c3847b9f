"""Time expressions in queries become periods; a moment is in them or not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.when import DAY_MS, DEFAULT_SLACK_MS, Period, in_periods, query_periods, utc_moment

NOW = int(datetime(2024, 3, 15, 12, tzinfo=UTC).timestamp() * 1000)


def ms(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


def test_a_full_date_is_a_day_with_slack_after_it() -> None:
    """Day-month-year and month-day-year both name the day, widened around it."""
    for query in (
        "What did she paint on 13 October, 2023?",
        "on October 13th, 2023 what",
        "the 13th of October 2023",
    ):
        assert query_periods(query, NOW) == [
            Period(ms(2023, 10, 13) - DAY_MS, ms(2023, 10, 14) + DEFAULT_SLACK_MS // 2)
        ]


def test_a_month_and_year_cover_the_month_and_two_weeks_after() -> None:
    """People talk about an event after it happened."""
    (period,) = query_periods("What workout did Maria start in December 2023?", NOW)
    assert (period.start_ms, period.end_ms) == (ms(2023, 12, 1), ms(2024, 1, 1) + DEFAULT_SLACK_MS)


def test_a_bare_year_and_a_bare_month() -> None:
    """A year is that year; a month without a year is that month of any year."""
    assert query_periods("beach trips in 2022", NOW) == [
        Period(ms(2022, 1, 1), ms(2023, 1, 1) + DEFAULT_SLACK_MS)
    ]
    assert query_periods("When did they go camping in June?", NOW) == [Period(month=6)]


def test_may_alone_is_a_verb_and_junk_is_nothing() -> None:
    """'may' without a day or year, impossible dates and plain text name no period."""
    assert query_periods("May I ask what you may know?", NOW) == []
    assert query_periods("on 31 February 2023", NOW) == []
    assert query_periods("nothing about time here", NOW) == []


def test_relative_expressions_count_back_from_now() -> None:
    """yesterday, last week and N days ago are measured from now_ms."""
    assert query_periods("what did we decide yesterday", NOW) == [Period(ms(2024, 3, 14), ms(2024, 3, 15))]
    (week,) = query_periods("the bug from last week", NOW)
    assert week.start_ms == ms(2024, 3, 1) and week.end_ms == NOW + 1
    (ago,) = query_periods("what I said 4 days ago", NOW)
    assert ago.start_ms <= ms(2024, 3, 11) < ago.end_ms


def test_in_periods_checks_ranges_and_months_of_any_year() -> None:
    """A range is half-open; a month also takes the slack into the next month."""
    periods = [Period(ms(2023, 5, 1), ms(2023, 6, 1)), Period(month=8)]
    assert in_periods(ms(2023, 5, 1), periods)
    assert not in_periods(ms(2023, 6, 1), periods)
    assert in_periods(ms(2019, 8, 20), periods)
    assert in_periods(ms(2019, 9, 10), periods)
    assert not in_periods(ms(2019, 9, 20), periods)
    assert not in_periods(ms(2019, 8, 20), [])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_at_most_eight_sane_periods(query: str) -> None:
    """Arbitrary input never raises and every range is non-empty."""
    periods = query_periods(query, NOW)
    assert len(periods) <= 8
    assert all(p.month is not None or p.start_ms < p.end_ms for p in periods)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_any_64_bit_time_has_a_moment(ts: int) -> None:
    """Every int64 of ms is a UTC moment: itself within the years 1 to 9999, else the nearest end."""
    moment = utc_moment(ts)
    assert moment.tzinfo is UTC
    if ms(1, 1, 1) <= ts < ms(9999, 12, 31) + DAY_MS:
        assert moment == datetime.fromtimestamp(0, tz=UTC) + timedelta(milliseconds=ts)
    else:
        assert moment.year in (1, 9999)


def test_a_moment_is_exact_to_the_millisecond() -> None:
    """utc_moment is the same moment fromtimestamp gives, milliseconds included, before 1970 too."""
    for ts in (NOW + 123, -1, -86_400_001, 0):
        assert utc_moment(ts) == datetime.fromtimestamp(ts / 1000, tz=UTC)
