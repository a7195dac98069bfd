"""LOLWUT: Redis 7.0's computer art, side by side with redis-server.

The drawings use C's rand() in Redis and ``random`` in rill, so their pixels are
compared byte for byte only where Redis draws without random numbers: Schotter
(version 5) with at most two rows of squares (only rows from the third on are
turned and shifted), and the skyline (version 6) one row tall (all sky). Other
drawings are compared by shape: lines, characters per line, character set,
captions, and the parts every draw shares.
"""

from __future__ import annotations

import itertools
import math

import pytest
from rill.server.commands import lolwut as lolwut_module

from tests.support import RawClient

SCHOTTER_CAPTION = b"Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"
SKYLINE_CAPTION = (b"Dedicated to the 8 bit game developers of past and present.\n"
                   b"Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.15\n")
GRAYS = {b"\x1b[0;30;40m \x1b[0m": 0, b"\x1b[0;90;100m \x1b[0m": 1,
         b"\x1b[0;37;47m \x1b[0m": 2, b"\x1b[0;97;107m \x1b[0m": 3}
NOT_INT = b"-ERR value is not an integer or out of range\r\n"


def text_of(reply: bytes) -> bytes:
    """The text of a verbatim reply: a bulk string in RESP2, ``=len\\r\\ntxt:...`` in RESP3."""
    head, rest = reply.split(b"\r\n", 1)
    n = int(head[1:])
    assert rest[n:] == b"\r\n", reply[:80]
    body = rest[:n]
    if head[:1] == b"=":
        assert body[:4] == b"txt:"
        return body[4:]
    assert head[:1] == b"$", reply[:80]
    return body


def schotter_lines(text: bytes) -> list[str]:
    """The drawing's lines of Braille characters (the caption checked and dropped).

    Redis ends the last line with a newline too, unless the canvas is 4n + 1 pixels
    tall: most drawings have an empty line before the caption.
    """
    assert text.endswith(b"\n" + SCHOTTER_CAPTION)
    drawing = text[: -len(SCHOTTER_CAPTION) - 1].decode()
    if drawing.endswith("\n"):
        drawing = drawing[:-1]
    return drawing.split("\n") if drawing else []


def braille_dots(lines: list[str]) -> set[tuple[int, int]]:
    """The pixels a Braille drawing shows, as (x, y)."""
    bits = ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3))
    dots = set()
    for row, line in enumerate(lines):
        for col, ch in enumerate(line):
            b = ord(ch) - 0x2800
            dots.update((2 * col + dx, 4 * row + dy) for i, (dx, dy) in enumerate(bits) if b >> i & 1)
    return dots


def skyline_rows(text: bytes) -> list[list[int]]:
    """The skyline as rows of gray levels, every cell checked to be one of the four."""
    assert text.endswith(b"\n" + SKYLINE_CAPTION)
    rows = []
    for line in text[: -len(SKYLINE_CAPTION) - 1].split(b"\n"):
        cells = line.split(b"\x1b[0m")
        assert cells[-1] == b""
        rows.append([GRAYS[cell + b"\x1b[0m"] for cell in cells[:-1]])
    return rows


# ---------------------------------------------------------------- byte for byte

UNSTABLE = [
    ("LOLWUT",),
    ("LOLWUT", "5"),  # no VERSION: this server's own version, which has no drawing
    ("LOLWUT", "foo", "bar", "baz"),
    ("LOLWUT", "VERSION"),  # too short for the option: an ignored argument
    ("lolwut", "version", "7"),
    ("LOLWUT", "VERSION", "7", "not-a-number"),  # the unstable version parses nothing
    ("LOLWUT", "VERSION", "0"),
    ("LOLWUT", "VERSION", "4"),
    ("LOLWUT", "VERSION", "8"),
    ("LOLWUT", "VERSION", "50"),
    ("LOLWUT", "VERSION", "-1"),  # 4294967295.0.0
    ("LOLWUT", "VERSION", "-5"),
    ("LOLWUT", "VERSION", "9223372036854775807"),
    ("LOLWUT", "VERSION", "-9223372036854775808"),
]

