"""The cluster schedulers `pitfall fleet` drives, one module each behind base.Scheduler:

  slurm.py       submits one array job (a task pinned to each node), follows it, collects
  kubernetes.py  writes an Indexed Job (one pod per GPU node) for kubectl to apply
"""
from __future__ import annotations

from ..cli import BadInput
from .base import Scheduler
from .kubernetes import KubernetesScheduler
from .slurm import SlurmScheduler

SCHEDULERS: dict[str, type[Scheduler]] = {s.name: s for s in (SlurmScheduler, KubernetesScheduler)}


def scheduler(name: str, where: str = "--engine") -> Scheduler:
    """The scheduler called `name`; BadInput naming `where` (the flag, or a file's field) and the
    schedulers there are for any other name."""
    if name not in SCHEDULERS:
        raise BadInput(f"{where} {name!r}: no such scheduler ({', '.join(SCHEDULERS)})")
    return SCHEDULERS[name]()
