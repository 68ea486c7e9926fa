"""What an error of the native object-store client (obstore) becomes in delta-ops.

Everything above the storage package knows the errors of Python's file API (a missing file
is ``FileNotFoundError``, a taken name ``FileExistsError``) and delta-ops' own. obstore raises
its own classes, with a multi-line debug text; `translated` turns them into those:

    with translated("lake/events/_delta_log/00000000000000000003.json"):
        obstore.put(store, key, data, mode="create")

- a missing object: ``FileNotFoundError`` (obstore raises it already);
- a name already taken (put-if-absent refused): ``FileExistsError``;
- credentials refused or missing: ``PermissionError``;
- anything else (the store still failing after the client's retries with backoff, a
  connection reset, a timeout): `StoreUnavailable`, a retryable delta-ops error and an
  ``OSError``, so the CLI prints one line and an orchestrator may run the op again.

Each message is one line: the store's first line, with the path it was about.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from delta_ops.errors import DeltaOpsError


class StoreUnavailable(DeltaOpsError, OSError):
    """The object store did not answer as asked, even after retries: running the operation
    again may succeed (the table is left as before or after the step that failed)."""

    retryable = True


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error's text (obstore appends a debug dump)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


@contextmanager
def translated(path: str) -> Iterator[None]:
    """Run a native store call, raising Python's file errors or StoreUnavailable instead of
    obstore's own classes (see the module docstring)."""
    from obstore.exceptions import (  # obstore only once a native store is used
        AlreadyExistsError,
        BaseError,
        PermissionDeniedError,
        PreconditionError,
        UnauthenticatedError,
    )

    try:
        yield
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{path}: not found ({first_line(exc)})") from None
    except (AlreadyExistsError, PreconditionError) as exc:
        raise FileExistsError(f"{path}: already exists ({first_line(exc)})") from None
    except (PermissionDeniedError, UnauthenticatedError) as exc:
        raise PermissionError(f"{path}: the store refused access: {first_line(exc)}") from None
    except (BaseError, OSError) as exc:
        if isinstance(exc, (FileExistsError, PermissionError, StoreUnavailable)):
            raise
        raise StoreUnavailable(
            f"{path}: the object store failed (retrying the operation may succeed): "
            f"{first_line(exc)}"
        ) from None


__all__ = ["StoreUnavailable", "first_line", "translated"]
