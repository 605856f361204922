"""tools/show.py: hand-built rollout files in, one HTML page out; plus a headless Chromium screenshot."""
import json
import os
import re
import struct
import subprocess
import zlib

import pytest

from machinery import checkpoint, rollout_files
from tools import show

PROMPT = ["<|im_start|>", "user\nWho wrote Hamlet?", "<|im_end|>\n"]
TURN1 = ["<reasoning>", "look it up", "</reasoning>\n", "<tool>", "Hamlet", "</tool>"]
ENV = ["\n<result>", "Hamlet is a play by Shakespeare & co", "</result>\n"]
TURN2 = ["<answer>", "Shakespeare", "</answer>"]


def episode(group, a1, a2, rewards):
    """One MT-GRPO search sample: prompt, turn 1 (advantage a1), tool result, turn 2 (a2)."""
    parts = [(PROMPT, 0, 0, 0.0), (TURN1, 1, 1, a1), (ENV, 0, 0, 0.0), (TURN2, 1, 2, a2)]
    row = {"group": group, "role": "", "rewards": rewards, "tokens": [], "mask": [], "adv": [], "turn": []}
    for toks, m, t, a in parts:
        row["tokens"] += toks
        row["mask"] += [m] * len(toks)
        row["adv"] += [a] * len(toks)
        row["turn"] += [t] * len(toks)
    return row


