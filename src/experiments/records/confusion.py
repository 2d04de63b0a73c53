"""confusion_matrix.png, drawn with Pillow: much quicker than matplotlib."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from experiments.core.files import write_atomically

# The image's TensorBoard tag (older run folders: confusion_matrix).
TAG = "test/confusion_matrix"
PICTURE = "confusion_matrix.png"
MOST_ANNOTATED_CLASSES = 20  # above, cells are too small to print their counts in
MOST_DRAWN_CLASSES = 100

# ColorBrewer's 9-class Blues, from no share of the true class to all of it.
BLUES = np.array(
    [
        (247, 251, 255),
        (222, 235, 247),
        (198, 219, 239),
        (158, 202, 225),
        (107, 174, 214),
        (66, 146, 198),
        (33, 113, 181),
        (8, 81, 156),
        (8, 48, 107),
    ],
    dtype=np.float64,
)
INK = (0, 0, 0)
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def shares(counts: list[list[int]]) -> np.ndarray:
    """Each row as shares of its true class; a class without images keeps a row of zeros."""
    table = np.asarray(counts, dtype=np.int64)
    totals = table.sum(axis=1, keepdims=True)
    return np.divide(table, totals, out=np.zeros(table.shape), where=totals > 0)


def shade(values: np.ndarray) -> np.ndarray:
    """The colours (uint8 RGB, in a trailing axis) of shares in [0, 1], along BLUES."""
    position = np.clip(values, 0, 1) * (len(BLUES) - 1)
    low = np.floor(position).astype(int).clip(max=len(BLUES) - 2)
    fraction = (position - low)[..., None]
    return (BLUES[low] * (1 - fraction) + BLUES[low + 1] * fraction).round().astype(np.uint8)


def cell_size(classes: int) -> int:
    """Pixels per cell: the matrix about 500 pixels wide, cells from 6 to 56 pixels."""
    return max(6, min(56, 500 // classes))


def picture(counts: list[list[int]], classes: list[str], title: str) -> np.ndarray:
    """The matrix as (height, width, 3) uint8 pixels, with class names, title and colour bar."""
    size = len(classes)
    table = np.asarray(counts, dtype=np.int64).reshape(size, size)
    cell = cell_size(size)
    grid = cell * size
    names = ImageFont.load_default(size=14 if size <= 30 else 9)
    longest = max(_width(names, name) for name in classes)
    left, top = longest + 40, 44
    width = max(left + grid + 100, _width(ImageFont.load_default(size=16), title) + 40)
    image = Image.new("RGB", (width, top + grid + longest + 44), "white")
    draw = ImageDraw.Draw(image)
    cells = shade(shares(counts))
    image.paste(Image.fromarray(cells.repeat(cell, axis=0).repeat(cell, axis=1)), (left, top))
    draw.rectangle([left - 1, top - 1, left + grid, top + grid], outline=INK)
    if size <= MOST_ANNOTATED_CLASSES:
        numbers = ImageFont.load_default(size=13 if size <= 10 else 10)
        dark = shares(counts) > 0.5
        for row in range(size):
            for column in range(size):
                centre = (left + column * cell + cell // 2, top + row * cell + cell // 2)
                ink = "white" if dark[row, column] else INK
                draw.text(centre, str(table[row, column]), font=numbers, fill=ink, anchor="mm")
    for index, name in enumerate(classes):
        middle = index * cell + cell // 2
        draw.text((left - 6, top + middle), name, font=names, fill=INK, anchor="rm")
        label = _upright(name, names)
        image.paste(label, (left + middle - label.width // 2, top + grid + 6), label)
    axis = ImageFont.load_default(size=15)
    draw.text((left + grid // 2, image.height - 14), "predicted", font=axis, fill=INK, anchor="mm")
    true = _upright("true", axis)
    image.paste(true, (6, top + grid // 2 - true.height // 2), true)
    heading = ImageFont.load_default(size=16)
    draw.text((width // 2, top // 2), title, font=heading, fill=INK, anchor="mm")
    _colour_bar(image, draw, names, (left + grid + 14, top), grid)
    return np.asarray(image)


def save(
    counts: list[list[int]], classes: list[str], title: str, path: Path
) -> tuple[bytes, tuple[int, int, int]]:
    """Write the picture to `path`; returns the PNG and its (height, width, channels)."""
    pixels = picture(counts, classes, title)
    encoded = io.BytesIO()
    # Zlib's fastest level: far quicker than its default, for a slightly larger file.
    Image.fromarray(pixels).save(encoded, format="PNG", compress_level=1)
    png = encoded.getvalue()
    write_atomically(path, lambda file: file.write(png))
    height, width, channels = pixels.shape
    return png, (height, width, channels)


def _colour_bar(
    image: Image.Image, draw: ImageDraw.ImageDraw, font: Font, corner: tuple[int, int], height: int
) -> None:
    x, y = corner
    bar = 16
    ramp = shade(np.linspace(1, 0, height))[:, None, :].repeat(bar, axis=1)
    image.paste(Image.fromarray(ramp), (x, y))
    draw.rectangle([x - 1, y - 1, x + bar, y + height], outline=INK)
    for share in (0.0, 0.5, 1.0):
        tick = y + round((1 - share) * (height - 1))
        draw.line([x + bar, tick, x + bar + 4, tick], fill=INK)
        draw.text((x + bar + 7, tick), f"{share:g}", font=font, fill=INK, anchor="lm")
    caption = _upright("share of the true class", font)
    image.paste(caption, (x + bar + 36, y + height // 2 - caption.height // 2), caption)


def _width(font: Font, text: str) -> int:
    left, _, right, _ = font.getbbox(text)
    return int(right - left)


def _upright(text: str, font: Font) -> Image.Image:
    left, top, right, bottom = font.getbbox(text)
    label = Image.new("RGBA", (int(right - left) + 4, int(bottom - top) + 8), (255, 255, 255, 0))
    ImageDraw.Draw(label).text((2 - left, 2 - top), text, font=font, fill=INK)
    return label.rotate(90, expand=True)
