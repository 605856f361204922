"""planpath.py, the game: the grid, the BFS solver (two optimal paths, walls, no path), the rewards
by hand (closer, farther, blocked, the goal with and without the optimal bonus), the levels and
their fixed answers. env_planpath.py, the task: the team reward, the two-role task, and the task
played through atgrpo.py and the evaluation with scripted policies."""
import dataclasses
import re
from pathlib import Path

import pytest
from conftest import full_args

import atgrpo
import env_planpath as pp
import planpath
from evaluate_games import evaluate
from moves import constant_successes
from scripts.planpath_constants import follow_words

OPEN = planpath.parse_grid("#####\n#@..#\n#...#\n#..G#\n#####")  # two ways round: D first or R first
WALLED = planpath.parse_grid("#####\n#@#G#\n#...#\n#####")  # Manhattan 2, BFS 4 (D R R U)
SHUT = planpath.parse_grid("#####\n#@#G#\n#####")


def test_parse_and_render_round_trip_and_bad_grids():
    assert planpath.render(OPEN) == "#####\n#@..#\n#...#\n#..G#\n#####"
    assert (OPEN.pos, OPEN.goal, OPEN.shape) == ((1, 1), (3, 3), (5, 5))
    assert planpath.grid_text(WALLED) == "# # # # #\n# @ # G #\n# _ _ _ #\n# # # # #"
    with pytest.raises(ValueError, match=r"unknown grid symbols \['x'\]"):
        planpath.parse_grid("#x@G#")
    with pytest.raises(ValueError, match="one @ and one G, found 1 and 0"):
        planpath.parse_grid("#@.#")


def test_a_move_into_a_wall_or_off_the_grid_is_blocked():
    assert planpath.move(WALLED, "R") == (WALLED, True)  # a wall
    assert planpath.move(planpath.parse_grid("@.G"), "U") == (planpath.parse_grid("@.G"), True)  # off the grid
    after, blocked = planpath.move(WALLED, "D")
    assert not blocked and after.pos == (2, 1) and after.walls == WALLED.walls


def test_the_solver_finds_every_optimal_first_move_and_counts_walls():
    assert planpath.distance(OPEN) == 4 and planpath.optimal_moves(OPEN) == "DR"
    assert planpath.solve(OPEN) == "DDRR"
    assert planpath.distance(WALLED) == 4 and planpath.optimal_moves(WALLED) == "D"  # Manhattan would say 2, and R
    assert planpath.solve(WALLED) == "DRRU" and planpath.solves(WALLED, "DRRU")
    assert planpath.distance(SHUT) is None and planpath.solve(SHUT) is None and planpath.optimal_moves(SHUT) == ""


def test_local_rewards_by_hand():
    at = lambda grid, pos: planpath.Grid(grid.walls, grid.goal, pos, grid.shape)  # noqa: E731
    assert planpath.play(WALLED, "D", 4)[1:] == (pytest.approx(-0.01 + 1.0), 0, 1)  # closer: 0.99
    assert planpath.play(at(OPEN, (2, 2)), "U", 2)[1] == pytest.approx(-0.01 - 1.0)  # farther: -1.01
    assert planpath.play(WALLED, "R", 4)[1:] == (pytest.approx(-0.10), 1, 1)  # blocked: no shaping
    # the goal in the optimal 4 moves: 4 * 0.99 + 1 + 0.5; one blocked move first: no bonus
    assert planpath.play(WALLED, "DRRU", 4)[1] == pytest.approx(4 * 0.99 + 1.0 + 0.5)
    assert planpath.play(WALLED, "RDRRU", 4)[1] == pytest.approx(-0.10 + 4 * 0.99 + 1.0)
    after, reward, blocked, played = planpath.play(WALLED, "DRRUDD", 4)  # play stops at the goal
    assert after.pos == after.goal and played == 4 and reward == pytest.approx(5.46)


