"""The fault suite's failing disk: the environment in which the LD_PRELOAD shim (fail_writes.c) makes
the writes to one file fail, and a directory's listing to compare what a failure left on disk."""
import errno
import os


def failing_writes(file_name, code=errno.EIO):
    """The environment in which every write to a file named `file_name` fails (not to MPI-IO's helper
    files, such as the semaphore /dev/shm/sem.OMPIO_<file_name>)."""
    env = dict(os.environ, LD_PRELOAD=os.environ["TRIDENT_FAIL_WRITES_LIB"], TRIDENT_FAIL_WRITES_TO="/" + file_name,
               TRIDENT_FAIL_WRITES_ERRNO=str(code))
    # The sanitized build: the shim comes before ASan's runtime, which ASan accepts when told.
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
    return env


def listing(directory):
    return sorted(path.name for path in directory.iterdir())
