def test_ping(r):
    assert r.ping()


def test_unknown_command_side_by_side(sbs):
    sbs.check("FOO", "bar", "baz")
    sbs.check("PING", "a", "b")
    sbs.check("SELECT", "100")
    sbs.check("SELECT", "x")