def test_the_shared_team_term_waits_for_the_executor():
    """--team-term shared (the paper's code): the planner's act earns its local reward alone, and
    once the executor has played, team_share holds alpha * the real board's progress over the
    turn, which atgrpo adds to the planner's reward. "own" scores the planner's team term on its copy."""
    own, shared = pp.PlanPathTask(WALLED, alpha=0.5), pp.PlanPathTask(WALLED, alpha=0.5, team_term="shared")
    assert own.act("planner", "<answer>D</answer>") == pytest.approx(0.99 + 0.5 * 1)  # local + alpha * its copy's
    assert shared.act("planner", "<answer>D</answer>") == pytest.approx(0.99)  # local only, for now
    # the executor plays R (blocked): its reward is the same in both forms, and the shared team term is 0
    assert own.act("executor", "<answer>R</answer>") == shared.act("executor", "<answer>R</answer>") == \
        pytest.approx(-0.10)
    assert (own.team_share, shared.team_share) == (0.0, 0.0)
    shared.act("planner", "<answer>L</answer>")  # a proposal that is blocked too ...
    assert shared.act("executor", "<answer>D</answer>") == pytest.approx(0.99 + 0.5 * 1)
    assert shared.team_share == pytest.approx(0.5 * 1)  # ... gets the executor's progress: 1 cell closer
    solo = pp.PlanPathTask(WALLED, planner=False, team_term="shared")
    solo.act("executor", "<answer>D</answer>")
    assert solo.team_share == 0.0  # no planner, nobody to share with
    with pytest.raises(ValueError, match="team_term must be one of own, shared"):
        pp.PlanPathTask(WALLED, team_term="team")


def test_the_shared_team_term_reaches_the_planners_groups():
    """Through atgrpo: in the tree every planner candidate gets the turn's one team term (their
    advantages, under group scaling, and the chosen one stay); in the trajectories each planner answer gets its own
    trajectory's. Scripted: the planner proposes D, R, U, L; the executor D, D, R, R."""
    answers = {"planner": "DRUL", "executor": "DDRR"}

    def script(role, message_lists):
        return [([1], [2], f"<answer>{answers[role][k % 4]}</answer>") for k in range(len(message_lists))]

    own = lambda e: pp.PlanPathTask(WALLED, max_turns=1)  # noqa: E731
    shared = lambda e: pp.PlanPathTask(WALLED, max_turns=1, team_term="shared")  # noqa: E731
    (g_own, x_own), _ = atgrpo.tree_rollout([own(0)], [0], script, 4)
    (g_shared, x_shared), _ = atgrpo.tree_rollout([shared(0)], [0], script, 4)
    # the planner's candidates on copies: D closer 0.99 (+1 own team), R, U, L blocked -0.10 (+0)
    assert g_own.rewards == pytest.approx([1.99, -0.10, -0.10, -0.10])
    # shared: local + the chosen executor's team term (D, 1 cell closer: 1)
    assert g_shared.rewards == pytest.approx([0.99 + 1, -0.10 + 1, -0.10 + 1, -0.10 + 1])
    assert x_own.rewards == x_shared.rewards and g_shared.chosen == g_own.chosen == 0
    assert atgrpo.tree_advantages([g_shared])[0] == pytest.approx(atgrpo.tree_advantages(
        [atgrpo.Group(None, None, [0.99, -0.10, -0.10, -0.10], 0)])[0])  # as the local rewards alone
    trajectories, _ = atgrpo.parallel_rollout([shared(j) for j in range(4)], lambda role, m: script(role, m))
    # trajectory k: the planner's k-th proposal, the executor's k-th move; D and D (1 closer), R and
    # D (1 closer), U and R (blocked, 0), L and R (blocked, 0)
    assert [t[0].reward for t in trajectories] == pytest.approx([0.99 + 1, -0.10 + 1, -0.10, -0.10])


def test_the_optimal_bonus_counts_the_moves_of_earlier_turns():
    """The +0.5 is for reaching the goal in the shortest number of moves over the episode: four
    turns of one move each on WALLED get it at the last move; one blocked turn first does not."""
    task = pp.PlanPathTask(WALLED, max_turns=5, alpha=0.0, planner=False)
    rewards = [task.act("executor", f"<answer>{m}</answer>") for m in "DRRU"]
    assert task.solved and rewards[-1] == pytest.approx(0.99 + 1.0 + 0.5)
    late = pp.PlanPathTask(WALLED, max_turns=5, alpha=0.0, planner=False)
    rewards = [late.act("executor", f"<answer>{m}</answer>") for m in "RDRRU"]
    assert late.solved and rewards[-1] == pytest.approx(0.99 + 1.0)


