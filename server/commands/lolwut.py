"""LOLWUT: computer art and the Redis version, as Redis 7.0 draws it.

``LOLWUT [VERSION v] [args...]`` picks a drawing by version, the way Redis 7.0
does: 5 is Georg Nees's "Schotter" (a grid of squares, rotated and shifted more
and more going down, rendered in Braille characters), 6 is a city skyline in
four terminal grays, and every other version (this server's own 7.0.15 when no
VERSION is given) just names the version. Each drawing clamps its size
arguments and ends with a caption line; the reply is verbatim text.

The pixels come from ``random`` where Redis calls C's rand(), so only they
differ from redis-server's. Everything else -- the canvas sizes, the unrotated
top rows of Schotter, the text -- comes out byte for byte: Redis computes the
Schotter geometry in C ``float`` (single precision), and so does this module,
rounding every step to 32 bits as C does.
"""

from __future__ import annotations

import math
import random
import struct

from rill.protocol.reply import Verbatim

from .. import REDIS_VERSION
from ..client import Client
from .args import get_int
from .table import command

# C's rand() returns 0..RAND_MAX (glibc's RAND_MAX is 2**31 - 1); the drawings
# take their random draws in that range and use them the way Redis uses rand().
RAND_MAX = 2**31 - 1


def _rand() -> int:
    return random.getrandbits(31)


_FLOAT = struct.Struct("f")


def _f32(x: float) -> float:
    """``x`` rounded to a C float. The sum, product or quotient of two floats done in
    Python's doubles and rounded once to a float is exactly C's float arithmetic."""
    return _FLOAT.unpack(_FLOAT.pack(x))[0]


def _c_round(x: float) -> int:
    """C's round(): halfway cases away from zero (Python's round() goes to even)."""
    a = abs(x)
    r = math.floor(a)
    if a - r >= 0.5:
        r += 1
    return -r if x < 0 else r


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


# ---------------------------------------------------------------- the Braille canvas

# A Braille character shows a cell of 2x4 dots; Unicode numbers them so that the dot
# at (dx, dy) in the cell is this bit of the character's offset from U+2800.
_DOT_BIT = ((1 << 0, 1 << 3), (1 << 1, 1 << 4), (1 << 2, 1 << 5), (1 << 6, 1 << 7))
# UTF-8 of U+2800 + b is three bytes: E2, A0 | b >> 6, 80 | b & 0x3F.
_UTF8_MID = bytes(0xA0 | b >> 6 for b in range(256))
_UTF8_LOW = bytes(0x80 | b & 0x3F for b in range(256))


class BrailleCanvas:
    """A black-and-white canvas of ``width`` x ``height`` pixels, (0, 0) at the top left,
    kept as the Braille cells that render it: one byte of dot bits per 2x4 pixels.
    Drawing outside the canvas is allowed and changes nothing."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.cols = (width + 1) // 2
        self.rows = (height + 3) // 4
        self.cells = bytearray(self.cols * self.rows)

    def set_pixel(self, x: int, y: int) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self.cells[(y >> 2) * self.cols + (x >> 1)] |= _DOT_BIT[y & 3][x & 1]

    def get_pixel(self, x: int, y: int) -> bool:
        if 0 <= x < self.width and 0 <= y < self.height:
            return bool(self.cells[(y >> 2) * self.cols + (x >> 1)] & _DOT_BIT[y & 3][x & 1])
        return False

    def draw_line(self, x1: int, y1: int, x2: int, y2: int) -> None:
        """Bresenham's line from (x1, y1) to (x2, y2), both ends included."""
        dx, dy = abs(x2 - x1), abs(y2 - y1)
        sx = 1 if x1 < x2 else -1
        sy = 1 if y1 < y2 else -1
        err = dx - dy
        while True:
            self.set_pixel(x1, y1)
            if x1 == x2 and y1 == y2:
                return
            e2 = err * 2
            if e2 > -dy:
                err -= dy
                x1 += sx
            if e2 < dx:
                err += dx
                y1 += sy

    def draw_square(self, x: int, y: int, size: float, angle: float) -> None:
        """A square of side ``size`` centred on (x, y), turned by ``angle`` radians.

        Its corners lie on the circle through them, at 45 degrees plus the angle and
        then every 90 degrees, radius side / sqrt(2) rounded to whole pixels. As in
        Redis, ``size`` and ``angle`` are C floats, and so is the running angle.
        """
        radius = _f32(_c_round(_f32(size / 1.4142135623)))
        k = _f32(math.pi / 4 + angle)
        corners = []
        for _ in range(4):
            corners.append((_c_round(math.sin(k) * radius + x), _c_round(math.cos(k) * radius + y)))
            k = _f32(k + math.pi / 2)
        for j in range(4):
            (x1, y1), (x2, y2) = corners[j], corners[(j + 1) % 4]
            self.draw_line(x1, y1, x2, y2)

    def render(self) -> bytes:
        """One line of Braille characters per four pixel rows.

        Redis ends every line with a newline except when the last line starts on the
        canvas's last pixel row (a height of 4n + 1), so most drawings end with one.
        """
        n = len(self.cells)
        utf8 = bytearray(3 * n)
        utf8[0::3] = b"\xe2" * n
        utf8[1::3] = self.cells.translate(_UTF8_MID)
        utf8[2::3] = self.cells.translate(_UTF8_LOW)
        line = 3 * self.cols
        text = b"\n".join(utf8[i : i + line] for i in range(0, len(utf8), line))
        if self.rows and self.height % 4 != 1:
            text += b"\n"
        return text