ERRORS = [
    ("LOLWUT", "VERSION", "abc"),
    ("LOLWUT", "VERSION", ""),
    ("LOLWUT", "VERSION", "5.0"),
    ("LOLWUT", "VERSION", "+5"),
    ("LOLWUT", "VERSION", "05"),
    ("LOLWUT", "VERSION", " 5"),
    ("LOLWUT", "VERSION", "9223372036854775808"),
    ("LOLWUT", "VERSION", "5", "abc"),
    ("LOLWUT", "VERSION", "5", "10", "1.5"),
    ("LOLWUT", "VERSION", "5", "10", "2", "two"),
    ("LOLWUT", "VERSION", "5", "99999999999999999999"),
    ("LOLWUT", "VERSION", "6", "x"),
    ("LOLWUT", "VERSION", "6", "10", "-"),
    ("LOLWUT", "VERSION", "abc", "VERSION", "5"),
    ("LOLWUT", "VERSION", "5", "VERSION", "6"),  # VERSION is taken once, then it is cols
]

# Fully deterministic drawings: Schotter with one or two rows of squares, one-row skylines.
DETERMINISTIC = [
    ("LOLWUT", "VERSION", "5", "10", "2", "2"),
    ("LOLWUT", "VERSION", "5", "66", "8", "2"),
    ("LOLWUT", "VERSION", "5", "66", "8", "1"),
    ("LOLWUT", "VERSION", "5", "66", "8", "2", "ignored", "args"),
    ("LOLWUT", "VERSION", "5", "1", "1", "1"),
    ("LOLWUT", "VERSION", "5", "2", "1", "2"),  # no padding up to 2 columns
    ("LOLWUT", "VERSION", "5", "3", "1", "2"),
    ("LOLWUT", "VERSION", "5", "11", "2", "1"),  # 13 pixels tall: no empty line at the end
    ("LOLWUT", "VERSION", "5", "1", "200", "2"),  # a canvas 0 pixels tall
    ("LOLWUT", "VERSION", "5", "999", "7", "1"),
    ("LOLWUT", "VERSION", "5", "523", "13", "2"),
    ("LOLWUT", "VERSION", "5", "1000", "200", "2"),
    # Clamped: cols to 1..1000, squares per row and per column to 1..200.
    ("LOLWUT", "VERSION", "5", "0", "0", "0"),
    ("LOLWUT", "VERSION", "5", "-7", "-1", "-9223372036854775808"),
    ("LOLWUT", "VERSION", "5", "1001", "201", "-3"),
    ("LOLWUT", "VERSION", "5", "9223372036854775807", "1000000", "0"),
    ("LOLWUT", "VERSION", "5", "40", "9223372036854775807", "1"),
    # The version goes through a C unsigned int: 2**32 + 5 and 5 - 2**32 are 5.
    ("LOLWUT", "VERSION", "4294967301", "10", "2", "2"),
    ("LOLWUT", "VERSION", "-4294967291", "10", "2", "2"),
    # Redis compares the option's name with strcasecmp, which stops at a NUL.
    ("LOLWUT", b"vErSiOn\x00junk", "5", "12", "3", "2"),
    ("LOLWUT", "VERSION", "6", "1", "1"),
    ("LOLWUT", "VERSION", "6", "80", "1"),
    ("LOLWUT", "VERSION", "6", "80", "1", "ignored"),
    ("LOLWUT", "VERSION", "6", "0", "0"),
    ("LOLWUT", "VERSION", "6", "-4", "-9223372036854775808"),
    ("LOLWUT", "VERSION", "6", "5000", "1"),
    ("LOLWUT", "VERSION", "4294967302", "7", "1"),
]


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_replies_without_random_pixels_are_redis_s(sbs, sbs3, resp3):
    (sbs3 if resp3 else sbs).run(UNSTABLE + ERRORS + DETERMINISTIC)


def test_the_unstable_reply_and_the_errors_are_what_redis_7_0_15_sends(raw):
    assert raw.call("LOLWUT") == b"$18\r\nRedis ver. 7.0.15\n\r\n"
    assert raw.call("LOLWUT", "VERSION", "5", "nope") == NOT_INT
    raw.call("HELLO", "3")
    assert raw.call("LOLWUT", "VERSION", "8") == b"=22\r\ntxt:Redis ver. 7.0.15\n\r\n"


