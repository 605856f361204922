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
    try:
        hparams = ea.PluginTagToContent("hparams")
    except KeyError:  # a folder whose writer wrote no flags
        hparams = {}
    return got, hparams


def read_wandb(out, names=None):
    """[(step, tag, value)] of every offline session of the run, and its ids and config (and in
    `names`, if given, each session's (project, display name))."""
    got, ids, config = [], set(), {}
    for path in sorted(glob.glob(os.path.join(out, "wandb", "offline-run-*", "run-*.wandb"))):
        for r in trackers.wandb_records(path):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                ids.add(r.run.run_id)
                if names is not None:
                    names.append((r.run.project, r.run.display_name))
                config.update({i.key: json.loads(i.value_json) for i in r.run.config.update})
            if kind == "history":
                row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
                got += [(row["_step"], k, v) for k, v in row.items()
                        if not k.startswith(("_", *(t + "/" for t in trackers.TABLES)))]
                got += [(row["_step"], t, row[t + "/nrows"]) for t in trackers.TABLES if row.get(t + "/_type") == "table-file"]
    return got, ids, config


def trackio_run(out, run_name=None):
    return f"{run_name or os.path.basename(out)}-{json.load(open(os.path.join(out, 'trackers.json')))['id']}"


def read_trackio(out, project=trackers.PROJECT, run_name=None):
    """[(step, tag, value)] of the run in Trackio's local store, and its config."""
    from trackio.sqlite_storage import SQLiteStorage
    name = trackio_run(out, run_name)
    got = [(row["step"], k, len(v["_value"]) if k in trackers.TABLES else v)
           for row in SQLiteStorage.get_logs(project, name) for k, v in row.items()
           if k not in ("step", "timestamp")]
    return got, SQLiteStorage.get_run_config(project, name)


READ = {"tensorboard": lambda out: read_tensorboard(out)[0], "wandb": lambda out: read_wandb(out)[0],
        "trackio": lambda out: read_trackio(out)[0]}