def test_team_reward_and_the_agent_reward_with_alpha():
    two_closer = planpath.play(WALLED, "DR", 4)[0]
    assert pp.team_reward(WALLED, two_closer) == 2
    one_left = planpath.play(WALLED, "DRR", 4)[0]
    assert pp.team_reward(one_left, planpath.move(one_left, "U")[0]) == 1 + 1.0  # + the goal
    assert pp.team_reward(two_closer, planpath.move(two_closer, "L")[0]) == -1
    task = pp.PlanPathTask(WALLED, alpha=0.5, planner=False)
    assert task.act("executor", "<answer>D</answer>") == pytest.approx(0.99 + 0.5 * 1)


def test_an_answer_without_moves_costs_more_than_any_move():
    task = pp.PlanPathTask(WALLED, planner=False)
    assert task.act("executor", "I would go down.") == pp.FORMAT_PENALTY == -3.0
    assert task.answers == ("-",) and task.state == WALLED
    worst = -0.01 - planpath.SHAPING - 1.0 * 1  # farther, local and team at alpha 1
    assert pp.FORMAT_PENALTY < worst


def test_the_two_role_task():
    task = pp.PlanPathTask(WALLED, max_turns=2)
    with pytest.raises(ValueError, match="planner's move, not the executor's"):
        task.act("executor", "<answer>D</answer>")
    branch = task.copy()
    assert branch.messages("planner") == task.messages("planner")
    assert task.act("planner", "<answer>D</answer>") == pytest.approx(0.99 + 1)
    assert task.state == WALLED  # the proposal is played on a copy
    executor_sees = task.messages("executor")[1]["content"]
    assert "The planner proposes: D" in executor_sees and "Closer to the goal, blocked moves: 0." in executor_sees
    assert branch.next_role == "planner" and branch.observation == ""  # acting on task left the copy alone
    task.act("executor", "<answer>R</answer>")  # blocked
    assert (task.turn, task.moves, task.answers, task.state) == (1, 1, ("R",), WALLED)
    task.act("planner", "<answer>D</answer>")
    task.act("executor", "<answer>D</answer>")
    assert task.done and not task.solved and task.answers == ("R", "D")
    with pytest.raises(ValueError, match="over"):
        task.act("planner", "<answer>D</answer>")
    again = task.restart()
    assert again.state == WALLED and again.turn == 2 and task.state != WALLED
    solo = pp.PlanPathTask(WALLED, planner=False)
    assert solo.roles == ("executor",) and "Your moves are played on the grid." in solo.messages("executor")[0]["content"]


def test_the_user_message_says_where_the_goal_is():
    text = pp.PlanPathTask(OPEN).messages("planner")[1]["content"]
    assert "You are at (row 1, column 1); the goal is at (row 3, column 3): 2 rows down (D) and 2 columns right (R)." in text
    assert "(row 1" not in pp.PlanPathTask(OPEN, positions=False).messages("planner")[1]["content"]


def test_levels_are_seeded_and_their_paths_in_bounds():
    assert planpath.level_for(5) == planpath.level_for(5) and planpath.level_for(5) != planpath.level_for(6)
    assert all(3 <= planpath.distance(planpath.level_for(s)) <= 4 for s in range(200))
    assert {planpath.distance(planpath.level_for(s, 8, solution=(1, None))) for s in range(200)} >= {1, 2, 5}
    with pytest.raises(ValueError, match="at least 3"):
        planpath.level_for(0, size=2)
    with pytest.raises(ValueError, match="in order"):
        planpath.level_for(0, solution=(4, 3))
    with pytest.raises(ValueError, match="no level with a path of 30 to any moves"):
        planpath.level_for(0, size=5, solution=(30, None))


