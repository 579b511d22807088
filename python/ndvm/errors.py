"""The exceptions of ``ndvm``.

``ndvm._ndvm`` raises these by class name, so each carries the stable code and place of the Rust
error it stands for. ``rendered`` is the CLI's diagnostic
(``file:line:col: error[CODE]: message`` with the source line and carets).

Codes: ``P001``-``P009`` are front-end (parse) errors (``ndvm_frontends::ParseErrorKind::code``).
``E001``-``E015`` are evaluator errors (``ndvm_core::ErrorKind::code``). E007 (work), E008
(depth), E013 (memory) and E014 (deadline) are the resource limits (``LimitError``).
"""

from __future__ import annotations

__all__ = [
    "NdvmError",
    "ParseError",
    "EvalError",
    "LimitError",
    "CalibrationError",
    "TaskError",
    "UsageError",
    "InternalError",
]


class NdvmError(Exception):
    """Any failure reported by NDVM.

    Attributes: ``code`` (``"E001"``, ``"P003"``, or None), ``kind`` (a stable class such as
    ``"unbound"``, ``"deadline"``, ``"config"``), ``line`` and ``col`` (1-based; columns count
    characters; None when unknown) and ``rendered`` (the CLI's diagnostic, or None).
    """

    def __init__(self, message, *, code=None, kind=None, line=None, col=None, rendered=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.line = line
        self.col = col
        self.rendered = rendered

    def __str__(self):
        return self.rendered or self.message

    def __reduce__(self):
        fields = dict(
            code=self.code, kind=self.kind, line=self.line, col=self.col, rendered=self.rendered
        )
        return (_rebuild, (type(self), self.message, fields))


def _rebuild(cls, message, fields):
    return cls(message, **fields)


class ParseError(NdvmError, ValueError):
    """The program text does not read (codes P001-P009)."""


class EvalError(NdvmError):
    """The evaluator rejected the whole program (codes E001-E015). Per-lane numeric faults are not
    errors: they are the ``faults`` mask of an evaluation."""


class LimitError(EvalError):
    """A resource limit stopped the run: E007 work, E008 depth, E013 memory or E014 deadline."""


class CalibrationError(NdvmError, ValueError):
    """The calibrator refused its settings or data (``kind``: config, data, no-parameters,
    bad-init, name-clash, not-a-number)."""


class TaskError(NdvmError, ValueError):
    """A task (a file, or one built from arrays) is invalid; ``line``/``col`` point into the file
    when there is one."""


class UsageError(NdvmError, ValueError):
    """A bad argument: an unknown name, lane counts that disagree, a name bound twice."""


class InternalError(NdvmError, RuntimeError):
    """A bug in NDVM: a Rust panic, caught before it could reach Python. Please report it."""
