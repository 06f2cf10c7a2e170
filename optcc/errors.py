"""The one exception users can cause: bad input, named by the field at fault."""


class OptccError(ValueError):
    """Bad input. `field` names what is wrong (a flag, or a path inside a JSON file)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class RunFailed(RuntimeError):
    """A run could not finish (a rank died, hung or crashed): neither bad input nor a wrong
    result, so the CLI exits 3, never 1 ("wrong") or 2 ("bad input")."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
