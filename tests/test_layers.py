"""The layers of umt import only downwards, and the engine only through its front door.

Top to bottom: ``umt.cli`` and ``umt.web`` (the two front ends, which share the CLI's helpers)
→ ``umt.app`` → ``umt.config`` → ``umt.media`` → ``umt.records`` → ``umt.engine``
(ARCHITECTURE.md). A module may import its own layer and the layers below it;
``umt.textsafe`` imports nothing of umt and anyone above the engine may use it. Outside the
engine only ``umt.engine`` itself is imported, never its modules (``umt.engine.store.…``), and
media knows no SQL dialect. Every import counts, also those inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

UMT = Path(__file__).resolve().parents[1] / "umt"
LAYERS = [{"cli", "web"}, {"app"}, {"config", "config_sources", "config_values", "config_hook"},
          {"media"}, {"records"}, {"engine"}]
LEAVES = {"textsafe"}
SQL_DRIVERS = {"psycopg", "psycopg_pool", "sqlite3"}


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            # ``from umt import engine`` names a module too
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                        if node.module == "umt")


def _part(module: str) -> str | None:
    """The layer (or leaf) a module of umt belongs to; None for other packages."""
    parts = module.split(".")
    if parts[0] != "umt" or len(parts) == 1:
        return None
    return parts[1]


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(UMT.rglob("*.py")):
        part = path.relative_to(UMT).parts[0].removesuffix(".py")
        if part != "__init__":
            yield part, path


def _rank(part: str) -> int | None:
    return next((rank for rank, layer in enumerate(LAYERS) if part in layer), None)


def test_every_part_of_umt_is_a_known_layer_or_leaf() -> None:
    assert all(_rank(part) is not None or part in LEAVES for part, _ in _modules())


def test_layers_import_only_downwards() -> None:
    wrong = []
    for part, path in _modules():
        for line, module in _imports(path):
            target = _part(module)
            if target is None or target == part:
                continue
            if target in LEAVES and part != "engine":
                continue
            rank, target_rank = _rank(part), _rank(target)
            allowed = rank is not None and target_rank is not None and target_rank >= rank
            if not allowed:
                wrong.append(f"{path.relative_to(UMT.parent)}:{line} imports {module}")
    assert wrong == []


def test_only_the_engine_imports_its_modules() -> None:
    wrong = [
        f"{path.relative_to(UMT.parent)}:{line} imports {module}"
        for part, path in _modules() if part != "engine"
        for line, module in _imports(path)
        if module.startswith("umt.engine.")
    ]
    assert wrong == []


def test_media_knows_no_sql_dialect() -> None:
    wrong = [
        f"{path.relative_to(UMT.parent)}:{line} imports {module}"
        for part, path in _modules() if part == "media"
        for line, module in _imports(path)
        if module.split(".")[0] in SQL_DRIVERS
    ]
    assert wrong == []
    assert not list((UMT / "media").rglob("*.sql"))
