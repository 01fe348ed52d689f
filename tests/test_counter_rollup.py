"""A finished day's COUNTER figures are computed once and kept; a month's Item Report adds up
its days. The figures stay those of the uses: a day a late batch reaches is computed again,
and a double-click across midnight counts twice either way (the user is a hash under the
day's salt: the same person is two users on either side of midnight)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from archive_service.stores import stats
from archive_service.stores.stats import counter

A = "a.example/x/2026/01.01.00.00"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
MIDNIGHT = datetime(2026, 1, 11, tzinfo=UTC).timestamp()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    clock = [MIDNIGHT - 10]
    if request.param == "sqlite":
        made = stats.Store(tmp_path, clock=lambda: clock[0])
    else:
        made = stats.PostgresStore(request.getfixturevalue("database_url"), lambda: clock[0])
    made.clock = clock
    yield made
    made.close()


def january(store: stats.Statistics) -> dict[str, int]:
    report = store.item_report(date(2026, 1, 1), date(2026, 1, 1), "P")
    (item,) = report["Report_Items"]
    return {m: v["2026-01"] for m, v in item["Attribute_Performance"][0]["Performance"].items()}


def rolled_days(store: stats.Statistics) -> set[str]:
    if isinstance(store, stats.Store):
        conn = store._connection()
        return {d for (d,) in conn.execute("SELECT day FROM uses_days_done")}
    from archive_service.common import postgres

    with postgres.autocommit(store.url) as conn:
        return {d for (d,) in conn.execute("SELECT day FROM stats_uses_days_done")}


def test_finished_days_are_kept_and_the_month_is_the_same(store):
    clock = store.clock

    def use(t: float) -> None:
        clock[0] = t
        store.record_use(stats.Seen(A, counter.REQUEST, "192.0.2.1", FIREFOX))

    use(MIDNIGHT - 10)  # 23:59:50
    use(MIDNIGHT + 5)  # 15 s later, the next day: another user, so not a double-click
    use(MIDNIGHT + 7200)
    use(MIDNIGHT + 7210)  # a double-click: one request
    expected = {
        "Total_Item_Investigations": 3,
        "Unique_Item_Investigations": 3,
        "Total_Item_Requests": 3,
        "Unique_Item_Requests": 3,
    }
    assert january(store) == expected
    assert rolled_days(store) == {"2026-01-10"}, "finished 2 h ago; the 11th is not"
    assert january(store) == expected, "a kept day and one computed"

    clock[0] = MIDNIGHT + 86400 + stats.ROLLUP_AFTER + 1  # both days finished
    assert january(store) == expected
    assert rolled_days(store) == {"2026-01-10", "2026-01-11"}
    assert january(store) == expected, "from the kept days"

    # A batch that reaches a finished day (kept while the store was down): that day again.
    use(MIDNIGHT + 3600)
    clock[0] = MIDNIGHT + 86400 + stats.ROLLUP_AFTER + 2
    store.flush()
    more = {k: v + 1 for k, v in expected.items()}
    assert january(store) == more
    assert rolled_days(store) == {"2026-01-10", "2026-01-11"}
    assert january(store) == more


def test_the_retention_purges_the_kept_days_too(tmp_path):
    clock = [MIDNIGHT]
    store = stats.Store(tmp_path, clock=lambda: clock[0], retention_days=2)
    store.record_use(stats.Seen(A, counter.REQUEST, "192.0.2.1", FIREFOX))
    clock[0] += 86400 + stats.ROLLUP_AFTER + 1
    assert january(store)["Total_Item_Requests"] == 1
    assert rolled_days(store) == {"2026-01-11"}
    clock[0] += 2 * 86400 + stats.PURGE_EVERY
    store.record_use(stats.Seen("b/c", counter.REQUEST, "192.0.2.1", FIREFOX))
    store.flush()
    assert rolled_days(store) == set()
    report = store.item_report(date(2026, 1, 1), date(2026, 1, 1), "P")
    assert [i["Item"] for i in report["Report_Items"]] == ["b/c"]
    store.close()


def test_a_store_from_before_access_types_takes_them(tmp_path):
    import sqlite3

    old = sqlite3.connect(tmp_path / stats.DB_FILE)
    old.execute(
        "CREATE TABLE uses (t REAL NOT NULL, ibi TEXT NOT NULL, kind TEXT NOT NULL, "
        "user TEXT NOT NULL, robot INTEGER NOT NULL)"
    )
    old.execute("INSERT INTO uses VALUES (?, ?, 'request', 'u', 0)", (MIDNIGHT, A))
    old.commit()
    old.close()
    store = stats.Store(tmp_path, clock=lambda: MIDNIGHT + 60)
    store.record_use(stats.Seen(A, counter.REQUEST, "192.0.2.1", FIREFOX, counter.CONTROLLED))
    report = store.item_report(date(2026, 1, 1), date(2026, 1, 1), "P")
    (item,) = report["Report_Items"]
    assert [a["Access_Type"] for a in item["Attribute_Performance"]] == ["Controlled", "Open"]
    store.close()


def test_a_month_reads_only_the_kept_days_it_asks(tmp_path):
    """The statistics page asks 12 months and 30 days of any `?month=`: a month with nothing
    kept must not read the figures kept for other days (SQLite walked every marked day's
    rows, then dropped those outside: issue 30's seventh pass, ~1 s a page at 100,000 rows).
    Counted in SQLite's VM steps, not in time."""
    import sqlite3
    from datetime import timedelta

    from archive_service.stores.stats import _days_from
    from archive_service.stores.stats.sqlite import SQLITE_DAYS

    store = stats.Store(tmp_path, clock=lambda: MIDNIGHT + 90 * 86400)
    store.record_use(stats.Seen(A, counter.REQUEST, "192.0.2.1", FIREFOX))
    store.close()
    kept = [(date(2026, 1, 1) + timedelta(days=n)).isoformat() for n in range(60)]
    conn = sqlite3.connect(tmp_path / stats.DB_FILE)
    conn.executemany(
        "INSERT INTO uses_days VALUES (?, ?, 'Open', 1, 1, 1, 1)",
        [(day, f"i{k}") for day in kept for k in range(100)],
    )
    conn.executemany("INSERT INTO uses_days_done VALUES (?, 100)", [(d,) for d in kept])
    conn.commit()
    steps = [0]
    conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1), 100)

    june_1975 = [f"1975-06-{n:02d}" for n in range(1, 31)]
    rolled, live = _days_from(conn, june_1975, SQLITE_DAYS, True, True)
    assert rolled == [] and all(found == ([], 0) for found in live.values())
    assert steps[0] < 20, f"{steps[0] * 100} VM steps for a month with nothing kept"

    rolled, _ = _days_from(conn, ["2026-01-15"], SQLITE_DAYS, True, True)
    assert sorted(rolled) == [
        ("2026-01", f"i{k}", "Open", 1, 1, 1, 1) for k in sorted(range(100), key=str)
    ]
    conn.close()