def test_fixed_answers_by_hand_and_on_the_default_test_levels():
    right, down = planpath.parse_grid("@.G"), planpath.parse_grid("@\n.\nG")
    found = constant_successes(planpath.solves, (right, down), 3, ("R", "D", "RD", "U"))
    assert found == {"R": 0.5, "D": 0.5, "RD": 0.5, "U": 0.0}  # RD: R, D (blocked), R reaches the right one
    assert constant_successes(planpath.solves, (right, down), 3, ("RRD",))["RRD"] == 0.5
    levels = tuple(planpath.level_for(10 ** 9 + i) for i in range(64))
    assert max(constant_successes(planpath.solves, levels, 4).values()) == 0.125  # measured: UL, ULUL, ... 8 of 64


# ---------------------------------------------------------------- through atgrpo.py and the evaluation
def grid_in(messages):
    """The current grid of a prompt (the first one shown), read back from its text."""
    text = messages[-1]["content"].split("The grid:\n")[1]
    rows = [r for r in text.split("\n") if re.fullmatch(r"[#_@G ]+", r)]
    return planpath.parse_grid("\n".join(r.replace(" ", "").replace("_", ".") for r in rows[:rows[0].count(" ") + 1]))


def scripted(answer):
    """A sample(role, message_lists) that answers answer(grid) for every prompt."""
    return lambda role, lists: [([1, 2], [3], f"<answer>{answer(grid_in(m))}</answer>") for m in lists]


ARGS = full_args("--env", "planpath")  # 7 x 7, paths of 3-4 moves, 4 turns, positions shown


def test_tree_sampling_and_trajectories_through_atgrpo():
    calls = iter(["U", "D", "L", "R"] * 100)
    sample = lambda role, lists: [([1], [2], f"<answer>{next(calls)}</answer>") for _ in lists]  # noqa: E731
    make = lambda seed: pp.PlanPathTask(WALLED, max_turns=2)  # noqa: E731
    samples, played, final = atgrpo.rollout_samples(make, [7], sample, 4, "at")
    groups = sorted({s.group_name for s in samples})
    assert groups == [f"level 7 / {r} / turn {t}" for r in ("executor", "planner") for t in (1, 2)]
    first = [s for s in samples if s.group_name == "level 7 / planner / turn 1"]
    # U, L, R are blocked (-0.10 each), D goes closer (0.99 + 1): D's advantage is the only positive one
    assert [s.rewards[0] for s in first] == pytest.approx([-0.10, 1.99, -0.10, -0.10])
    assert [s.adv[-1] > 0 for s in first] == [False, True, False, False]
    assert final[0].state.pos == (2, 1) or final[0].turn == 2
    samples, played, final = atgrpo.rollout_samples(make, [7], sample, 4, "grpo")
    assert len(final) == 4 and {s.group_name for s in samples} == {"trajectories of level 7"}


def test_the_evaluation_with_a_solver_and_with_a_fixed_answer():
    seeds = [10 ** 9 + i for i in range(8)]
    solver = evaluate(scripted(lambda g: planpath.solve(g)[0]), seeds, ARGS, pp.TASK)
    assert solver["success"] == 1.0 and solver["success_each"] == "1" * 8 and solver["distance"] == 0
    assert solver["board_ablation_success"] < 1.0  # it solves another level's grid instead
    assert solver["best_constant_success"] < 1.0
    right = evaluate(scripted(lambda g: "R"), seeds, ARGS, pp.TASK)
    assert right["distinct_answers"] == 1 and right["success"] <= right["best_constant_success"]


def test_following_the_words_goes_round_a_wall_only_when_told():
    """WALLED: the words say "2 columns right" (row 1 = goal row), R is blocked; rows-first
    words never leave the start, around_walls has no free named move either (R only) and stays.
    OPEN: D D R R by the words, 4 moves."""
    assert follow_words([WALLED], 4) == 0 and follow_words([WALLED], 4, around_walls=True) == 0
    assert follow_words([OPEN], 4) == 1 and follow_words([OPEN], 3) == 0
    detour = planpath.parse_grid("#####\n#@..#\n##..#\n#..G#\n#####")  # D blocked at the start: R then D
    assert follow_words([detour], 4) == 0 and follow_words([detour], 4, around_walls=True) == 1


