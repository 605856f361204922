"""Each tracker's store read back with the tracker's own reader, as [(step, tag, value)]: what
tests/test_trackers.py holds against log.jsonl and scripts/kill_resume.py --report-to counts after
its kills. TensorBoard: its event reader; W&B: the offline run file; Trackio: its local store."""
import glob
import json
import os

from machinery import trackers


def read_tensorboard(out):
    """[(step, tag, value)] of OUT/tensorboard as TensorBoard's own reader gives them: scalars
    (float32), text, and the hyperparameters' plugin."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(os.path.join(out, "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    got = [(e.step, t, e.value) for t in ea.Tags()["scalars"] for e in ea.Scalars(t)]
    got += [(e.step, t[:-len("/text_summary")], e.tensor_proto.string_val[0].decode())
            for t in ea.Tags()["tensors"] for e in ea.Tensors(t)]
    return got, ea.PluginTagToContent("hparams")


def wandb_records(path):
    """The protobuf records of a W&B run file: a ':W&B' header, then LevelDB-log blocks of 32 KiB
    whose records (FULL 1, or FIRST 2 / MIDDLE 3 / LAST 4 pieces) have a 7-byte header."""
    from wandb.proto import wandb_internal_pb2 as pb
    data, records, part = open(path, "rb").read(), [], b""
    assert data[:4] == b":W&B"
    pos = 7
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        if left < 7 or kind == 0:  # the block's zero padding
            pos += left
            continue
        part, pos = part + data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            records.append(pb.Record.FromString(part))
            part = b""
    return records


def read_wandb(out):
    """[(step, tag, value)] of every offline session of the run, and its ids and config."""
    got, ids, config = [], set(), {}
    for path in sorted(glob.glob(os.path.join(out, "wandb", "offline-run-*", "run-*.wandb"))):
        for r in wandb_records(path):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                ids.add(r.run.run_id)
                config.update({i.key: json.loads(i.value_json) for i in r.run.config.update})
            if kind == "history":
                row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
                table = row.get("eval/episodes/_type") == "table-file"
                got += [(row["_step"], k, v) for k, v in row.items() if not k.startswith(("_", "eval/episodes/"))]
                got += [(row["_step"], "eval/episodes", row["eval/episodes/nrows"])] if table else []
    return got, ids, config


def trackio_run(out):
    return f"{os.path.basename(out)}-{json.load(open(os.path.join(out, 'trackers.json')))['id']}"


def read_trackio(out):
    """[(step, tag, value)] of the run in Trackio's local store, and its config."""
    from trackio.sqlite_storage import SQLiteStorage
    name = trackio_run(out)
    got = [(row["step"], k, len(v["_value"]) if k == "eval/episodes" else v)
           for row in SQLiteStorage.get_logs(trackers.PROJECT, name) for k, v in row.items()
           if k not in ("step", "timestamp")]
    return got, SQLiteStorage.get_run_config(trackers.PROJECT, name)


READ = {"tensorboard": lambda out: read_tensorboard(out)[0], "wandb": lambda out: read_wandb(out)[0],
        "trackio": lambda out: read_trackio(out)[0]}
