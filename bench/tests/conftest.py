"""Loads bench/peers.py, bench/plot.py, bench/tuning_gain.py and
bench/workloads.py as modules bench_peers / bench_plot / bench_tuning_gain /
bench_workloads.

They are scripts, not a package; loading them by path under distinct names
keeps them from clashing with any other 'plot' module on sys.path.
"""

import importlib.util
import pathlib
import sys

BENCH_DIR = pathlib.Path(__file__).resolve().parent.parent


def _load(module_name, file_name):
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, BENCH_DIR / file_name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


_load("bench_peers", "peers.py")
_load("bench_plot", "plot.py")
_load("bench_tuning_gain", "tuning_gain.py")
_load("bench_workloads", "workloads.py")
