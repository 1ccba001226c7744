"""Path mappings between qBittorrent's view and umt's: longest prefix, whole components."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from umt.config import ConfigError, load_settings
from umt.media.pathmap import PathMap

MAP = PathMap.of([("/downloads", "/srv/torrents"), ("/downloads/tv", "/mnt/tv/"),
                  ("/data", "/mnt/nas/data")])


@pytest.mark.parametrize(("remote", "local"), [
    ("/downloads/Film/film.mkv", "/srv/torrents/Film/film.mkv"),
    ("/downloads", "/srv/torrents"),
    ("/downloads/tv/Show/e1.mkv", "/mnt/tv/Show/e1.mkv"),  # the longest prefix wins
    ("/downloads2/x", "/downloads2/x"),  # whole components only
    ("/elsewhere/x", "/elsewhere/x"),
    ("Film/film.mkv", "Film/film.mkv"),  # relative (qBittorrent while checking): unchanged
    ("", ""),
])
def test_to_local(remote: str, local: str) -> None:
    assert MAP.to_local(remote) == local


def test_to_remote_reverses() -> None:
    assert MAP.to_remote("/srv/torrents/Film") == "/downloads/Film"
    assert MAP.to_remote("/mnt/tv") == "/downloads/tv"
    assert MAP.to_remote("/home/you") == "/home/you"


_NAMES = st.text(st.characters(codec="utf-8", exclude_characters="/\0",
                               exclude_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda name: name not in (".", ".."))


@given(st.lists(_NAMES, max_size=5))
def test_a_mapped_path_maps_back(parts: list[str]) -> None:
    remote = "/".join(["/downloads", *parts])
    assert MAP.to_remote(MAP.to_local(remote)) == remote


def test_settings_from_the_file_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "umt.toml"
    config.write_text('[[qbittorrent.path_map]]\nremote = "/downloads"\nlocal = "/srv/t"\n')
    from_file = load_settings(config, env={}).qbittorrent.path_map
    assert [(m.remote, m.local) for m in from_file] == [("/downloads", "/srv/t")]
    from_env = load_settings(config, env={"UMT_QBITTORRENT_PATH_MAP": "/a=/b; /c=/d"})
    assert [(m.remote, m.local) for m in from_env.qbittorrent.path_map] == [
        ("/a", "/b"), ("/c", "/d")]
    for bad in ("/a", "a=/b", "/a=b"):
        with pytest.raises(ConfigError, match="UMT_QBITTORRENT_PATH_MAP"):
            load_settings(config, env={"UMT_QBITTORRENT_PATH_MAP": bad})
