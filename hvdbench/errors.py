"""The one error type users see. Raise a subclass with a one-line message naming the file, host or
key at fault; the CLI prints `Error: <message>` and exits 1, with no traceback."""


class HvdbenchError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class ConfigError(HvdbenchError):
    """Bad configuration: unknown key, wrong type, impossible value (the key is named)."""


class DatasetError(HvdbenchError):
    """Missing, truncated, corrupt or mismatched dataset (the file is named)."""


class TopologyError(HvdbenchError):
    """Bad hostfile or hosts list, or a layout that does not fit (the file and line are named)."""


class StoreError(HvdbenchError):
    """A results store (runs.csv, a bench CSV) that cannot be read or appended to: not text, not
    CSV, a row of the wrong length, a symbolic link (the file and line are named)."""


class UsageError(HvdbenchError):
    """Command-line options that do not go together, or a value the command line cannot take (the
    option is named): the CLI shows the command's usage and exits 2, as for click's own usage errors."""


class OutputError(HvdbenchError):
    """An output that cannot be written: a read-only or missing place for --out (the path is named)."""


def os_error_line(e: OSError) -> str:
    """An OSError in one line naming the file(s): `/proc/x: No such file or directory`.

    The CLI root (hvdbench.cli.main) uses it for any OSError a command did not turn into a
    HvdbenchError itself, so a failed read or write never ends in a traceback."""
    reason = e.strerror or (str(e).strip().splitlines() or [type(e).__name__])[0]
    if e.filename is not None and e.filename2 is not None:
        return f"{e.filename} -> {e.filename2}: {reason}"
    if e.filename is not None:
        return f"{e.filename}: {reason}"
    return reason
