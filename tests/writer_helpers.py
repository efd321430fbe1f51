"""A probe of the SQLite writer process (tests/test_writer_process.py), in a module of its own that imports
nothing but storage: the writer imports a write function's module to run it, so what the probe reports of the
writer's modules is the writer's own doing, not the probe's."""
import sys
import threading

from storage.db import writes


@writes
def loaded_modules(cx, package):
    """The modules of this package (e.g. "services") imported in the process that runs the write, once its
    preload (storage/writer.py preload) has finished."""
    for thread in threading.enumerate():
        if thread.name == "parley-preload":
            thread.join()
    return sorted(name for name in sys.modules if name.split(".")[0] == package)
