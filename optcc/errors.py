"""The one exception users can cause: bad input, named by the field at fault."""


class OptccError(ValueError):
    """Bad input. `field` names what is wrong (a flag, or a path inside a JSON file)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