def test_rollout_groups_counts_zero_advantage_groups_unreadable_answers_and_first_moves(tmp_path, capsys):
    """scripts/rollout_groups.py on two hand-made groups: one whose two candidates got the same
    reward (zero advantage), one with an R, a U and an unreadable answer; the prefill <answer> is
    in the prompt, the end-of-turn token <|im_end|> is not read (so "Up" left open is U).
    The update runs the three rows of group b (a's advantages are 0) and their two prompts: P
    and Q; by neighbours it would run four (a's P, a's Q, then b's P, Q)."""
    import json
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
    import rollout_groups
    rows = [("a", 1.0, "P", ["<answer>", "R", "</answer>"], 0.0), ("a", 1.0, "Q", ["<answer>", "r", "</answer>"], 0.0),
            ("b", 0.5, "P", ["<answer>", "U", "</answer>"], 0.7), ("b", 0.5, "Q", ["<answer>", "Up"], 0.7),
            ("b", pp.FORMAT_PENALTY, "Q", ["<answer>", "north", "</answer>"], -1.4)]
    (tmp_path / "rollouts").mkdir()
    with open(tmp_path / "rollouts" / "step_3.jsonl", "w") as f:
        for group, reward, prompt, tokens, adv in rows:
            n = len(tokens)  # the prompt and the prefill <answer>, then the answer and <|im_end|>
            f.write(json.dumps({"group": group, "rewards": [reward], "tokens": [prompt] + tokens + ["<|im_end|>"],
                                "mask": [0, 0] + [1] * n, "adv": [0.0] * 2 + [adv] * n}) + "\n")
    n, zero, unreadable, moves, work = rollout_groups.step_report(tmp_path / "rollouts" / "step_3.jsonl")
    assert (n, zero, unreadable) == (2, 0.5, 0.2)
    assert (moves["R"], moves["U"], moves["D"], moves["L"], moves[""]) == (2, 2, 0, 0, 1)
    assert work == (3, 5, 2, 4)
    rollout_groups.main([str(tmp_path)])
    assert "| 3 | 2 | 0.50 | 0.20 | 2 | 0 | 0 | 2 | 3 of 5 | 2 (4) |" in capsys.readouterr().out


