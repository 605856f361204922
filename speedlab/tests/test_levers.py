"""speedlab/levers.py: the configurations alternate round by round, each keeps its best time and its
first result, and the table's gains are the seconds off over the default's (the step adding the
default's update to both sides), by hand."""
from speedlab import levers


class Fake:
    """A workload whose calls return scripted seconds, and the lever switched on at the time."""
    name = "fake"

    def __init__(self):
        self.seen, self.times = [], iter([9, 9, 3.0, 7.0, 5.0, 2.0, 6.0, 4.0, 4.0])

    def generation(self):
        self.seen.append("generation")
        return next(self.times), "other" if len(self.seen) == 5 else "same"  # the lever's first call

    def update(self):
        self.seen.append("update")
        return next(self.times), "grad"


def test_rounds_alternate_and_keep_the_best_time(monkeypatch):
    monkeypatch.setattr(levers, "LEVERS", {"draw": ("", levers.contextlib.nullcontext)})
    work = Fake()
    best = levers.measure(work, ["draw"], rounds=2, log=lambda line: None)
    # warm-up (9, 9); round 1: default gen 3, update 7, draw 5; round 2 reversed: draw 2, default gen 6, update 4
    assert work.seen == ["generation", "update", "generation", "update", "generation", "generation", "generation", "update"]
    assert best == {"default": {"generation": (3.0, "same"), "update": (4.0, "grad")},
                    "draw": {"generation": (2.0, "other")}}


def test_the_table_by_hand():
    best = {"default": {"generation": (2.0, "a"), "update": (6.0, "g")}, "draw": {"generation": (3.0, "b")}}
    # off / default 3 / 2 = 1.50; step (2 + 6 - 2 + 3) / (2 + 6) = 9 / 8 = 1.12 (1.125 rounds to even)
    assert levers.table("bench", best) == ["| bench | draw | 2.00 | 3.00 | 1.50× | 1.12× | no |"]
