"""The ``dsh-todo`` command's entry point, kept outside the package on purpose.

Importing ``dsh_tool_todo`` takes a noticeable moment (pydantic, pluggy). A Ctrl-C that
lands in it would print a traceback from whatever module was loading, since nothing of the
command is running yet to catch it. Here the import is inside the command: a Ctrl-C at any
moment after the command starts ends it quietly, with the status a Ctrl-C gets once the
command runs (0, docs/cli.md). Everything else is :func:`dsh_tool_todo.cli.main`.
"""

# Nothing is imported at the top: the script pip writes imports this module before anything
# of the command runs, and a Ctrl-C in that import could not be caught.
TYPE_CHECKING = False
if TYPE_CHECKING:  # for the type checker only
    from types import FrameType


def main() -> int:
    try:  # first: a Ctrl-C even before the handler below is set is caught here
        return _run()
    except KeyboardInterrupt:
        return _interrupted()


def _run() -> int:
    import sys

    if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
        # A Ctrl-C in CPython's own start, as it checked whether this script is an import
        # path entry: it printed it and ran the script all the same.
        raise KeyboardInterrupt
    _keep_dropped_ctrl_c()  # before any import that is not done yet: each one is a window
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
        # Only this function's own handler is put back: one set meanwhile is giving a dropped
        # Ctrl-C again (_keep_dropped_ctrl_c), and puts this one back once it has.
        if signal.getsignal(signal.SIGINT) is on_ctrl_c:
            signal.signal(signal.SIGINT, previous)
    return run()


def _keep_dropped_ctrl_c() -> None:
    """Give again a Ctrl-C that Python dropped: an exception raised in a weakref callback or a
    finalizer is only reported ("Exception ignored in ..."), and every import frees its module
    lock through such a callback, so a Ctrl-C landing there was lost and ``watch`` ran on.
    Set with modules the interpreter has loaded before any script runs; the rest is imported
    once a Ctrl-C was dropped."""
    import _thread
    import sys

    previous = sys.unraisablehook
    main = _thread.get_ident()  # called from the main thread, the one Ctrl-C interrupts

    def hook(unraisable: "sys.UnraisableHookArgs") -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _thread.get_ident() == main:
            _give_again(main)
        else:
            previous(unraisable)

    sys.unraisablehook = hook


def _give_again(main: int) -> None:
    """Send a Ctrl-C to the main thread again, from another thread (raised here, in a callback,
    it would be dropped again), until its handler ran: a signal that lands just before a
    blocking call (a sleep of ``watch --interval``) would wait for that call's end."""
    import _thread
    import signal
    import time

    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):  # ignored, or not Python's to run
        return
    waiting = [True]

    def given_again(signum: int, frame: "FrameType | None") -> None:
        waiting.clear()
        if signal.getsignal(signal.SIGINT) is given_again:
            signal.signal(signal.SIGINT, handler)
        handler(signum, frame)

    kill = getattr(signal, "pthread_kill", None)  # not on Windows

    def send() -> None:
        while waiting:
            if kill is None:
                _thread.interrupt_main()
            else:
                kill(main, signal.SIGINT)
            if signal.getsignal(signal.SIGINT) is not given_again:
                return  # the command set a handler of its own, and was told once
            time.sleep(0.02)

    signal.signal(signal.SIGINT, given_again)
    _thread.start_new_thread(send, ())


def _interrupted() -> int:
    import contextlib  # here: see the note at the top

    # Handled here, the interrupt still leaves CPython's "unhandled KeyboardInterrupt" flag
    # set when it escaped a string being run (a dataclass made during an import): running a
    # string clears it, or the interpreter would end itself with SIGINT.
    with contextlib.suppress(Exception):  # an audit hook may refuse it
        exec("")
    return 0
