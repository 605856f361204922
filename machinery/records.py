"""The project's JSON and JSONL files read as data, in one place: questions, corpora, run logs,
rollouts and args.json. Every problem is a ValueError naming the file, the line and what is
wrong, in one line; callers add what to do and stop with it. Nothing read here can run code (no
pickle).

A bad line is always named, never skipped: a log is rewritten by --resume, so a skipped line
would be a deleted line. The one exception is what a kill leaves: a last line cut short.
"""
import json
import math
import os
import stat


def read_json(path, types=None):
    """The JSON object (a dict) in a UTF-8 file, whose keys have the given types (see
    read_jsonl); otherwise ValueError saying what is wrong."""
    text = read_bytes(path, "JSON")
    try:
        record = json.loads(text.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text; save the file as UTF-8") from None
    except (ValueError, RecursionError) as e:
        why = "the file is empty" if not text.strip() else str(e).splitlines()[0]
        raise ValueError(f"{path}: bad JSON ({why})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path} must hold a JSON object, not a {type(record).__name__}")
    problem = type_problem(record, types or {})
    if problem:
        raise ValueError(f"{path}: {problem}")
    return record


def finite(x):
    """A JSON number (not a bool) that is finite: what a saved measurement's values must be."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def read_checked(path, types, problem_of, tool):
    """read_json, then problem_of(record) (what is wrong, or None); either's problem stops with one
    line naming the file and the tool that makes such files."""
    try:
        record = read_json(path, types)
        why = problem_of(record)
    except ValueError as e:  # read_json's one line names the file first
        why = str(e).removeprefix(path).removeprefix(":").strip()
    if why:
        raise SystemExit(f"{path} is not a {tool} --json file: {why}; make one with python {tool} --json FILE")
    return record


def read_jsonl(path, types, problem_of=lambda record: None, cut_end=False, empty=False):
    """The records of a UTF-8 JSONL file (a leading BOM and blank lines skipped), each an object
    whose keys have the given types ({key: type}) and for which problem_of finds nothing wrong;
    otherwise ValueError naming the line. cut_end: a last line with no newline after it that is
    not JSON (what a kill mid-write leaves in a log) is skipped. empty: no records is no error."""
    raw = read_bytes(path, "JSONL").split(b"\n")
    records = []
    for number, raw_line in enumerate(raw, 1):
        cut = cut_end and number == len(raw)  # no newline after it: a write that was cut
        try:
            line = raw_line.decode("utf-8-sig" if number == 1 else "utf-8")
            if not line.strip():
                continue
            record = json.loads(line)
        except UnicodeDecodeError:
            if cut:
                continue
            raise ValueError(f"{path}, line {number}: not UTF-8 text; save the file as UTF-8") from None
        except (ValueError, RecursionError) as e:
            if cut:
                continue
            raise ValueError(f"{path}, line {number}: bad JSON ({e})") from None
        problem = type_problem(record, types) or problem_of(record)
        if problem:
            raise ValueError(f"{path}, line {number}: {problem}")
        records.append(record)
    if not records and not empty:
        raise ValueError(f"{path}: no records")
    return records


LIMIT = 256 * 2 ** 20  # bytes: the largest file the project writes and reads back is under 1 MB


def read_bytes(path, kind, limit=LIMIT):
    """The bytes of a regular file of at most `limit` bytes; otherwise ValueError in one line. A
    FIFO, a device (/dev/zero) or a socket is refused before a byte is read (opened without
    blocking, so a FIFO with no writer cannot hang the reader), and so is a folder."""
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder, not a {kind} file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ValueError(f"{path}: cannot read it ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file"
            raise ValueError(f"{path} is {what}, not a {kind} file; give a regular file")
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise ValueError(f"{path}: cannot read it ({e.strerror or e})") from None
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit // 2 ** 20} MB, more than any {kind} file of this project; "
                         "give the file the tool wrote")
    return data


def type_problem(record, types):
    """What is wrong with a record that should map each key of types to that type, or None.
    A bool is not an int here (JSON true is not a step number)."""
    if not isinstance(record, dict):
        return "expected a JSON object"
    for key, kind in types.items():
        if key not in record:
            return f"missing key '{key}'"
        if not isinstance(record[key], kind) or (kind is int and isinstance(record[key], bool)):
            a = "an" if kind.__name__[0] in "aeiou" else "a"
            return f"'{key}' must be {a} {kind.__name__}, got {type(record[key]).__name__}"
    return None
