"""One bulk delete request on an object store, and which of its keys really went.

S3's DeleteObjects answers 200 even when it refused some keys: each refused key comes back
in the response's `Errors` (SlowDown or InternalError under load, AccessDenied where a policy
forbids). s3fs drops that list, so a vacuum would report files as deleted that still exist
(and still hold the data someone asked to erase). Here the errors are read: throttled keys are
retried with backoff, refused ones are reported and left out of the result. Other stores'
fsspec implementations raise on a failed batch without saying which files went (adlfs a
RuntimeError naming them all, gcsfs the first refusal), so the batch is then deleted file by
file: a file already gone counts as deleted, one whose delete still fails is reported and left
out, as above:

    deleted = delete_batch(files, ["part-0.parquet", "part-1.parquet"])

On the native client (``files.native``), one obstore bulk delete sends the batch (S3
DeleteObjects, Azure blob batches) and raises on the first key that failed, without saying
which others went. So a failed batch is followed by one listing of the batch's key range:
keys still listed are retried with backoff while the store throttles (SlowDown and other
transient codes), and reported and left out of the result when it refuses them (AccessDenied);
keys no longer listed are deleted (a key already gone counts, as above).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from delta_ops.storage.filesystem import TableRoot
from delta_ops.storage.native_errors import first_line
from delta_ops.storage.s3_listing import is_s3

if TYPE_CHECKING:
    from delta_ops.storage.native_store import NativeStore

logger = logging.getLogger(__name__)

#: per-key error codes of DeleteObjects worth another try (the store asked us to slow down)
RETRYABLE_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"})
ATTEMPTS = 6
#: the fsspec clients' errors for a store's answer that are no OSError (named: not imported)
CLIENT_HTTP_ERRORS = frozenset({"azure.core.exceptions.AzureError", "gcsfs.retry.HttpError"})
BACKOFF_S = 0.2  # first wait; doubles each attempt, with jitter, up to about 6 s in all


def _jitter() -> float:
    """A random factor in [0.5, 1.5) for a retry's backoff (`random`, imported only when a
    store throttles: start-up cost otherwise)."""
    import random

    return 0.5 + random.random()


def delete_batch(files: TableRoot, relative_paths: Sequence[str]) -> list[str]:
    """Delete up to 1000 table-relative files of a table on an object store in one request
    where the store has one; return the ones that are gone now."""
    if files.native is not None:
        return native_delete_batch(files.native, files.root, relative_paths)
    fs = files.filesystem
    paths = [files.join(p) for p in relative_paths]
    if is_s3(fs):
        return _s3_delete_objects(fs, paths, list(relative_paths))
    try:
        fs.rm(paths)
        return list(relative_paths)
    except Exception as exc:  # raised again unless it is the store's answer
        if not _store_answered(exc):
            raise
    by_path = dict(zip(paths, relative_paths, strict=True))
    refused: dict[str, str] = {}
    for path in paths:  # one by one: which are gone, which the store refuses
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass
        except Exception as exc:  # raised again unless it is the store's answer
            if not _store_answered(exc):
                raise
            refused[path] = first_line(exc)
    return _deleted(by_path, refused)


def _store_answered(error: BaseException) -> bool:
    """Whether an fsspec client's delete error is the store's answer: an OSError (gcsfs'
    refusals, fsspec's own), the clients' HTTP errors (the Azure SDK's under adlfs, gcsfs'
    for other statuses), or adlfs' RuntimeError raised from one of them (its bulk `rm`).
    Anything else (a bug, or a test's injected crash) is raised as it is."""
    if isinstance(error, OSError):
        return True
    names = {f"{kind.__module__}.{kind.__qualname__}" for kind in type(error).__mro__}
    if names & CLIENT_HTTP_ERRORS:
        return True
    return (
        isinstance(error, RuntimeError)
        and error.__cause__ is not None
        and _store_answered(error.__cause__)
    )


def _s3_delete_objects(fs: Any, paths: list[str], relative: list[str]) -> list[str]:
    bucket = fs.split_path(paths[0])[0]
    by_key = {fs.split_path(p)[1]: rel for p, rel in zip(paths, relative, strict=True)}
    pending = list(by_key)
    refused: dict[str, str] = {}
    for attempt in range(ATTEMPTS):
        request = {"Objects": [{"Key": k} for k in pending], "Quiet": True}
        answer = fs.call_s3("delete_objects", Bucket=bucket, Delete=request)
        errors = {e["Key"]: e.get("Code", "") for e in answer.get("Errors", [])}
        retry = [k for k, code in errors.items() if code in RETRYABLE_CODES]
        refused.update(
            (k, code)
            for k, code in errors.items()
            if code not in RETRYABLE_CODES and code != "NoSuchKey"
        )
        if not retry:
            break
        if attempt == ATTEMPTS - 1:
            refused.update((k, errors[k]) for k in retry)
            break
        logger.info(
            "%d deletes throttled by the store (%s); retrying", len(retry), errors[retry[0]]
        )
        time.sleep(BACKOFF_S * 2**attempt * _jitter())
        pending = retry
    return _deleted(by_key, refused)


def _deleted(by_key: dict[str, str], refused: dict[str, str]) -> list[str]:
    """The relative paths of the keys the store did not refuse (deleted or already gone),
    after a warning naming the first refusal."""
    if refused:
        key, code = next(iter(refused.items()))
        logger.warning(
            "the store refused to delete %d file(s) (first: %s, %s); they are kept and not "
            "counted as deleted",
            len(refused),
            by_key[key],
            code,
        )
    return [rel for key, rel in by_key.items() if key not in refused]


def native_delete_batch(store: NativeStore, root: str, relative_paths: Sequence[str]) -> list[str]:
    """`delete_batch` on the native client (see the module docstring)."""
    if not relative_paths:
        return []
    base = store.key(root).rstrip("/")
    by_key = {(f"{base}/{p}" if base else p): p for p in relative_paths}
    pending = sorted(by_key)
    refused: dict[str, str] = {}
    for attempt in range(ATTEMPTS):
        try:
            store.delete_keys(pending)
            break
        except FileNotFoundError:
            code = "NoSuchKey"  # Azure and GCS refuse to delete a key that is gone
        except OSError as exc:
            code = _code(exc)
        left = _still_listed(store, pending)
        if not left:
            break
        if code not in RETRYABLE_CODES and code != "NoSuchKey":
            refused.update((k, code) for k in left)
            break
        if attempt == ATTEMPTS - 1:
            refused.update((k, code) for k in left)
            break
        if code != "NoSuchKey":
            logger.info("%d deletes throttled by the store (%s); retrying", len(left), code)
            time.sleep(BACKOFF_S * 2**attempt * _jitter())
        pending = left
    return _deleted(by_key, refused)


def _code(error: BaseException) -> str:
    """The store's error code in a native delete error (``... (code: AccessDenied)``), else
    the first line of its text (treated as transient)."""
    text = first_line(error)
    start = text.rfind("(code: ")
    if start >= 0:
        return text[start + len("(code: ") :].split(")", 1)[0].strip()
    if isinstance(error, PermissionError):
        return "AccessDenied"
    return "InternalError"


def _still_listed(store: NativeStore, keys: Sequence[str]) -> list[str]:
    """Which of the sorted `keys` the store still lists: one listing of their range, under
    their common directory, from just before the first key to the last."""
    wanted = set(keys)
    common = keys[0].rsplit("/", 1)[0] if "/" in keys[0] else ""
    for key in keys:
        while common and not key.startswith(common + "/"):
            common = common.rsplit("/", 1)[0] if "/" in common else ""
    first, last = keys[0], keys[-1]
    offset = first[:-1] + chr(ord(first[-1]) - 1) + "\U0010ffff" if first else None
    found: list[str] = []
    for page in store.list_tree(store.path(common), offset=store.path(offset) if offset else None):
        for obj in page:
            key = store.key(obj.path)
            if key in wanted:
                found.append(key)
        if page and store.key(page[-1].path) >= last:
            break
    return found


__all__ = ["RETRYABLE_CODES", "delete_batch", "native_delete_batch"]