def test_schotter_with_two_rows_of_squares_matches_redis_for_many_sizes(rill_server, oracle_server):
    """Every pixel of the unrotated rows lands where Redis's single-precision arithmetic
    puts it: widths with and without padding, square sides that are not whole."""
    mine, theirs = RawClient(rill_server.port), RawClient(oracle_server.port)
    try:
        for cols in list(range(1, 41)) + [97, 128, 333, 640, 1000]:
            for per_row in (1, 2, 3, 7, 8, 13, 64, 200):
                for per_col in (1, 2):
                    args = ("LOLWUT", "VERSION", "5", cols, per_row, per_col)
                    assert mine.call(*args) == theirs.call(*args), args
    finally:
        mine.close()
        theirs.close()


def test_command_facts_are_redis_s(sbs):
    sbs.run([
        ("COMMAND", "INFO", "lolwut"),
        ("COMMAND", "DOCS", "lolwut"),
    ])


def test_scripts_and_transactions_get_the_text(sbs, sbs3):
    for s in (sbs, sbs3):
        s.run([
            ("EVAL", "return redis.call('lolwut')", "0"),
            ("EVAL", "return redis.call('lolwut', 'version', '5', '20', '3', '2')", "0"),
            ("EVAL", "return redis.pcall('lolwut', 'version', 'x')", "0"),
            ("MULTI",),
            ("LOLWUT", "VERSION", "6", "3", "1"),
            ("LOLWUT", "VERSION", "y"),
            ("LOLWUT",),
            ("EXEC",),
        ])
    sbs3.check("EVAL", "redis.setresp(3); return redis.call('lolwut')", "0")


# ---------------------------------------------------------------- random drawings, by shape

# (arguments, whether an empty line comes before the caption)
SCHOTTER_SHAPES = [
    ((), True),  # 66 columns, 8 squares per row, 12 per column
    (("30",), True),
    (("66", "8", "3"), True),
    (("100", "5", "17"), True),
    (("11", "2", "5"), False),  # a canvas 9 * 5 + 4 = 49 pixels tall, 4n + 1
    (("2", "1", "200"), True),
    (("1000", "200", "200"), True),
    (("5000", "500", "500"), True),  # clamped to 1000, 200, 200
]


@pytest.mark.parametrize("args,blank_line", SCHOTTER_SHAPES, ids=lambda a: " ".join(a) if isinstance(a, tuple) else "")
@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_schotter_has_redis_s_shape(sbs, sbs3, args, blank_line, resp3):
    s = sbs3 if resp3 else sbs
    texts = [text_of(r) for r in s.both("LOLWUT", "VERSION", "5", *args)]
    mine, theirs = (schotter_lines(t) for t in texts)
    assert [len(line) for line in mine] == [len(line) for line in theirs]
    assert [b"\n\n" + SCHOTTER_CAPTION in t for t in texts] == [blank_line] * 2
    assert all("\u2800" <= ch <= "\u28ff" for line in mine for ch in line)
    assert all(mine)  # no empty line inside the drawing


def test_schotter_defaults_are_66_columns_8_squares_by_12(raw):
    lines = schotter_lines(text_of(raw.call("LOLWUT", "VERSION", "5")))
    # 132 x 196 pixels: sides of (132 - 2 * 2) / 8 = 16, 16 * 12 + 2 * 2 tall.
    assert len(lines) == 49 and {len(line) for line in lines} == {66}


def test_schotter_s_first_two_rows_are_straight_under_the_random_ones(sbs):
    """Squares from the third row on are turned and shifted at random, and drawing only
    adds dots: the deterministic two-row picture lies under every full drawing."""
    straight, _ = sbs.both("LOLWUT", "VERSION", "5", "66", "8", "2")
    base = braille_dots(schotter_lines(text_of(straight)))
    assert base
    for reply in sbs.both("LOLWUT", "VERSION", "5", "66", "8", "12"):
        assert base <= braille_dots(schotter_lines(text_of(reply)))


