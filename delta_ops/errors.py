"""The one exception hierarchy of delta-ops.

Every error says *what* went wrong and *where* (the file, the line, the property, the feature),
so a failed maintenance run can be diagnosed from its one-line message. Callers that want to
handle any delta-ops failure catch `DeltaOpsError`.

Any other exception is a bug in delta-ops (or a library under it). To say which file it was
reading, storage reads each file inside `reading`, which notes the path on such an
exception (`file_being_read` finds it again):

    with reading(path):
        data = decode(open(path, "rb").read())
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any


class DeltaOpsError(Exception):
    """Base class of every error raised by delta-ops.

    ``retryable`` says whether running the same operation again may succeed without anyone
    changing anything (a transient storage failure, a lost commit race): orchestrators retry
    those and fail fast on the rest (bad input, a protocol the table cannot be maintained with).

    Every delta-ops error pickles as itself (its class, message, attributes and notes), whatever
    its constructor takes, so one raised in a worker process reaches the caller unchanged.
    """

    retryable: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (rebuilt, (type(self), str(self), dict(self.__dict__)))


def rebuilt(
    cls: type[DeltaOpsError], message: str, state: dict[str, Any] | None = None
) -> DeltaOpsError:
    """An error of class `cls` with `message` (and attributes `state`), made without calling
    its constructor, which may take other arguments than the message it built: how a pickled
    error, or one a Spark worker reported as text, is made again."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state or {})
    return error


class MissingExtra(DeltaOpsError, ImportError):
    """An optional dependency group is not installed (``pip install 'delta-ops[s3]'``)."""

    def __init__(self, extra: str, needed_for: str):
        self.extra = extra
        super().__init__(
            f"{needed_for}: the '{extra}' extra is not installed: pip install 'delta-ops[{extra}]'"
        )


class NotADeltaTable(DeltaOpsError):
    """The location has no `_delta_log` directory or no commit or checkpoint in it."""

    def __init__(self, location: str, reason: str = "no _delta_log with commits or checkpoints"):
        self.location = location
        super().__init__(f"not a Delta table: {location}: {reason}")


class CorruptLog(DeltaOpsError):
    """A log file (commit, checkpoint, `_last_checkpoint`, sidecar) cannot be read or is invalid."""

    def __init__(self, file: str, problem: str, line: int | None = None):
        self.file = file
        self.line = line
        self.problem = problem
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {problem}")


class VersionGap(CorruptLog):
    """Commit files are not contiguous, so some version cannot be reconstructed."""

    def __init__(self, file: str, expected: int, found: int):
        self.expected = expected
        self.found = found
        super().__init__(
            file, f"log versions are not contiguous: expected version {expected}, found {found}"
        )


class CorruptChecksum(CorruptLog):
    """A version checksum (`N.crc`) that does not parse or disagrees with the log's replay: a
    corruption alarm (the log or the checksum changed after the commit)."""


class VersionNotFound(DeltaOpsError):
    """The requested version does not exist or can no longer be reconstructed."""


class InvalidProtocol(DeltaOpsError):
    """A protocol action violates the protocol rules (e.g. features with a legacy version)."""


class UnsupportedFeature(DeltaOpsError):
    """The table needs table features (or protocol versions) that delta-ops does not implement."""

    def __init__(self, features: Iterable[str], action: str = "read", reasons: Iterable[str] = ()):
        self.features = sorted(set(features))
        self.action = action
        names = ", ".join(self.features)
        why = "".join(f" ({reason})" for reason in reasons)
        super().__init__(f"cannot {action} this table: unsupported table feature(s): {names}{why}")


class InvalidTableProperty(DeltaOpsError):
    """A table property has a value that cannot be parsed; never silently replaced by a default."""

    def __init__(self, name: str, value: str, reason: str):
        self.name = name
        self.value = value
        self.reason = reason
        super().__init__(f"invalid value for table property {name}={value!r}: {reason}")


class InvalidDeletionVector(DeltaOpsError):
    """A deletion vector descriptor or its stored bitmap is malformed."""


class NeedsForce(DeltaOpsError):
    """A safety limit stopped an operation that ``--force`` would let run (a dry run shows what
    it would then do)."""


class RetentionTooShort(NeedsForce):
    """A retention shorter than the table's safety limit was asked for without forcing it."""


class ConcurrentModification(DeltaOpsError):
    """A concurrent commit conflicts with this transaction; running the operation again (from a
    fresh snapshot) re-plans against the winner's state."""

    retryable = True


class InvalidLocation(DeltaOpsError):
    """A table location that cannot be opened: empty, an unknown scheme, a store not installed."""


class UnsafePath(DeltaOpsError):
    """A path resolves outside the table root, so delta-ops refuses to touch it."""


class InvalidValue(DeltaOpsError):
    """A user-supplied option value (a duration, a time, a count) is malformed; the message
    names the option, the value and the forms that are accepted."""


class InvalidSchema(CorruptLog):
    """A table's schema (`schemaString`) or a partition value in the log cannot be parsed."""


class UnsupportedType(DeltaOpsError):
    """A data type (Arrow, Spark) has no Delta type that delta-ops writes, or the reverse."""


class SchemaMismatch(DeltaOpsError):
    """Data to write does not fit the table: columns, types, nullability or partitioning differ
    in a way delta-ops will not resolve silently; the message says what to change."""


class OperationRefused(DeltaOpsError):
    """The table's state refuses an operation that is otherwise well formed (a property suspends
    it, a file it needs is gone, a check of the table before writing failed); nothing was
    changed."""


class DataFileError(DeltaOpsError):
    """A data file an operation reads (a rewrite's input, a footer to count) is missing or
    unreadable; the message names it."""


class TaskFailed(DeltaOpsError):
    """A worker (a forked process, a Spark task) failed; the message carries the worker's own
    one-line error."""


class CheckpointInProgress(DeltaOpsError):
    """Another process is writing a checkpoint of the same version right now (its parts are
    younger than the grace); running again once it has finished or died succeeds."""

    retryable = True


_READING_NOTE = "delta-ops was reading "


class _Reading:
    """The context of `reading`: a class, so entering it costs a few attribute looks."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None:
            note_reading(exc, self.path)


def reading(path: str) -> _Reading:
    """A block that reads (or decodes) the file `path`: an unexpected exception leaving it gets
    the path as a note (`file_being_read`), kept across threads and processes (it
    travels with the exception), so a bug's one-line report can say which file it was on."""
    return _Reading(path)


def note_reading(exc: BaseException, path: str) -> None:
    """What leaving a `reading` block of `path` with `exc` does, for a loop over many
    files that keeps the file it is on itself (a block per file costs more than reading a small
    file's bytes): an unexpected exception gets the path as a note."""
    if (
        isinstance(exc, Exception)
        and not isinstance(exc, DeltaOpsError)  # names its file itself
        and file_being_read(exc) is None  # the innermost file is the one
    ):
        exc.add_note(_READING_NOTE + path)


def file_being_read(exc: BaseException) -> str | None:
    """The file `exc` was raised while reading (the innermost `reading` block), if any."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(_READING_NOTE):
            return note[len(_READING_NOTE) :]
    return None
