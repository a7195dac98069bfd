"""The harness against real instances: links come up, PAUSE queues effects in the
backlog and RESUME + WAIT delivers them, and an instance killed with -9 while paused
still ships its acknowledged writes after its restart (appendfsync always)."""

from __future__ import annotations

from tests.server.activeactive.cluster import ids

STATUS_FIELDS = ["peer", "id", "link", "sync", "paused", "effects-sent", "effects-acked",
                 "lag-effects", "lag-ms", "backlog-bytes"]


def test_three_regions_link_up_and_report_each_other(cluster):
    c = cluster(3)
    for node in c:
        status = node.status()
        assert [p["peer"].decode() for p in status] == node.peer_names
        others = [n.region for n in c if n is not node]
        for p, region in zip(status, others, strict=True):
            assert list(p) == STATUS_FIELDS
            assert p["link"] == b"up" and p["id"] == region and p["paused"] == 0
        info = node.info()
        assert info["active_active_id"] == str(node.region)
        assert info["active_active_xadd_id_mode"] == "strict"
    c.sync()


def test_pause_queues_effects_and_sync_delivers_them(cluster):
    c = cluster(2)
    r1, r2 = c
    c.pause_all()
    assert all(p["paused"] == 1 for p in r1.status())
    for i in range(5):
        r1.call("XADD", "s", "*", "i", i)
    (p,) = r1.status()
    assert p["lag-effects"] == 5 and p["backlog-bytes"] > 0
    assert r2.call("EXISTS", "s") == 0
    c.sync()
    (p,) = r1.status()
    assert p["lag-effects"] == 0 and p["effects-acked"] == r1.seq() and p["paused"] == 0
    assert r2.call("XRANGE", "s", "-", "+") == r1.call("XRANGE", "s", "-", "+")
    assert r1.error("ACTIVEACTIVE", "PAUSE", "nowhere:1") == (
        "ERR no such Active-Active peer 'nowhere:1'")


def test_a_killed_instance_ships_its_acknowledged_writes_after_restart(cluster):
    c = cluster(2, appendonly=True)
    r1, r2 = c
    c.pause_all()
    written = [r1.call("XADD", "s", "*", "i", i).decode() for i in range(20)]
    c.kill(0)
    c.restart(0)
    assert ids(r1.call("XRANGE", "s", "-", "+")) == written
    c.sync()
    assert ids(r2.call("XRANGE", "s", "-", "+")) == written
    # And it goes on from where it was: its sequence continues.
    more = r1.call("XADD", "s", "*", "i", "after").decode()
    c.sync()
    assert ids(r2.call("XRANGE", "s", "-", "+")) == [*written, more]