# ---------------------------------------------------------------- LOLWUT 5: Schotter


def schotter(cols: int, squares_per_row: int, squares_per_col: int) -> BrailleCanvas:
    """Georg Nees's Schotter (1968) for a terminal ``cols`` characters wide: rows of
    squares, the first two straight, each further row turned and shifted at random by
    up to its row number / ``squares_per_col`` (radians, thirds of a side)."""
    width = cols * 2
    padding = 2 if width > 4 else 0
    side = _f32((width - padding * 2) / squares_per_row)
    height = int(_f32(_f32(side * squares_per_col) + padding * 2))
    canvas = BrailleCanvas(width, height)
    half = _f32(side / 2)
    for row in range(squares_per_col):
        for col in range(squares_per_row):
            cx = int(_f32(_f32(_f32(col * side) + half) + padding))
            cy = int(_f32(_f32(_f32(row * side) + half) + padding))
            angle = 0.0
            if row > 1:
                turn, shift_x, shift_y = (
                    _f32(_f32(_f32(_f32(_rand()) / _f32(RAND_MAX)) / squares_per_col) * row)
                    for _ in range(3)
                )
                if _rand() % 2:
                    turn = -turn
                if _rand() % 2:
                    shift_x = -shift_x
                if _rand() % 2:
                    shift_y = -shift_y
                angle = turn
                cx = int(_f32(cx + _f32(_f32(shift_x * side) / 3)))
                cy = int(_f32(cy + _f32(_f32(shift_y * side) / 3)))
            canvas.draw_square(cx, cy, side, angle)
    return canvas


def lolwut5(args: list[bytes]) -> Verbatim:
    """LOLWUT 5 [cols [squares-per-row [squares-per-col]]]: 66, 8 and 12 by default,
    clamped to 1..1000, 1..200 and 1..200; extra arguments are ignored."""
    values = [66, 8, 12]
    for i, arg in enumerate(args[:3]):
        values[i] = get_int(arg)
    cols, per_row, per_col = values
    canvas = schotter(_clamp(cols, 1, 1000), _clamp(per_row, 1, 200), _clamp(per_col, 1, 200))
    return Verbatim(canvas.render()
                    + b"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. "
                    + REDIS_VERSION.encode() + b"\n")


# ---------------------------------------------------------------- LOLWUT 6: skyline

# Colours 0..3 (black, two grays, white) as one terminal character each, foreground
# and background both set so that every terminal shows the same block.
_GRAYS = (
    b"\x1b[0;30;40m \x1b[0m",
    b"\x1b[0;90;100m \x1b[0m",
    b"\x1b[0;37;47m \x1b[0m",
    b"\x1b[0;97;107m \x1b[0m",
)