def make_run(tmp_path, steps, env="search", algo="mt"):
    """OUT with args.json and rollouts/step_N.jsonl for each {N: rows}."""
    out = tmp_path / "run"
    (out / "rollouts").mkdir(parents=True)
    (out / "args.json").write_text(json.dumps({"env": env, "algo": algo}))
    for n, rows in steps.items():
        (out / "rollouts" / f"step_{n}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(out)


# Group 0 has all-zero advantages (equal rewards); group 1 trains. max |A| of group 1 is 1.5.
SEARCH = [episode("question 1: who?", 0.0, 0.0, [0.2, 1.0]), episode("question 1: who?", 0.0, 0.0, [0.2, 1.0]),
          episode("question 2: Who wrote Hamlet?", 1.5, -0.5, [0.7, 1.9]),
          episode("question 2: Who wrote Hamlet?", -1.5, 0.5, [0.0, 0.5])]


def render(tmp_path, steps=None, args=(), **kw):
    out = make_run(tmp_path, steps or {1: SEARCH}, **kw)
    path = show.main([out, *args])
    return out, path, open(path, encoding="utf-8").read()


def test_colour_by_hand():
    assert show.colour(0.0, 1.5) == "rgb(255,255,255)"
    assert show.colour(1.5, 1.5) == "rgb(70,180,90)"  # +max: POS
    assert show.colour(-1.5, 1.5) == "rgb(220,70,60)"  # -max: NEG
    assert show.colour(9.0, 1.5) == "rgb(70,180,90)"  # clipped
    # -0.5 / 1.5 = -1/3: 255 - 35/3 = 243.3, 255 - 185/3 = 193.3, 255 - 195/3 = 190
    assert show.colour(-0.5, 1.5) == "rgb(243,193,190)"
    assert show.colour(0.3, 0.0) == "rgb(255,255,255)"  # a group with no advantage stays white


def test_page_of_a_search_group(tmp_path, capsys):
    out, path, page = render(tmp_path)
    assert path == os.path.join(out, "show_step_1.html") and capsys.readouterr().out.strip() == path
    assert "question 2: Who wrote Hamlet?" in page and "algo mt (MT-GRPO" in page  # default group: 1
    assert "<answer>" not in page and "&lt;answer&gt;" in page and "Shakespeare &amp; co" in page
    assert "<tool>" not in page and "&lt;|im_start|&gt;" in page
    assert page.count('class="mark">turn 1<') == 2 and page.count('class="mark">turn 2<') == 2
    assert page.count('class="mark env">environment<') == 1 + 2  # legend + one per rollout
    assert "turn 1: 0.700, turn 2 (outcome): 1.900" in page  # rewards of rollout 0
    assert "turn 1: +1.500" in page and "turn 2: -0.500" in page  # per-turn advantages
    # rollout 0's tool-call turn at +max, its answer turn at -1/3 of max; rollout 1 the mirror
    assert 'style="background:rgb(70,180,90)" title="advantage +1.5000">&lt;tool&gt;</span>' in page
    assert 'style="background:rgb(243,193,190)" title="advantage -0.5000">Shakespeare</span>' in page
    assert 'style="background:rgb(220,70,60)" title="advantage -1.5000">Hamlet</span>' in page
    # masked tokens are grey runs without a colour: only the 2 x 9 model tokens are coloured
    assert page.count('class="t"') == 2 * (len(TURN1) + len(TURN2))
    assert '\n<span class="mark env">environment</span><span class="m">&lt;result&gt;Hamlet is a play by Shakespeare &amp; co&lt;/result&gt;\n</span>' in page
    assert page.count("user\nWho wrote Hamlet?") == 1  # the shared prompt is shown once
    assert "chosen (best" not in page  # only AT-GRPO continues from a chosen candidate
    assert "http" not in page and "<script" not in page  # self-contained


def test_group_and_step_selection(tmp_path):
    zero = SEARCH[:2]
    out, path, page = render(tmp_path, {1: zero, 2: SEARCH}, args=["--group", "0", "--out", str(tmp_path / "p.html")])
    assert path == str(tmp_path / "p.html")  # default step: the last one, 2
    assert "step 2 · group 0 (of 0-1): question 1: who?" in page and "rgb(255,255,255)" in page
    assert "all 0 in this group (equal rewards)" in page
    page = open(show.main([out, "--step", "1"])).read()
    assert "group 0 (of 0-0): question 1: who?" in page  # no group trains: the first one
    assert rollout_files.pick_group(rollout_files.groups_of(SEARCH)) == 1


def test_at_grpo_group_marks_the_chosen_candidate(tmp_path):
    prompt = ["<|im_start|>", "You are the planner.\n#  $ @", "<|im_end|>\n"]
    rows = [{"group": "level 17 / planner / turn 1", "role": "planner", "rewards": [r],
             "tokens": prompt + [f"<answer>{m}</answer>"], "mask": [0, 0, 0, 1], "adv": [0, 0, 0, a],
             "turn": [0, 0, 0, 1]} for r, a, m in [(0.5, -1.1547, "Up"), (1.0, 0.5774, "Left"), (1.0, 0.5774, "Right")]]
    out, path, page = render(tmp_path, {3: rows}, env="sokoban", algo="at")
    assert "AT-GRPO" in page and "planner" in page and "level 17 / planner / turn 1" in page
    assert page.count("You are the planner.") == 1 and "all 3 rollouts share" in page
    assert page.count("chosen (best reward)") == 1  # tie 1.0 / 1.0: the lowest index, rollout 1
    assert page.index("<b>rollout 1</b>") < page.index("chosen (best reward)") < page.index("<b>rollout 2</b>")
    assert "turn 1: 1.000" in page and "#  $ @" in page  # the reward belongs to its turn
    assert 'rgb(220,70,60)" title="advantage -1.1547">&lt;answer&gt;Up&lt;/answer&gt;' in page
    executor_turn_2 = {"group": "level 17 / executor / turn 2", "rewards": [0.3], "adv": [0.0, 1.0], "mask": [0, 1],
                       "turn": [0, 2]}
    assert show.reward_labels(executor_turn_2) == ["turn 2"]


def test_grpo_baseline_group_shows_each_prompt(tmp_path):
    rows = [{"group": "trajectories of level 0", "role": role, "rewards": [1.0], "tokens": [f"prompt {role}", "go"],
             "mask": [0, 1], "adv": [0, 0.7], "turn": [0, t]} for role, t in [("planner", 1), ("executor", 2)]]
    page = render(tmp_path, {1: rows}, env="sokoban", algo="grpo")[2]
    assert page.count("<details><summary>prompt (1 tokens, masked)") == 2 and "chosen (best" not in page
    assert page.count("trajectory return: 1.000") == 2  # not a turn's reward: the whole trajectory's


def test_errors_say_what_to_do(tmp_path):
    with pytest.raises(SystemExit, match="no such folder"):
        show.main([str(tmp_path / "nope")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="train with train.py first; rollouts are saved at every step"):
        show.main([str(tmp_path / "empty")])
    out = make_run(tmp_path, {1: SEARCH, 2: SEARCH})
    with pytest.raises(SystemExit, match="available steps: 1, 2"):
        show.main([out, "--step", "7"])
    with pytest.raises(SystemExit, match=r"this step has 2 groups; pick one of 0\.\.1"):
        show.main([out, "--group", "2"])
    bad = {"not json {": "line 2: bad JSON", json.dumps({"group": "g"}): "line 2: missing key",
           json.dumps({**SEARCH[0], "adv": [0.0]}): "differ in length", "[1, 2]": "expected a JSON object",
           json.dumps({**SEARCH[0], "mask": 1}): "'mask' must be a list"}
    for line, msg in bad.items():
        with open(os.path.join(out, "rollouts", "step_2.jsonl"), "w") as f:
            f.write(json.dumps(SEARCH[0]) + "\n" + line + "\n")
        with pytest.raises(SystemExit, match=msg):
            show.main([out])


# ---------------------------------------------------------------- headless Chromium
def read_png(path):
    """(width, height, bytes per pixel, rows) of an 8-bit non-interlaced RGB/RGBA PNG (zlib only)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", data[pos + 8:pos + 21])
        elif kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6) and not interlace, "only 8-bit RGB/RGBA, not interlaced"
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):  # undo each row's filter: 0 none, 1 sub, 2 up, 3 average, 4 Paeth
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f in (1, 3, 4):
            for i in range(stride):
                left, up = (line[i - bpp] if i >= bpp else 0), prev[i]
                ul = prev[i - bpp] if i >= bpp else 0
                if f == 1:
                    pred = left
                elif f == 3:
                    pred = (left + up) >> 1
                else:
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else up if pb <= pc else ul
                line[i] = (line[i] + pred) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


@pytest.mark.chromium
def test_chromium_screenshot_is_not_blank(tmp_path):
    out, path, _ = render(tmp_path)
    png = str(tmp_path / "shot.png")
    run = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                          "--window-size=1200,900", f"--user-data-dir={tmp_path / 'profile'}",
                          "file://" + os.path.abspath(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and os.path.exists(png), run.stderr[-2000:]
    w, h, bpp, rows = read_png(png)
    assert (w, h) == (1200, 900)
    pixels = {bytes(r[i:i + 3]) for r in rows for i in range(0, w * bpp, bpp)}
    assert len(pixels) > 50  # text, colours and borders, not one flat colour
    near = lambda c: any(all(abs(p[k] - c[k]) <= 3 for k in range(3)) for p in pixels)
    assert near(show.POS) and near(show.NEG)  # the +max and -max tool-call turns are on screen


def test_token_texts_keep_split_characters_whole(tokenizer):
    ids = tokenizer("Tokyo 東京 Maß", add_special_tokens=False)["input_ids"]
    texts = checkpoint.token_pieces(tokenizer, ids)
    assert len(texts) == len(ids) and "".join(texts) == "Tokyo 東京 Maß"
    assert "\ufffd" not in "".join(texts) and " 東" in texts and "京" in texts


def test_a_step_file_that_is_a_folder_and_a_page_into_a_new_folder(tmp_path):
    out = make_run(tmp_path, {1: SEARCH, 2: SEARCH})
    page = show.main([out, "--out", str(tmp_path / "pages" / "new" / "p.html")])  # the folder is made
    assert os.path.exists(page)
    os.remove(os.path.join(out, "rollouts", "step_2.jsonl"))
    os.makedirs(os.path.join(out, "rollouts", "step_2.jsonl"))
    with pytest.raises(SystemExit, match="step_2.jsonl is a folder, not a JSONL file"):
        show.main([out])


@pytest.mark.parametrize("name", ["rollouts/step_1.jsonl", "log.jsonl", "args.json", "checkpoint/config.json"])
def test_the_page_never_replaces_a_file_of_the_run(tmp_path, name):
    """--out RUN/rollouts/step_1.jsonl replaced the rollouts the page was made from with the page."""
    out = make_run(tmp_path, {1: SEARCH})
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        open(path, "w").write("{}")
    before = open(path).read()
    with pytest.raises(SystemExit, match="is one of the run's own files .*give a file elsewhere"):
        show.main([out, "--out", path])
    assert open(path).read() == before
    assert os.path.exists(show.main([out, "--out", os.path.join(out, "page.html")]))  # elsewhere in the folder: fine


def test_no_page_replaces_another_run_s_files_or_its_own_input(tmp_path):
    """show.py RUN_A --out RUN_B/log.jsonl replaced another run's log (exit 0); so did args.json and a
    rollout step, and --out through RUN/rollouts when that folder is a link to another run's. A hard
    link of the rollouts the page reads is the same file."""
    out = make_run(tmp_path, {1: SEARCH})
    other = tmp_path / "other"
    (other / "rollouts").mkdir(parents=True)
    for name in ("log.jsonl", "args.json", "rollouts/step_2.jsonl"):
        (other / name).write_text("{}\n")
    linked = tmp_path / "linked"
    (linked / "sub").mkdir(parents=True)
    (linked / "args.json").write_text("{}")
    (linked / "log.jsonl").write_text("{}\n")
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "step_2.jsonl").write_text("{}\n")
    os.symlink(tmp_path / "kept", linked / "rollouts")  # a run whose rollouts folder is a link to a plain folder
    for path in (other / "log.jsonl", other / "args.json", other / "rollouts" / "step_2.jsonl",
                 linked / "rollouts" / "step_2.jsonl"):
        before = path.read_text()
        with pytest.raises(SystemExit, match=f"{re.escape(str(path))} is one of the run's own files .*the run in "):
            show.main([out, "--out", str(path)])
        assert path.read_text() == before
    os.link(os.path.join(out, "rollouts", "step_1.jsonl"), tmp_path / "copy.jsonl")
    with pytest.raises(SystemExit, match="is the same file as one the page reads"):
        show.main([out, "--out", str(tmp_path / "copy.jsonl")])
    assert os.path.exists(show.main([out, "--out", str(other / "page.html")]))  # beside a run's files: fine


@pytest.mark.parametrize("row, message", [
    ({**SEARCH[0], "tokens": [1] * len(SEARCH[0]["tokens"])}, "line 2: 'tokens' must hold only strings"),
    ({**SEARCH[0], "adv": ["x"] * len(SEARCH[0]["adv"])}, "line 2: 'adv' must hold only numbers"),
    ({**SEARCH[0], "turn": [None] * len(SEARCH[0]["turn"])}, "line 2: 'turn' must hold only numbers"),
    ({**SEARCH[0], "rewards": ["high"]}, "line 2: 'rewards' must hold only numbers"),
    ({**SEARCH[0], "group": ["g"]}, "line 2: 'group' must be a str, got list"),
    ({**SEARCH[0], "role": 3}, "line 2: 'role' must be a str, got int"),
])
def test_a_row_with_values_of_the_wrong_kind_is_one_line(tmp_path, row, message):
    """Before: a traceback from html.escape, abs() or a dict key."""
    out = make_run(tmp_path, {1: [SEARCH[0], row]})
    with pytest.raises(SystemExit, match=f"step_1.jsonl, {message}; expected one JSON object") as stop:
        show.main([out])
    assert "\n" not in str(stop.value.code)


def test_a_cut_last_rollout_line_is_left_out_with_a_note(tmp_path, capsys):
    """A run killed while writing a step's rollouts: the page shows the rest (--resume rewrites
    that step); a cut line that is not the last is still named."""
    out = make_run(tmp_path, {1: SEARCH})
    path = os.path.join(out, "rollouts", "step_1.jsonl")
    whole = open(path).read()
    with open(path, "a") as f:
        f.write(json.dumps(SEARCH[0])[:40])
    page = open(show.main([out]), encoding="utf-8").read()
    assert page.count('<div class="rollout') == 2  # group 1: its 2 rollouts, nothing lost there
    assert "its last line was cut" in capsys.readouterr().err
    with open(path, "w") as f:
        f.write(json.dumps(SEARCH[0])[:40] + "\n" + whole)
    with pytest.raises(SystemExit, match="step_1.jsonl, line 1: bad JSON"):
        show.main([out])


def test_args_json_is_shown_as_data(tmp_path):
    out, _, text = render(tmp_path)
    with open(os.path.join(out, "args.json"), "w") as f:
        json.dump({"env": 3, "algo": "<b>mt</b>"}, f)
    text = open(show.main([out]), encoding="utf-8").read()
    assert "env 3 · algo &lt;b&gt;mt&lt;/b&gt; (unknown)" in text
    os.remove(os.path.join(out, "args.json"))
    os.makedirs(os.path.join(out, "args.json"))  # a folder: the page names env and algo "?"
    assert "env ? · algo ?" in open(show.main([out]), encoding="utf-8").read()


def test_an_out_that_is_a_file_and_a_page_path_that_is_a_folder(tmp_path):
    out = make_run(tmp_path, {1: SEARCH})
    with pytest.raises(SystemExit, match="args.json: not a folder; pass the --out folder of a train.py run"):
        show.main([os.path.join(out, "args.json")])
    with pytest.raises(SystemExit, match=f"^--out {tmp_path} is a folder; give a file name$"):
        show.main([out, "--out", str(tmp_path)])


# ---------------------------------------------------------------- the AT-GRPO tree as a picture
class Darts:
    """A toy two-agent environment: each turn an "aimer" then a "thrower" say a number; an answer
    scores minus its distance to the turn's target (3, then 7); two turns."""
    roles = ("aimer", "thrower")
    team_share = 0.0  # no shared team term

    def __init__(self):
        self.turn, self.said = 0, []

    @property
    def done(self):
        return self.turn >= 2

    def copy(self):
        twin = Darts()
        twin.turn, twin.said = self.turn, list(self.said)
        return twin

    def messages(self, role):
        return [{"role": "user", "content": f"{role}: {self.said}"}]

    def act(self, role, text):
        target = (3, 7)[self.turn]
        self.said.append(text)
        self.turn += role == "thrower"
        return -abs(int(text) - target)


def answers(role, message_lists):
    """Always "2", "3", "7", "7" in turn; the prompt ids are the prompt text's characters."""
    return [([ord(ch) for ch in m[0]["content"]], [0], t) for m, t in zip(message_lists, ["2", "3", "7", "7"] * 9)]


def svg_nodes(svg):
    """[(column, row, reward, chosen)] of the picture's nodes, and its header texts by class."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    nodes = [(int(g.get("data-column")), int(g.get("data-row")), float(g.get("data-reward")), "chosen" in g.get("class"))
             for g in root.iter(ns + "g") if "node" in g.get("class", "")]
    texts = {}
    for t in root.iter(ns + "text"):
        texts.setdefault(t.get("class"), []).append(t.text)
    return nodes, texts, [(float(l.get("x1")), float(l.get("y1")), float(l.get("x2")), float(l.get("y2")))
                          for l in root.iter(ns + "line")]


def test_tree_picture_of_a_toy_environment():
    """K = 4 answers 2, 3, 7, 7 at every node. Turn 1 (target 3): rewards -1, 0, -4, -4, the tree
    goes on from "3" (row 1); turn 2 (target 7): -5, -4, 0, 0, the tie goes to row 2. Every
    column is one group and one prompt; every node of a column grows from the chosen one before."""
    from atgrpo import tree_rollout
    groups, (final,) = tree_rollout([Darts()], ["e"], answers, K=4)
    nodes, texts, lines = svg_nodes(show.tree_svg(groups, "toy"))
    rewards = [[r for c, _, r, _ in sorted(nodes) if c == col] for col in range(4)]
    assert rewards == [[-1, 0, -4, -4], [-1, 0, -4, -4], [-5, -4, 0, 0], [-5, -4, 0, 0]]
    assert sorted((c, k) for c, k, _, chosen in nodes if chosen) == [(0, 1), (1, 1), (2, 2), (3, 2)]
    assert texts["group"] == ["group (e, aimer, 1)", "group (e, thrower, 1)", "group (e, aimer, 2)", "group (e, thrower, 2)"]
    assert texts["prompts"] == ["1 prompt"] * 4
    assert final.said == ["3", "3", "7", "7"]
    # column 2's four nodes all start at the right edge of column 1's chosen node (row 1)
    x = lambda c: 70 + c * (show.W + show.GAP)  # noqa: E731
    y = lambda k: 74 + k * (show.H + 14) + show.H / 2  # noqa: E731
    assert sorted(l for l in lines if l[2] == x(2)) == sorted((x(1) + show.W, y(1), x(2), y(k)) for k in range(4))


def test_trajectory_picture_of_the_same_toy():
    """The baseline: four trajectories, one per row, each line stays in its row; after the first
    answer the four rows have different prompts; each row ends with its return."""
    from atgrpo import parallel_rollout
    trajectories, _ = parallel_rollout([Darts() for _ in range(4)], answers)
    nodes, texts, lines = svg_nodes(show.trajectories_svg(trajectories, "toy"))
    assert not any(ch for *_, ch in nodes) and len(nodes) == 16
    assert texts["prompts"] == ["1 prompt", "3 prompts", "3 prompts", "3 prompts"]  # rows 2 and 3 said the same
    # row 0 always says 2: -1 -1 (target 3) -5 -5 (target 7); row 1 says 3: 0 0 -4 -4; rows 2, 3 say 7: -4 -4 0 0
    assert texts["note"] == ["return -12.00", "return -8.00", "return -8.00", "return -8.00"]
    assert all(y1 == y2 for _, y1, _, y2 in lines[4:])  # after the start node's four lines, rows never cross


def test_tree_from_a_run_folder(tmp_path):
    """tools/show.py OUT --tree: the groups of the step's first level, the best reward chosen; a run
    whose groups are not AT-GRPO's is refused with one line."""
    def row(group, answer, reward):
        return {"group": group, "role": group.split(" / ")[1], "rewards": [reward], "tokens": ["P", "<answer>", answer],
                "mask": [0, 0, 1], "adv": [0.0, 0.0, 1.0], "turn": [0, 0, 1]}
    rows = [row("level 5 / planner / turn 1", a, r) for a, r in (("U", -0.1), ("R", 1.9))] + \
        [row("level 5 / executor / turn 1", a, r) for a, r in (("R", 1.9), ("x", -3.0))] + \
        [row("level 6 / planner / turn 1", a, r) for a, r in (("D", 0.5), ("L", 0.4))]
    out = make_run(tmp_path, {2: rows}, env="planpath", algo="at")
    path = show.main([out, "--tree"])
    assert path.endswith("tree_step_2.svg")
    nodes, texts, _ = svg_nodes(open(path, encoding="utf-8").read())
    assert sorted(nodes) == [(0, 0, -0.1, False), (0, 1, 1.9, True), (1, 0, 1.9, True), (1, 1, -3.0, False)]
    assert texts["group"] == ["group (e, planner, 1)", "group (e, executor, 1)"]
    nodes, _, _ = svg_nodes(open(show.main([out, "--tree", "--level", "6"]), encoding="utf-8").read())
    assert sorted(nodes) == [(0, 0, 0.5, True), (0, 1, 0.4, False)]
    with pytest.raises(SystemExit, match="--level 9: not in this step; its levels are 5, 6"):
        show.main([out, "--tree", "--level", "9"])
    search = make_run(tmp_path / "s", {1: SEARCH})
    with pytest.raises(SystemExit, match="not from a train.py --algo at run"):
        show.main([search, "--tree"])


# ---------------------------------------------------------------- where the page goes, checked first
def test_an_unwritable_page_is_refused_before_the_rollouts_are_read(tmp_path, monkeypatch):
    """Before: a FIFO hung the tool, /proc and a file's subfolder ended in an OSError after the work."""
    out = make_run(tmp_path, {1: SEARCH})
    monkeypatch.setattr(show, "read_rollouts", lambda path: pytest.fail("read the rollouts before checking --out"))
    os.mkfifo(tmp_path / "fifo")
    reader = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)  # without the check the write goes through, not hangs
    try:
        for path, says in ((tmp_path / "fifo", "is a FIFO, not a regular file; give a file name"),
                           (tmp_path / "run" / "args.json" / "p.html", "is a file, not a folder; give another path"),
                           ("/proc/no-such/p.html", "cannot be written: no file can be made in /proc")):
            with pytest.raises(SystemExit, match=f"^--out {path} .*{says}"):
                show.main([out, "--out", str(path)])
    finally:
        os.close(reader)
    os.makedirs(os.path.join(out, "show_step_1.html"))  # the default page path, taken by a folder
    with pytest.raises(SystemExit, match=r"show_step_1.html is a folder; give --out FILE elsewhere$"):
        show.main([out])
    assert sorted(os.listdir(out)) == ["args.json", "rollouts", "show_step_1.html"]  # nothing left behind