def test_the_no_r_rule_of_planpath_solved_sets():
    """OPEN needs R twice, which the rule never plays (D D, then U U back up); a goal straight
    down it reaches, and one up-left past a wall (U blocked at first: L, U, L, three moves)."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
    import planpath_solved_sets as sets
    assert pp.named_moves(OPEN) == ["D", "R"] and not sets.no_r_solves(OPEN, 4)
    assert sets.no_r_solves(planpath.parse_grid("###\n#@#\n#.#\n#G#\n###"), 4)
    round_wall = planpath.parse_grid("#####\n#G.##\n##.@#\n#...#\n#####")
    assert pp.named_moves(round_wall) == ["U", "L"] and sets.no_r_solves(round_wall, 3)
    assert not sets.no_r_solves(round_wall, 2)


# ---------------------------------------------------------------- --levels public: the public code's levels
PUBLIC_3 = ("......###.\n#.....#...\n...#......\n.....#.@..\n..........\n"
            "##.#......\n......#...\n.....#####\n#.#.......\n...G.....#")  # seed 3 (docs/planpath.md)


def manhattan(grid):
    return abs(grid.pos[0] - grid.goal[0]) + abs(grid.pos[1] - grid.goal[1])


def test_a_public_level_by_hand():
    """Seed 3 as the public code draws it (PettingLLMs, PlanPathGridEnvState(seed=3), checked
    against its code when written): 10 x 10, no border (row 4 is all floor), 19 walls, you at
    (3, 7), the goal at (9, 3): 6 rows down and 4 columns left, 10 moves, no detour."""
    level = planpath.public_level_for(3)
    assert planpath.render(level) == PUBLIC_3 and level.shape == (10, 10) and len(level.walls) == 19
    assert (level.pos, level.goal) == ((3, 7), (9, 3)) and planpath.distance(level) == manhattan(level) == 10
    assert planpath.solve(level) == "DDLLDLDDDL" and planpath.solves(level, "DDLLDLDDDL")
    assert planpath.move(level, "U")[0].pos == (2, 7)
    corner = planpath.Grid(level.walls, level.goal, (0, 0), level.shape)  # off the grid is blocked, as in the public code
    assert planpath.move(corner, "U") == (corner, True) and planpath.move(corner, "L") == (corner, True)


def test_public_levels_are_seeded_and_have_the_public_shape_walls_and_paths():
    """The 64 test seeds: 10 x 10 grids, walls inside the grid only and on about 22 % of the cells
    (the border too: there is none), start and goal apart and joined, paths of any length. Measured
    with scripts/planpath_constants.py --levels public: 481 moves in all (mean 7.52), from 1 to
    19, and 19 levels whose shortest path is longer than the Manhattan distance (a detour)."""
    assert planpath.public_level_for(5) == planpath.public_level_for(5) != planpath.public_level_for(6)
    levels = [planpath.public_level_for(10 ** 9 + i) for i in range(64)]
    cells = {(r, c) for r in range(10) for c in range(10)}
    border = {(r, c) for r, c in cells if r in (0, 9) or c in (0, 9)}
    assert all(g.shape == (10, 10) and g.walls <= cells and g.pos != g.goal for g in levels)
    assert all(g.pos not in g.walls and g.goal not in g.walls for g in levels)
    assert sum(len(g.walls) for g in levels) == 1424  # 0.2225 of the 6,400 cells
    assert 0.15 < sum(len(g.walls & border) for g in levels) / (64 * len(border)) < 0.30
    paths = [planpath.distance(g) for g in levels]
    assert sum(paths) == 481 and (min(paths), max(paths)) == (1, 19)
    assert sum(d > manhattan(g) for g, d in zip(levels, paths)) == 19
    with pytest.raises(ValueError, match="no public level with a path in 5 tries"):
        planpath.public_level_for(0, wall_ratio=1.0, tries=5)


def test_make_level_reads_the_levels_flag_and_the_default_is_unchanged():
    """levels "public" gives the public level of the seed whatever --size says; "ours", the default,
    gives level_for's level as before."""
    ours = [pp.make_level(10 ** 9 + i, ARGS) for i in range(8)]
    assert ARGS.levels == "ours" and ours == [planpath.level_for(10 ** 9 + i) for i in range(8)]
    public = dataclasses.replace(ARGS, levels="public")
    assert [pp.make_level(10 ** 9 + i, public) for i in range(8)] == [planpath.public_level_for(10 ** 9 + i)
                                                                     for i in range(8)]
    task = pp.make_tasks([3], public)[0]
    assert task.level == planpath.public_level_for(3) and task.max_turns == 4 and task.moves_per_turn == 1


def test_the_levels_flag_and_its_one_line_errors(capsys):
    import config
    assert config.parse_args([]).levels == config.parse_args(["--env", "planpath"]).levels == "ours"
    assert config.parse_args(["--env", "planpath", "--levels", "public"]).levels == "public"
    assert config.parse_args(["--env", "sokoban", "--levels", "ours"]).levels == "ours"
    for argv, said in [(["--env", "planpath", "--levels", "theirs"], "--levels must be one of ours, public, not 'theirs'"),
                       (["--env", "sokoban", "--levels", "public"], "--levels public needs --env planpath (--env sokoban does not read it)"),
                       (["--levels", "public"], "needs --env planpath"),
                       (["--env", "planpath", "--levels", "public", "--size", "8"], "takes no --size"),
                       (["--env", "planpath", "--levels", "public", "--max-solution", "0"], "--max-solution")]:
        with pytest.raises(SystemExit):
            config.parse_args(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert "error: " in err[-1] and said in err[-1], (argv, err)  # the usage, then one line


def test_a_run_from_before_the_flag_resumes_with_our_levels(tmp_path):
    """An args.json without "levels" (every run before the flag) is still a run's settings."""
    import dataclasses
    import json
    import config
    saved = dataclasses.asdict(config.parse_args(["--env", "planpath", "--out", str(tmp_path)]))
    del saved["levels"]
    (tmp_path / "args.json").write_text(json.dumps(saved))
    assert config.saved_args(str(tmp_path / "args.json"))["levels"] == "ours"  # the default of its time
    assert config.parse_args(["--resume", str(tmp_path)]).levels == "ours"


def test_a_checkpoint_of_a_public_run_is_evaluated_on_the_public_levels(tmp_path):
    """tools/evaluate.py reads levels from a run's args.json (TASK_KEYS), as it reads size."""
    import json
    from tools import evaluate
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "args.json").write_text(json.dumps({"env": "planpath", "algo": "at", "levels": "public"}))
    _, args = evaluate.parse_args(["--model", str(tmp_path / "checkpoint")])
    assert (args.env, args.levels) == ("planpath", "public")
    _, args = evaluate.parse_args(["--model", str(tmp_path / "checkpoint"), "--levels", "ours"])
    assert args.levels == "ours"  # a flag given here wins


