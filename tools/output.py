"""Where the tools write, checked before their work: credit.py measures for 20 minutes and
compare.py trains for hours, so a destination that cannot be written is refused in one line
first, not found out at the end.

One rule for every tool: the folders a path needs are made when it is written (as train.py
--out always did), so a missing folder is no error. The check itself makes nothing and leaves
nothing behind. What no check can foresee (the disk filling up during the work) is up to the
caller: tools/credit.py hands its measurement to `keep`.
"""
import contextlib
import os
import stat
import sys
import tempfile

KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def problem(path, folder=False):
    """Why `path` cannot be written as a file (folder: as a folder to write files in), or None.
    A missing path is fine if its nearest existing folder takes a new file."""
    if not path:
        return "is empty"
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # to be made: its nearest existing folder decides
        existing = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            return f"cannot be made: {existing} is a file, not a folder"
        return creatable(existing)
    except OSError as e:
        return f"cannot be reached ({e.strerror or e})"
    if folder:
        return creatable(path) if stat.S_ISDIR(mode) else "is a file, not a folder"
    if stat.S_ISDIR(mode):
        return "is a folder"
    if not stat.S_ISREG(mode):  # a FIFO would block the write until a reader comes
        return f"is {next((k for test, k in KINDS if test(mode)), 'something else')}, not a regular file"
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))  # opened as a writer would, its content left as it is
    except OSError as e:
        return f"cannot be written ({e.strerror or e})"
    return None


def creatable(folder):
    """None if a file can be made in `folder`; found by making one with no name (or removed at once)."""
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as e:  # root ignores permissions, but not a read-only disk or /proc
        return f"cannot be written: no file can be made in {folder} ({e.strerror or e})"
    return None


def check(path, flag="", fix=None, folder=False):
    """SystemExit, one line naming flag and path and what to do, if `path` cannot be written, or is
    a file of a train.py run (run_owning): no tool writes over a run."""
    why = problem(path, folder)
    if why:
        fix = fix or ("give a file name" if why.startswith("is ") and not folder else "give another path")
        raise SystemExit(f"{flag + ' ' if flag else ''}{path} {why}; {fix}")
    if not folder and (run := run_owning(path)):
        raise SystemExit(f"{flag + ' ' if flag else ''}{path} is one of the run's own files (its log, args, rollouts, "
                         f"checkpoints or trackers; the run in {run}): writing it would replace it; give a file elsewhere")


RUN_FILES = ("log.jsonl", "args.json", "trackers.json", "rollouts", "checkpoint", "checkpoint.old", "checkpoint.tmp",
             "tensorboard", "wandb")  # what a train.py run keeps in its folder (machinery/checkpoint.py)


def run_owning(path):
    """The run folder (one holding args.json and log.jsonl) of which `path` is one of its own files
    (RUN_FILES, or anything in its folders), or None. The path is looked at as written and with
    every link resolved, so a link into a run's folder counts, and so does a run's folder reached
    through a link."""
    for where in {os.path.abspath(path), os.path.realpath(path)}:
        folder = os.path.dirname(where)
        while True:
            first = os.path.relpath(where, folder).split(os.sep)[0]
            if first in RUN_FILES and all(os.path.isfile(os.path.join(folder, n)) for n in ("args.json", "log.jsonl")):
                return folder
            if os.path.dirname(folder) == folder:
                break
            folder = os.path.dirname(folder)
    return None


def same_file(a, b):
    """Whether paths a and b name one file: the same path once links are resolved, or, both existing,
    the same device and inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_text(path, text):
    """Write `text` to `path`, making its folders; a write that fails midway (a full disk) removes
    what it cut short, so no half file is taken for a result."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    f = open(path, "w", encoding="utf-8")  # if this fails, nothing has changed
    try:
        with f:
            f.write(text)
    except OSError:
        with contextlib.suppress(OSError):  # the first error is the one to tell
            os.remove(path)
        raise


def keep(text, name, suffix):
    """Save `text` after its destination failed: a new file in the temporary folder, else in the
    current one. Returns its path; if neither takes it, prints it and returns None."""
    for folder in (tempfile.gettempdir(), os.getcwd()):
        try:
            fd, path = tempfile.mkstemp(prefix=name + "-", suffix=suffix, dir=folder)
        except OSError:
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            return path
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(path)
    print(text)
    sys.stdout.flush()
    return None
