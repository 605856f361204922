"""What every command shares: Ctrl-C, or a file that cannot be read or written, stops with one
line that says what happened, never a traceback (the mains are wrapped in `one_line`); long
work shows a progress bar (`in_chunks`).
"""
import functools
import signal

from tqdm import tqdm


def wilson(p, n, z=1.96):
    """The 95 % interval (Wilson's) of a rate p seen over n yes/no answers: what n questions can show.
    A rate of a partial reward (say XML format, whose items may score in between) has at most this
    spread, so the interval is an upper bound there."""
    if n < 1:
        return (0.0, 1.0)
    centre, half = p + z * z / (2 * n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return (max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n)))


def table_cell(label, value, n):
    """A table's cell: a rate (its label says "rate") with its 95 % interval over n items, `p (lo-hi)`;
    anything else to 3 decimals."""
    if "rate" not in label:
        return f"{value:.3f}"
    low, high = wilson(value, n)
    return f"{value:.3f} ({low:.2f}-{high:.2f})"


def one_line(main):
    """main() with Ctrl-C (KeyboardInterrupt) and a failed read or write (OSError) as one line."""
    @functools.wraps(main)
    def run(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except KeyboardInterrupt:
            ignore_ctrl_c()  # a second Ctrl-C while it stops: the same one line
            raise SystemExit("\nstopped (Ctrl-C)") from None
        except OSError as e:
            raise SystemExit(f"could not read or write {e.filename or 'a file'}: {e.strerror or e}") from None
    return run


def ignore_ctrl_c():
    """From now on Ctrl-C does nothing: the program is already stopping, and a second Ctrl-C would
    cut its one line (or the cleanup before it) with a KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def in_chunks(items, size, desc, unit):
    """The items `size` at a time, under a progress bar of items done."""
    with tqdm(total=len(items), desc=desc, unit=unit, leave=False) as bar:
        for i in range(0, len(items), size):
            yield items[i:i + size]
            bar.update(len(items[i:i + size]))
