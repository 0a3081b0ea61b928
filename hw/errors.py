"""The root of the workbench's own errors.

`WorkbenchError` is bad input a user can correct (a config, a program, a model, a schedule, an
argument): the command line reports it in one line with exit status 2. Every other exception is
a bug and shows its traceback. Each layer derives its errors from it (`ConfigError`,
`SimulationError`, `ScheduleError`, `ModelImportError`, ...); it lives in `hw`, the layer every
other imports.
"""


class WorkbenchError(ValueError):
    """Bad input, named in the message: what is wrong, where, and the rule it breaks."""


class InputError(WorkbenchError):
    """A bad argument or input file of a command or an entry point (a count below one, a file
    that is not what it should be), not of a particular layer's artifact."""


class WorkbenchWarning(UserWarning):
    """Something a user should know but that does not stop the work (a layer left float, a
    model calibrated on synthetic inputs): the command line prints it in one line on stderr."""