class GrayCanvas:
    """A canvas of one gray level (0 black .. 3 white) per terminal character."""

    def __init__(self, width: int, height: int, color: int) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray([color]) * (width * height)

    def set_pixel(self, x: int, y: int, color: int) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self.pixels[y * self.width + x] = color

    def get_pixel(self, x: int, y: int) -> int:
        if 0 <= x < self.width and 0 <= y < self.height:
            return self.pixels[y * self.width + x]
        return 0

    def render(self) -> bytes:
        w = self.width
        return b"\n".join(b"".join(map(_GRAYS.__getitem__, self.pixels[i : i + w]))
                          for i in range(0, len(self.pixels), w))


def skyscraper(canvas: GrayCanvas, xoff: int, width: int, height: int, color: int,
               windows: bool) -> None:
    """A building standing on the bottom row, its roof two pixels narrower on each side.
    With ``windows``, the inner part gets two-pixel-wide windows on every other row,
    each of a random gray other than the building's."""
    bottom = canvas.height - 1
    top = bottom - height + 1
    for y in range(bottom, top - 1, -1):
        for x in range(xoff, xoff + width):
            if y == top and (x <= xoff + 1 or x >= xoff + width - 2):
                continue
            c = color
            if windows and xoff + 1 < x < xoff + width - 2 and top + 1 < y < bottom - 1:
                relx, rely = x - (xoff + 1), y - (top + 1)
                if relx // 2 % 2 and rely % 2:
                    c = color
                    while c == color:
                        c = 1 + _rand() % 2
                    if relx % 2:  # the window's right half: as its left half
                        c = canvas.get_pixel(x - 1, y)
            canvas.set_pixel(x, y, c)


def skyline(canvas: GrayCanvas) -> None:
    """Parallax layers as in 8-bit games: light gray buildings at the back, darker ones
    before them (two passes, so the lighter stay behind), then black ones with windows."""
    h = canvas.height
    for color in (2, 1):
        offset = -10
        while offset < canvas.width:
            offset += _rand() % 8
            width = 10 + _rand() % 9
            height = h // 2 + (_rand() % h) // (2 if color == 2 else 3)
            skyscraper(canvas, offset, width, height, color, False)
            offset += width // 2 if color == 2 else width + 1
    offset = -10
    while offset < canvas.width:
        offset += _rand() % 8
        width = 5 + _rand() % 14
        if width % 4:
            width += width % 3
        height = h // 3 + (_rand() % h) // 2
        skyscraper(canvas, offset, width, height, 0, True)
        offset += width + 5


def lolwut6(args: list[bytes]) -> Verbatim:
    """LOLWUT 6 [cols [rows]]: 80 and 20 by default, each clamped to 1..1000; extra
    arguments are ignored."""
    values = [80, 20]
    for i, arg in enumerate(args[:2]):
        values[i] = get_int(arg)
    cols, rows = values
    canvas = GrayCanvas(_clamp(cols, 1, 1000), _clamp(rows, 1, 1000), 3)
    skyline(canvas)
    return Verbatim(canvas.render()
                    + b"\nDedicated to the 8 bit game developers of past and present.\n"
                    + b"Original 8 bit image from Plaguemon by hikikomori. Redis ver. "
                    + REDIS_VERSION.encode() + b"\n")


# ---------------------------------------------------------------- the command


def lolwut_unstable(args: list[bytes]) -> Verbatim:
    """What a version without a drawing of its own shows (arguments ignored)."""
    return Verbatim(b"Redis ver. " + REDIS_VERSION.encode() + b"\n")


def _drawing_for(version: str):
    """Redis chooses by the version string's first three characters: 5.x draws Schotter,
    6.x the skyline, the x.9 release candidates the drawing of the next major."""
    head = version[:3]
    if (head[:2] == "5." and head != "5.9") or head == "4.9":
        return lolwut5
    if (head[:2] == "6." and head != "6.9") or head == "5.9":
        return lolwut6
    return lolwut_unstable


@command("lolwut")
def lolwut(c: Client, argv: list[bytes]):
    version, args = REDIS_VERSION, argv[1:]
    # Redis compares argv[1] with strcasecmp, which stops at a NUL byte.
    if len(argv) >= 3 and argv[1].split(b"\0", 1)[0].lower() == b"version":
        # The number goes through a C unsigned int, as "%u.0.0": it wraps modulo 2**32.
        version = f"{get_int(argv[2]) & 0xFFFFFFFF}.0.0"
        args = argv[3:]
    return _drawing_for(version)(args)