def test_schotter_turns_squares_from_the_third_row_on(sbs, monkeypatch):
    """Three rows of squares: the third is turned and shifted at random, so no two draws
    are alike and none is the straight grid."""
    args = (b"LOLWUT", b"VERSION", b"5", b"66", b"8", b"3")
    with monkeypatch.context() as m:
        m.setattr(lolwut_module, "_rand", lambda: 0)
        straight = braille_dots(schotter_lines(lolwut_module.lolwut(None, list(args))))
    for server in (sbs.rill, sbs.oracle):
        first, second = (braille_dots(schotter_lines(text_of(server.call(*args)))) for _ in range(2))
        assert first != second
        assert first != straight and second != straight


def test_schotter_with_no_random_turn_is_the_straight_grid(oracle_server, monkeypatch):
    """With every random draw 0 no square turns or moves: the full grid continues Redis's
    two straight rows, rows that are one square side apart."""
    monkeypatch.setattr(lolwut_module, "_rand", lambda: 0)
    grid = schotter_lines(lolwut_module.lolwut(None, [b"LOLWUT", b"VERSION", b"5", b"66", b"8", b"6"]))
    theirs = RawClient(oracle_server.port)
    try:
        two_rows = schotter_lines(text_of(theirs.call("LOLWUT", "VERSION", "5", "66", "8", "2")))
    finally:
        theirs.close()
    dots, top = braille_dots(grid), braille_dots(two_rows)
    # Sides of 16 pixels after 2 of padding: row 1 ends, and row 2 starts, at y = 34.
    assert {(x, y) for x, y in dots if y <= 34} == top
    # Rows 2 and 3 are rows 0 and 1 moved down by two square sides of 16 pixels.
    assert {(x, y + 32) for x, y in top if y >= 2} <= dots


SKYLINE_SHAPES = [
    ((), 80, 20),
    (("40",), 40, 20),
    (("30", "2"), 30, 2),
    (("7", "33"), 7, 33),
    (("1000", "1000"), 1000, 1000),
    (("3", "5000"), 3, 1000),
]


@pytest.mark.parametrize("args,cols,rows", SKYLINE_SHAPES, ids=lambda a: str(a))
@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_skyline_has_redis_s_shape(sbs, sbs3, args, cols, rows, resp3):
    s = sbs3 if resp3 else sbs
    for reply in s.both("LOLWUT", "VERSION", "6", *args):
        sky = skyline_rows(text_of(reply))
        assert len(sky) == rows and all(len(row) == cols for row in sky)
        assert sky[0] == [3] * cols  # no building reaches the top row
        if cols >= 40:
            assert 0 in sky[-1]  # black buildings stand in front, on the ground


def test_skyline_is_random(raw):
    assert raw.call("LOLWUT", "VERSION", "6") != raw.call("LOLWUT", "VERSION", "6")


def test_skyscraper_windows_are_two_pixels_of_one_gray_on_every_other_row():
    canvas = lolwut_module.GrayCanvas(20, 12, 3)
    lolwut_module.skyscraper(canvas, 2, 14, 10, 0, True)
    pixel = canvas.get_pixel
    # The roof (row 2) is two pixels narrower on each side.
    assert [pixel(x, 2) for x in range(20)] == [3] * 4 + [0] * 10 + [3] * 6
    windows = {(x, y) for y in range(12) for x in range(20) if pixel(x, y) not in (0, 3)}
    assert windows == {(x, y) for x in (5, 6, 9, 10, 13) for y in (4, 6, 8)}
    for y in (4, 6, 8):
        assert pixel(5, y) == pixel(6, y) and pixel(9, y) == pixel(10, y)
    assert all(pixel(x, y) in (1, 2) for x, y in windows)


def test_versions_pick_drawings_as_redis_does():
    """Redis reads the first three characters of the version: 5.x and the 4.9 release
    candidates draw Schotter, 6.x and 5.9 the skyline. Only the server's own version
    can be an x.9 (VERSION n is always "n.0.0"), so this is checked here, not against
    redis-server."""
    drawing = lolwut_module._drawing_for
    assert drawing("5.0.0") is drawing("5.0.14") is drawing("4.9.101") is lolwut_module.lolwut5
    assert drawing("6.0.0") is drawing("6.2.14") is drawing("5.9.104") is lolwut_module.lolwut6
    for version in ("7.0.15", "6.9.242", "4.0.14", "50.0.0", "0.0.0", "4294967295.0.0"):
        assert drawing(version) is lolwut_module.lolwut_unstable


