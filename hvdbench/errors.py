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