def tree_row(group, answer, reward):
    return {"group": group, "role": group.split(" / ")[1], "rewards": [reward], "tokens": ["P", "<answer>", answer],
            "mask": [0, 0, 1], "adv": [0.0, 0.0, 1.0], "turn": [0, 0, 1]}


def test_a_tree_with_rows_missing_says_so(tmp_path, capsys):
    """K = 2 (args.json): the executor's turn 1 has one candidate and the planner's turn 2 none,
    though the executor's turn 2 is there. The picture draws what is there, dashed boxes where
    candidates are missing, and a caption; the console says it too. A complete tree says nothing."""
    rows = [tree_row("level 5 / planner / turn 1", a, r) for a, r in (("U", -0.1), ("R", 1.9))] + \
        [tree_row("level 5 / executor / turn 1", "R", 1.9)] + \
        [tree_row("level 5 / executor / turn 2", a, r) for a, r in (("D", 0.5), ("L", 0.4))]
    out = make_run(tmp_path, {2: rows}, env="planpath", algo="at")
    (tmp_path / "run" / "args.json").write_text(json.dumps({"env": "planpath", "algo": "at", "num_generations": 2}))
    svg = open(show.main([out, "--tree"]), encoding="utf-8").read()
    says = "rows missing from the step file: turn 1 executor 1 of 2, turn 2 planner 0 of 2 candidates"
    assert f"step_2.jsonl: {says}" in capsys.readouterr().err
    nodes, texts, _ = svg_nodes(svg)
    assert texts["caption"][0].startswith(says) and len(nodes) == 5
    assert svg.count('class="hole" data-column="1" data-row="1"') == 1 and svg.count('class="hole"') == 1
    assert "K = 2" in texts[None][0]
    (tmp_path / "run" / "args.json").write_text(json.dumps({"env": "planpath", "algo": "at", "num_generations": 3}))
    show.main([out, "--tree"])  # K from args.json, not only from the largest group
    assert "turn 1 planner 2 of 3, turn 1 executor 1 of 3, turn 2 planner 0 of 3, turn 2 executor 2 of 3" in capsys.readouterr().err
    whole = make_run(tmp_path / "whole", {1: rows[:2] + [tree_row("level 5 / executor / turn 1", "x", -3.0)] + rows[2:3]})
    nodes, texts, _ = svg_nodes(open(show.main([whole, "--tree"]), encoding="utf-8").read())
    assert "caption" not in texts and len(nodes) == 4 and "missing" not in capsys.readouterr().err


def test_a_cut_last_line_in_a_tree_is_a_missing_row(tmp_path, capsys):
    """What a kill leaves: the last candidate of the last column is left out with a note, and the
    tree names it as missing (K from the step's largest group: args.json does not say)."""
    rows = [tree_row("level 5 / planner / turn 1", a, r) for a, r in (("U", -0.1), ("R", 1.9))] + \
        [tree_row("level 5 / executor / turn 1", a, r) for a, r in (("R", 1.9), ("x", -3.0))]
    out = make_run(tmp_path, {1: rows[:3]})
    with open(os.path.join(out, "rollouts", "step_1.jsonl"), "a") as f:
        f.write(json.dumps(rows[3])[:30])
    svg = open(show.main([out, "--tree"]), encoding="utf-8").read()
    err = capsys.readouterr().err
    assert "its last line was cut" in err and "turn 1 executor 1 of 2 candidates" in err
    assert "turn 1 executor 1 of 2 candidates" in svg_nodes(svg)[1]["caption"][0]