def test_rounding_is_c_s_halfway_away_from_zero():
    c_round = lolwut_module._c_round
    assert [c_round(x) for x in (0.5, 1.5, 2.5, -0.5, -2.5, 2.4999999999999996, -7.2)] == [
        1, 2, 3, -1, -3, 2, -7]


def test_schotter_places_squares_by_redis_s_rule(monkeypatch):
    """10 columns: a canvas 20 pixels wide with 2 of padding, so one square per row has
    a side of 16. Rows 0 and 1 stand straight. From row 2 on each square takes six
    rand()s: turn, x shift and y shift of up to row / rows (radians, thirds of a side),
    then their signs, negative when odd. RAND_MAX and RAND_MAX - 1 are both 1.0 as C
    floats, so they differ only in sign: row 2 of 3 turns by 2/3 and moves 16/3 * 2/3
    pixels, truncated."""
    squares: list[tuple] = []
    monkeypatch.setattr(lolwut_module.BrailleCanvas, "draw_square",
                        lambda canvas, x, y, size, angle: squares.append((x, y, size, angle)))
    odd, even = lolwut_module.RAND_MAX, lolwut_module.RAND_MAX - 1
    turn = lolwut_module._f32(2 / 3)

    def third_square(*signs: int) -> tuple:
        squares.clear()
        monkeypatch.setattr(lolwut_module, "_rand", itertools.cycle((odd, odd, odd) + signs).__next__)
        lolwut_module.schotter(10, 1, 3)
        assert squares[:2] == [(10, 10, 16.0, 0.0), (10, 26, 16.0, 0.0)]
        (square,) = squares[2:]
        return square

    assert third_square(odd, odd, odd) == (6, 38, 16.0, -turn)  # 10 - 3.56, 42 - 3.56
    assert third_square(even, even, even) == (13, 45, 16.0, turn)
    assert third_square(even, odd, even) == (6, 45, 16.0, turn)
    assert third_square(odd, even, odd) == (13, 38, 16.0, -turn)


def test_a_turned_square_has_its_corners_where_redis_puts_them():
    """Corners at (x + r sin k, y + r cos k) for k = 45 degrees + angle and every quarter
    turn on, r = side / sqrt(2) rounded (20 / 1.414 -> 14): for 0.3 rad, sin and cos of
    1.085 are .884 and .467, so the first corner is (20 + 12.4, 20 + 6.5) -> (32, 27)."""
    def dots(angle: float) -> set[tuple[int, int]]:
        canvas = lolwut_module.BrailleCanvas(40, 40)
        canvas.draw_square(20, 20, 20.0, angle)
        return {(x, y) for x in range(40) for y in range(40) if canvas.get_pixel(x, y)}

    turned = dots(0.3)
    assert {(32, 27), (27, 8), (8, 13), (13, 32)} <= turned
    assert (32, 13) not in turned and (27, 32) not in turned  # not turned the other way
    assert dots(0.0) == dots(lolwut_module._f32(math.pi / 2)) != turned


def test_skyline_with_every_rand_zero(monkeypatch):
    """Every rand() 0 on 30 x 20: gray 2 buildings 10 wide and 10 tall every 5 pixels
    from x = -10, gray 1 ones of the same size every 11, then black ones 5 + 5 % 3 = 7
    wide and 20 / 3 = 6 tall every 12 (at 2, 14, 26), with windows of gray 1."""
    monkeypatch.setattr(lolwut_module, "_rand", lambda: 0)
    canvas = lolwut_module.GrayCanvas(30, 20, 3)
    lolwut_module.skyline(canvas)
    rows = ["".join(str(canvas.get_pixel(x, y)) for x in range(30)) for y in range(20)]
    assert rows[:10] == ["3" * 30] * 10
    assert rows[10] == "222111111222221111112222211111"  # roofs: two pixels in on each side
    assert rows[16] == "210001100112110001100121110001"  # the windows' row
    assert rows[19] == "210000000112110000000121110000"
    assert [row[5] for row in rows] == list("3" * 10 + "1111" + "001000")
