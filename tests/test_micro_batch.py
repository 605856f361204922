"""--micro-batch-size auto (machinery/micro_batch.py): the most rows, up to 8 on a CPU and 32 on a GPU,
whose activations fit half the free memory; parsed from the command line and chosen once the
models are loaded."""
import os
from types import SimpleNamespace

import pytest

import train
from machinery import micro_batch


def model(vocab=49152, layers=30, hidden=576):
    config = SimpleNamespace(vocab_size=vocab, num_hidden_layers=layers, hidden_size=hidden)
    config.get_text_config = lambda: config
    return SimpleNamespace(config=config)


def test_bytes_per_token_by_hand():
    # the bundled model: 4 * (3 * 49152 + 18 * 30 * 576) = 4 * (147456 + 311040) = 1,833,984 bytes
    assert micro_batch.bytes_per_token(model().config) == 1_833_984


@pytest.mark.parametrize("free_gib, rows", [(24, 8), (7.1, 8), (6.9, 4), (3.6, 4), (3.4, 2), (1.8, 2), (1.7, 1),
                                             (0.1, 1)])
def test_the_most_rows_whose_activations_fit_half_the_free_memory(monkeypatch, capsys, free_gib, rows):
    # a row: 4 * 64 tokens * 1,833,984 bytes = 0.437 GiB; twice the rows' share must be free:
    # 8 rows 7.0 GiB, 4 rows 3.5 GiB, 2 rows 1.75 GiB
    monkeypatch.setattr(micro_batch, "free_bytes", lambda device: (free_gib * 2 ** 30, "MemAvailable"))
    got, why = micro_batch.auto_micro_batch(model(), "cpu", 64), capsys.readouterr().out
    assert got == rows and f"micro-batch {rows} rows (auto: {free_gib:.1f} GiB free (MemAvailable)" in why and "0.44 GiB a row" in why


@pytest.mark.parametrize("free_gib, rows", [(137, 32), (28.0, 32), (27.9, 16), (20, 16), (14.0, 16), (13.9, 8)])
def test_a_gpu_goes_up_to_32_rows(monkeypatch, capsys, free_gib, rows):
    # the same 0.437 GiB a row: 32 rows need 27.98 GiB free, 16 rows 13.99 GiB; a CPU stops at 8
    monkeypatch.setattr(micro_batch, "free_bytes", lambda device: (free_gib * 2 ** 30, "MemAvailable"))
    assert micro_batch.auto_micro_batch(model(), "cuda", 64) == rows
    assert micro_batch.auto_micro_batch(model(), "cuda:1", 64) == rows
    assert micro_batch.auto_micro_batch(model(), "cpu", 64) == 8


def test_unreadable_free_memory_falls_back_to_two_rows(monkeypatch):
    monkeypatch.setattr(micro_batch, "free_bytes", lambda device: (None, "the free memory could not be read"))
    assert micro_batch.auto_micro_batch(model(), "cpu", 64) == 2


def test_free_memory_is_read_on_this_machine():
    import torch
    free, where = micro_batch.free_bytes(torch.device("cpu"))
    assert free is None or free > 0 and where


@pytest.mark.parametrize("given, want", [(["--micro-batch-size", "auto"], 0), ([], 0),
                                         (["--micro-batch-size", "3"], 3)])
def test_the_flag_takes_a_number_or_auto(given, want):
    assert train.parse_args(given).micro_batch_size == want


