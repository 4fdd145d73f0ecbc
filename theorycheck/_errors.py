"""The one error type for bad user input (exit code 2 on the CLI)."""


class BadInput(ValueError):
    """Raised for input the tool refuses: the message names the bad value.

    Examples:
        >>> raise BadInput("--sampled 7 is out of range for V = 5")
        Traceback (most recent call last):
        ...
        theorycheck._errors.BadInput: --sampled 7 is out of range for V = 5
    """
