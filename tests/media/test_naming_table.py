"""The README's naming tables are true: each release is laid out on disk, chosen and named as
the copy-file step does, and lands where the README says (or is left out where it says so)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from umt.media import library
from umt.media.packs import choose_files
from umt.media.request import AcquireRequest
from umt.media.selection import VIDEO_EXTENSIONS

README = Path(__file__).resolve().parents[2] / "README.md"
LEFT_OUT = "left out"
SINGLE_FILE = "—"


def _table(marker: str) -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker}:start -->\n(.*?)<!-- {marker}:end -->", text, re.S)
    assert match, f"README has no {marker} table"
    rows = [line for line in match.group(1).splitlines() if line.startswith("|")][2:]
    return [[cell.strip().strip("`") for cell in row.strip("|").split(" | ")] for row in rows]


TEMPLATES = dict(_table("naming-templates"))
EXAMPLES: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
for _torrent, _file, _layout, _path in _table("naming-examples"):
    EXAMPLES[(_torrent, _layout)].append((_file, _path))


def _lay_out(downloads: Path, torrent: str, files: list[str]) -> Path:
    """The torrent's content on disk: videos big enough not to be samples, samples small."""
    content = downloads / torrent
    for name in files:
        path = downloads / torrent if name == SINGLE_FILE else content / name
        path.parent.mkdir(parents=True, exist_ok=True)
        video = path.suffix.lower() in VIDEO_EXTENSIONS
        path.write_bytes(b"v" * (100 if "sample" in name.lower() else 3000) if video else b"s")
    return content


def test_every_example_names_a_documented_layout() -> None:
    assert {layout for _, layout in EXAMPLES} <= set(TEMPLATES)
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize(("torrent", "layout"), sorted(EXAMPLES), ids=lambda value: value[:40])
def test_the_readme_example_lands_where_it_says(tmp_path: Path, torrent: str, layout: str) -> None:
    rows = EXAMPLES[(torrent, layout)]
    content = _lay_out(tmp_path / "downloads", torrent, [file for file, _ in rows])
    request = AcquireRequest(
        source={}, info_hash="a" * 40, title=torrent, retention_seconds=0,
        download_timeout_seconds=60, category="umt", save_path=None,
        library_dir=str(tmp_path / "library"), import_mode="copy",
        naming_template=TEMPLATES[layout], all_files=False, verify="sha256",
    )
    chosen = choose_files(content, torrent, template=request.naming_template, all_files=False)
    planned = library.plan_destinations(request, torrent, chosen, tmp_path / "library")

    got = {source: destination.relative_to(tmp_path / "library").as_posix()
           for source, destination in planned}
    expected = {
        (content if file == SINGLE_FILE else content / file): path
        for file, path in rows if path != LEFT_OUT
    }
    assert got == expected
