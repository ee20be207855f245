"""The Python side of `pitfall matrix` and `pitfall fleet`: the drivers the pitfall binary runs
(with python3, through the launchers tools/pitfall-matrix and tools/pitfall-fleet), and what
they share.

  cli.py           exit statuses, BadInput, the argument parser whose errors name the flag
  files.py         JSON files read without trusting them; write_atomically, the one way a
                   file of ours is written
  schema.py        the JSON Schema keywords reports/schema/*.schema.json use, for stdlib readers
  matrix.py        `pitfall matrix`: the CUDA/cuDNN matrix of ci/matrix.json, a container a cell
  matrix_file.py   ci/matrix.json read and checked (reports/schema/matrix.schema.json)
  containers.py    the container engine and the cells' images
  fleet.py         `pitfall fleet`: the suite on every GPU node of a cluster
  fleet_folder.py  a fleet's folder: fleet.json, the nodes' node.json, the merged report
  schedulers/      one module per cluster scheduler behind schedulers.Scheduler

Python's standard library only: the fleet half is installed beside `pitfall` (share/pitfall/
fleet/) and runs on login nodes, and containers/cell_entry.py imports files.py inside images
that carry python3 and nothing else.
"""
from pathlib import Path

# The source tree this package lies in (tools/pitfall_drivers/), or share/pitfall/ installed.
TREE = Path(__file__).resolve().parents[2]
