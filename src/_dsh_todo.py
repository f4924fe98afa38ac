"""The ``dsh-todo`` command's entry point, kept outside the package on purpose.

Importing ``dsh_tool_todo`` takes a noticeable moment (pydantic, pluggy). A Ctrl-C that
lands in it would print a traceback from whatever module was loading, since nothing of the
command is running yet to catch it. Here the import is inside the command: a Ctrl-C at any
moment after the command starts ends it quietly, with the status a Ctrl-C gets once the
command runs (0, docs/cli.md). Everything else is :func:`dsh_tool_todo.cli.main`.
"""

# Nothing is imported at the top: the script pip writes imports this module before anything
# of the command runs, and a Ctrl-C in that import could not be caught.


def main() -> int:
    try:  # first: a Ctrl-C even before the handler below is set is caught here
        return _run()
    except KeyboardInterrupt:
        return _interrupted()


def _run() -> int:
    import signal

    interrupted: list[int] = []

    def on_ctrl_c(signum: int, frame: object) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    # A Ctrl-C inside an extension module's start (pydantic-core's, say) can surface as
    # another exception than KeyboardInterrupt (a Rust panic): the flag tells it apart
    # from an install that is broken, which still fails loudly.
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:  # started with Ctrl-C ignored: it stays ignored
        signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        from dsh_tool_todo.cli import main as run
    except KeyboardInterrupt:
        raise
    except BaseException:
        if not interrupted:
            raise
        raise KeyboardInterrupt from None
    finally:
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)
    return run()


def _interrupted() -> int:
    import contextlib  # here: see the note at the top

    # Handled here, the interrupt still leaves CPython's "unhandled KeyboardInterrupt" flag
    # set when it escaped a string being run (a dataclass made during an import): running a
    # string clears it, or the interpreter would end itself with SIGINT.
    with contextlib.suppress(Exception):  # an audit hook may refuse it
        exec("")
    return 0
