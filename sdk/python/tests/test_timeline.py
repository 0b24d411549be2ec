"""Timelines a page at a time against a real server: entries_page follows
next_cursor, iter_entries iterates over every page, entries reads them all."""

import pytest

import arbiter


def test_timeline_pages(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("timeline", uniq)
    res = agent.submit(arbiter.Entry(key=k, type="intent", tool=f"t.timeline.{uniq}"))
    assert res.action is not None
    id = res.action.id
    agent.submit_batch([arbiter.Entry(key=k, type="note", message=f"note {i}") for i in range(120)])

    first = agent.entries_page(id, limit=100)
    assert isinstance(first, arbiter.EntryPage)
    assert len(first.entries) == 100 and first.entries[0].seq == 1
    assert first.next_cursor
    second = agent.entries_page(id, limit=100, cursor=first.next_cursor)
    assert [e.seq for e in second.entries] == list(range(101, 122))
    assert second.next_cursor is None

    whole = agent.entries_page(id)
    assert len(whole.entries) == 121, "the default page is 1,000"
    assert whole.next_cursor is None

    assert [e.seq for e in agent.entries(id)] == list(range(1, 122))
    assert [e.seq for e in agent.iter_entries(id, limit=7)] == list(range(1, 122)), "every entry once across 18 pages"
    some = []
    for e in agent.iter_entries(id, limit=7, cursor=first.next_cursor):
        some.append(e.seq)
        if len(some) == 10:
            break
    assert some == list(range(101, 111))

    for bad in ({"limit": 1001}, {"limit": -1}, {"cursor": "not-ours"}):
        with pytest.raises(arbiter.APIError) as err:
            agent.entries_page(id, **bad)
        assert (err.value.status, err.value.code) == (400, "invalid"), bad