def test_the_public_prompts_fit_the_bundled_context(tokenizer):
    """The longest prompt on the 64 public test levels (env_two_roles.longest_messages, as
    train.check_prompts measures it) with its new tokens fits the bundled model's 8,192 tokens
    and the tiny test model's 2,048: with the planpath defaults, and with 5 turns of up to 30
    moves (the public code's turns, a whole path a turn)."""
    from policy import prompt_ids
    from env_two_roles import longest_messages
    for turns, moves, new in ((4, 1, 8), (5, 30, 64)):
        args = dataclasses.replace(ARGS, max_turns=turns, moves_per_turn=moves, levels="public")
        n = len(prompt_ids(tokenizer, longest_messages(pp.make_tasks([10 ** 9 + i for i in range(64)], args)), "<answer>"))
        assert n + new < 2048, (turns, moves, n)


def test_the_shared_team_term_keeps_the_advantages_only_under_group_scaling():
    """Two planner groups get shared terms (+1.99 and -1.0) on top of their local rewards. Under
    group scaling their advantages are the local rewards'; under batch scaling (Sokoban's default)
    the terms change the std of all the step's rewards, which divides every advantage, the
    executor's included. The docs that state it say both."""
    local = [[0.99, -0.10, -0.10, -0.10], [0.5, 0.0, 1.0, 0.0]]
    executor = [1.5, 0.2, -0.3, 0.9]
    shared = [[r + 1.99 for r in local[0]], [r - 1.0 for r in local[1]]]

    def advantages(planners, scale):
        groups = [atgrpo.Group((e, "planner", 1), [], rewards, 0) for e, rewards in enumerate(planners)]
        return sum(atgrpo.tree_advantages(groups + [atgrpo.Group((0, "executor", 1), [], executor, 0)], scale), [])

    assert advantages(shared, "group") == pytest.approx(advantages(local, "group"))
    by_batch, by_batch_shared = advantages(local, "batch"), advantages(shared, "batch")
    assert by_batch_shared[:8] != pytest.approx(by_batch[:8]) and by_batch_shared[8:] != pytest.approx(by_batch[8:])
    ratio = by_batch_shared[8] / by_batch[8]  # the executor's: one factor, the ratio of the two batch stds
    assert by_batch_shared[8:] == pytest.approx([a * ratio for a in by_batch[8:]]) and ratio != pytest.approx(1)
    root = Path(__file__).resolve().parent.parent
    assert "Under `--scale-rewards batch` (Sokoban's default) it does" in " ".join((root / "docs" / "planpath.md").read_text().split())
    assert "under batch scaling it changes the step's std" in " ".join((root / "atgrpo.py").read_text().replace("#", "").split())
    sheet = " ".join((root / "docs" / "cheatsheet.md").read_text().split())
    assert "under `batch`" in sheet and "the executor's included" in sheet
    slides = " ".join((root / "lecture" / "slides.md").read_text().split())
    assert "under batch scaling, Sokoban's default, it changes the step's reward std" in slides
    assert "so the planner's advantages are its local rewards' alone" not in slides
