"""machinery/records.py: JSON and JSONL files read as data. Every problem is one ValueError line naming
the file (and the line); a last line cut by a kill is skipped only where the caller asks."""
import os

import pytest

from machinery import records
from machinery.records import read_json, read_jsonl


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def one_line_error(call):
    with pytest.raises(ValueError) as error:
        call()
    assert "\n" not in str(error.value)
    return str(error.value)


# ---------------------------------------------------------------- read_json
def test_read_json_gives_the_object(tmp_path):
    path = write(tmp_path, "args.json", '\ufeff{"env": "search", "steps": 3}')  # a BOM is fine
    assert read_json(path) == {"env": "search", "steps": 3}
    assert read_json(path, {"env": str}) == {"env": "search", "steps": 3}


@pytest.mark.parametrize("data, problem", [
    ("", "args.json: bad JSON (the file is empty)"),
    ("  \n", "args.json: bad JSON (the file is empty)"),
    ("{", "args.json: bad JSON (Expecting property name"),
    ("[1, 2]", "args.json must hold a JSON object, not a list"),
    ('"text"', "args.json must hold a JSON object, not a str"),
    (b'{"env": "\xff"}', "args.json: not UTF-8 text; save the file as UTF-8"),
    ("[" * 100000, "args.json: bad JSON"),  # nesting too deep for the parser: still one line
    ('{"algo": "mt"}', "args.json: missing key 'env'"),
    ('{"env": 3}', "args.json: 'env' must be a str, got int"),
])
def test_read_json_names_the_file_and_the_problem(tmp_path, data, problem):
    path = write(tmp_path, "args.json", data)
    assert one_line_error(lambda: read_json(path, {"env": str})).startswith(os.path.join(str(tmp_path), problem))


def test_read_json_of_a_folder_or_a_missing_file(tmp_path):
    assert one_line_error(lambda: read_json(str(tmp_path))) == f"{tmp_path} is a folder, not a JSON file"
    missing = str(tmp_path / "nope.json")
    assert one_line_error(lambda: read_json(missing)) == f"{missing}: cannot read it (No such file or directory)"


# ---------------------------------------------------------------- read_jsonl
LOG = '{"step": 0, "reward": 0.5}\n\n{"step": 1, "reward": 1.0}\n'


def test_read_jsonl_gives_the_records(tmp_path):
    path = write(tmp_path, "log.jsonl", "\ufeff" + LOG)  # a BOM and a blank line are skipped
    assert read_jsonl(path, {"step": int}) == [{"step": 0, "reward": 0.5}, {"step": 1, "reward": 1.0}]
    assert read_jsonl(write(tmp_path, "no_newline.jsonl", LOG.rstrip("\n")), {"step": int})[-1] == {
        "step": 1, "reward": 1.0}  # a whole last line without a newline is a record, cut_end or not


@pytest.mark.parametrize("line, problem", [
    ('{"step": 2, "rew', "line 4: bad JSON (Unterminated string"),
    ("[1, 2]", "line 4: expected a JSON object"),
    ('"step"', "line 4: expected a JSON object"),
    ('{"reward": 1}', "line 4: missing key 'step'"),
    ('{"step": "2"}', "line 4: 'step' must be an int, got str"),
    ('{"step": true}', "line 4: 'step' must be an int, got bool"),  # JSON true is not a step
    ('{"step": 2.0}', "line 4: 'step' must be an int, got float"),
    (b'{"step": 2, "x": "\xff"}', "line 4: not UTF-8 text; save the file as UTF-8"),
])
def test_a_bad_line_is_named_with_its_number(tmp_path, line, problem):
    line = line if isinstance(line, bytes) else line.encode()
    path = write(tmp_path, "log.jsonl", LOG.encode() + line + b"\n" + b'{"step": 3}\n')
    message = one_line_error(lambda: read_jsonl(path, {"step": int}, cut_end=True))
    assert message.startswith(f"{path}, {problem}")


@pytest.mark.parametrize("cut", [b'{"step": 2, "rew', b'{"step": 2, "x": "\xc3'])  # a kill mid-write
def test_a_cut_last_line_is_skipped_only_when_asked(tmp_path, cut):
    path = write(tmp_path, "log.jsonl", LOG.encode() + cut)
    assert [r["step"] for r in read_jsonl(path, {"step": int}, cut_end=True)] == [0, 1]
    assert one_line_error(lambda: read_jsonl(path, {"step": int})).startswith(f"{path}, line 4: ")


def test_a_cut_line_that_is_not_the_last_is_named(tmp_path):
    path = write(tmp_path, "log.jsonl", LOG + '{"step": 2, "rew\n{"step": 3}\n')
    assert one_line_error(lambda: read_jsonl(path, {"step": int}, cut_end=True)).startswith(
        f"{path}, line 4: bad JSON")


def test_problem_of_checks_what_the_types_cannot(tmp_path):
    path = write(tmp_path, "qa.jsonl", '{"q": "a"}\n{"q": ""}\n')
    blank = lambda record: None if record["q"] else "empty q"  # noqa: E731
    assert one_line_error(lambda: read_jsonl(path, {"q": str}, blank)) == f"{path}, line 2: empty q"


def test_no_records_a_folder_and_a_missing_file(tmp_path):
    empty = write(tmp_path, "empty.jsonl", "\n\n")
    assert one_line_error(lambda: read_jsonl(empty, {})) == f"{empty}: no records"
    assert read_jsonl(empty, {}, empty=True) == []
    assert read_jsonl(write(tmp_path, "cut.jsonl", '{"st'), {}, cut_end=True, empty=True) == []
    assert one_line_error(lambda: read_jsonl(str(tmp_path), {})) == f"{tmp_path} is a folder, not a JSONL file"
    missing = str(tmp_path / "nope.jsonl")
    assert one_line_error(lambda: read_jsonl(missing, {})) == f"{missing}: cannot read it (No such file or directory)"


def test_a_fifo_a_device_and_a_huge_file_are_one_line_each_and_nothing_hangs(tmp_path):
    """A FIFO with no writer would block open() forever; /dev/zero would be read until memory runs
    out; a file past the limit is refused after limit + 1 bytes. Every reader (JSON, JSONL, the
    --from files of tools/credit.py and tools/credit_bias.py) goes through read_bytes."""
    import os
    import time

    from tools import credit_report
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.time()
    for path, what in ((fifo, "is a FIFO"), ("/dev/zero", "is a device")):
        with pytest.raises(ValueError, match=what):
            records.read_json(str(path))
        with pytest.raises(ValueError, match=what):
            records.read_jsonl(str(path), {})
        with pytest.raises(SystemExit, match=what):
            credit_report.read_result(str(path))
    assert time.time() - t0 < 5
    big = tmp_path / "big.json"
    big.write_bytes(b"{}" + b" " * 100)
    with pytest.raises(ValueError, match="larger than"):
        records.read_bytes(str(big), "JSON", limit=50)
    assert records.read_bytes(str(big), "JSON", limit=102) == b"{}" + b" " * 100
