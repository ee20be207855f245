"""ci/matrix.json, the cells of the CUDA/cuDNN matrix and their images: read, checked against
reports/schema/matrix.schema.json, then checked for what a schema cannot say (ids unique, names
that refer to each other). Every problem is BadInput naming the file and the field, as
`cell 'cuda11.8-gcc11'.cudnn.build` or `images.trixie-cuda12.4.wheels`."""
from __future__ import annotations

import functools
import json
from pathlib import Path

from . import TREE
from .cli import BadInput
from .files import read_json
from .schema import Problem, Validator

DEFAULT_MATRIX = TREE / "ci" / "matrix.json"
SCHEMA = TREE / "reports" / "schema" / "matrix.schema.json"


@functools.lru_cache(maxsize=1)
def validator() -> Validator:
    return Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def load_matrix(path: Path) -> dict:
    """Reads and checks the matrix file; every problem names the file and the field."""
    doc = read_json(path)
    problem = validator().first_problem(doc) or cross_reference_problem(doc)
    if problem:
        where = field_name(doc, problem.path)
        raise BadInput(f"{path}: {where}: {problem.text}" if where else f"{path}: {problem.text}")
    return doc


def cross_reference_problem(doc: dict) -> Problem | None:
    """What the schema cannot say: a cell id used twice, a cell's image that is not in images,
    an image's wheel_toolkit that is none of its wheels' prefixes."""
    for name, image in doc["images"].items():
        toolkit = image.get("wheel_toolkit", "")
        if toolkit and toolkit not in image.get("wheels", {}):
            return Problem(("images", name, "wheel_toolkit"), f"'{toolkit}' is not one of its wheels' prefixes")
    seen = set()
    for i, cell in enumerate(doc["cells"]):
        if cell["id"] in seen:
            return Problem(("cells", i, "id"), "defined twice")
        seen.add(cell["id"])
        if cell["image"] not in doc["images"]:
            return Problem(("cells", i, "image"), f"no image '{cell['image']}' in images")
    return None


def field_name(doc, path: tuple) -> str:
    """The field at `path` as a person finds it in the file: a cell by its id where it has one
    (`cell 'cuda13.0-host'.expect.outcome`), else by its index (`cells[3]`); keys joined by dots."""
    parts: list[str] = []
    for depth, step in enumerate(path):
        if depth == 1 and path[0] == "cells" and _cell_id(doc, step):
            parts = [f"cell '{_cell_id(doc, step)}'"]
        elif isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            parts.append(f".{step}" if parts else step)
    return "".join(parts)


def _cell_id(doc, i) -> str:
    cells = doc.get("cells") if isinstance(doc, dict) else None
    cell = cells[i] if isinstance(cells, list) and isinstance(i, int) and i < len(cells) else None
    cell_id = cell.get("id") if isinstance(cell, dict) else None
    return cell_id if isinstance(cell_id, str) and cell_id else ""


def wheel_specs(image: dict) -> list[tuple[str, str]]:
    """(prefix, "package==version") for each wheel of an image; a prefix may take several."""
    pairs = []
    for prefix, specs in sorted(image.get("wheels", {}).items()):
        for spec in specs if isinstance(specs, list) else [specs]:
            pairs.append((prefix, spec))
    return pairs


def select_cells(doc: dict, wanted: list[str]) -> list[dict]:
    if not wanted:
        return list(doc["cells"])
    by_id = {c["id"]: c for c in doc["cells"]}
    unknown = [w for w in wanted if w not in by_id]
    if unknown:
        raise BadInput(f"--cells: no cell {', '.join(unknown)} (cells: {', '.join(by_id)})")
    return [by_id[w] for w in wanted]


def runner_image(cell: dict) -> str:
    runner = cell["gpu_runner"]
    return runner["image"] + (f"@{runner['digest']}" if runner.get("digest") else "")


def runner_cells(doc: dict) -> list[dict]:
    """One entry per (cell, GPU runner label): what a CI job needs to run and judge it."""
    return [{"id": c["id"], "image": runner_image(c), "gpu": label, "model": gpu["model"], "profile": gpu["profile"]}
            for c in doc["cells"] if "gpu_runner" in c for label, gpu in c["gpu_runner"]["gpus"].items()]