@pytest.mark.parametrize("bad", ["-1", "0", "many", "2.5"])
def test_a_bad_micro_batch_is_one_line(bad, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--micro-batch-size", bad])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--micro-batch-size" in err and "Traceback" not in err


def test_a_run_chooses_its_micro_batch_once_and_keeps_it(tmp_path, tiny_model_dir, capsys):
    import json
    out = tmp_path / "run"
    train.main(["--model", tiny_model_dir, "--steps", "1", "--batch-size", "1", "--num-generations", "2",
                "--max-completion-length", "4", "--eval-every", "0", "--bf16", "false", "--out", str(out)])
    rows = json.load(open(out / "args.json"))["micro_batch_size"]
    assert rows in (1, 2, 4, 8) and f"micro-batch {rows} rows (auto" in capsys.readouterr().out


def fake_linux(tmp_path, monkeypatch, available_kib, cgroup_line, files):
    """/proc/meminfo, /proc/self/cgroup and the cgroup files, in tmp_path."""
    (tmp_path / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable: {available_kib} kB\n")
    (tmp_path / "cgroup").write_text(cgroup_line + "\n")
    for name, text in files.items():
        (tmp_path / "sys" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "sys" / name).write_text(text)
    monkeypatch.setattr(micro_batch, "PROC_MEMINFO", str(tmp_path / "meminfo"))
    monkeypatch.setattr(micro_batch, "PROC_CGROUP", str(tmp_path / "cgroup"))
    monkeypatch.setattr(micro_batch, "CGROUP_ROOT", str(tmp_path / "sys"))
    (tmp_path / "statm").write_text("100000 65536 1000 10 0 5000 0\n")
    monkeypatch.setattr(micro_batch, "PROC_STATM", str(tmp_path / "statm"))


GIB = 2 ** 30


@pytest.mark.parametrize("cgroup_line, files, want", [
    # v1, a 1.5 GiB limit with 0.5 GiB used: 1 GiB left, not the host's 17.9 GiB
    ("7:memory:/docker/abc", {"memory/docker/abc/memory.limit_in_bytes": str(3 * GIB // 2),
                              "memory/docker/abc/memory.usage_in_bytes": str(GIB // 2)},
     (GIB, "the memory cgroup's memory.limit_in_bytes - memory.usage_in_bytes")),
    # v2, 4 GiB limit, 1 GiB used
    ("0::/slurm/job1", {"slurm/job1/memory.max": str(4 * GIB), "slurm/job1/memory.current": str(GIB)},
     (3 * GIB, "the memory cgroup's memory.max - memory.current")),
    ("0::/user.slice", {"user.slice/memory.max": "max", "user.slice/memory.current": str(GIB)},  # no limit
     (int(17.9 * GIB) // 1024 * 1024, "MemAvailable")),
    ("7:memory:/", {"memory/memory.limit_in_bytes": str(2 ** 63 - 4096), "memory/memory.usage_in_bytes": "1"},  # v1 unlimited
     (int(17.9 * GIB) // 1024 * 1024, "MemAvailable")),
    ("0::/big", {"big/memory.max": str(64 * GIB), "big/memory.current": "0"},  # a limit above what is free
     (int(17.9 * GIB) // 1024 * 1024, "MemAvailable")),
    # the limit on a parent cgroup, the process's own memory.max "max": 1 GiB - 0.25 GiB, not the host's
    ("0::/slurm/job1", {"slurm/memory.max": str(GIB), "slurm/memory.current": str(GIB // 4),
                        "slurm/job1/memory.max": "max", "slurm/job1/memory.current": str(GIB // 8)},
     (3 * GIB // 4, "the memory cgroup's memory.max - memory.current of /slurm")),
    # the tighter of two limits: the process's own 2 GiB (1.5 left) and its parent's 8 GiB (7 left)
    ("0::/a/b", {"a/memory.max": str(8 * GIB), "a/memory.current": str(GIB), "a/b/memory.max": str(2 * GIB),
                 "a/b/memory.current": str(GIB // 2)}, (3 * GIB // 2, "the memory cgroup's memory.max - memory.current")),
    # memory.current unreadable: the limit less what the process holds (statm: 65536 pages resident)
    ("0::/job", {"job/memory.max": str(GIB)},
     (GIB - 65536 * os.sysconf("SC_PAGE_SIZE"),
      "the memory cgroup's memory.max - this process's memory (memory.current unreadable)"))])
def test_auto_in_a_container_reads_its_memory_cgroup(tmp_path, monkeypatch, capsys, cgroup_line, files, want):
    """Inside a memory cgroup (docker -m, Slurm, Kubernetes) the host's MemAvailable is not what the
    run may use: the smaller of it and the cgroup's limit less its usage, and the line says which."""
    fake_linux(tmp_path, monkeypatch, int(17.9 * GIB) // 1024, cgroup_line, files)
    assert micro_batch.free_bytes("cpu") == want
    micro_batch.auto_micro_batch(model(), "cpu", 64)
    assert f"({want[1]})" in capsys.readouterr().out
