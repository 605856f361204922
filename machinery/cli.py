"""Every command ends in one line, as train.py does: Ctrl-C, or a file that cannot be read or
written, stops with one line that says what happened, never a traceback. The commands' mains
are wrapped in `one_line`.
"""
import functools


def one_line(main):
    """main() with Ctrl-C (KeyboardInterrupt) and a failed read or write (OSError) as one line."""
    @functools.wraps(main)
    def run(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except KeyboardInterrupt:
            raise SystemExit("\nstopped (Ctrl-C)") from None
        except OSError as e:
            raise SystemExit(f"could not read or write {e.filename or 'a file'}: {e.strerror or e}") from None
    return run
