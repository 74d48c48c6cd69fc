"""Clients of object stores (S3 and S3-compatible stores, GCS, Azure), built on obstore:
settings per URI prefix (`configure`), credentials from the standard chains, one client per
bucket and settings in a process (`store_for`), throttled requests retried (`retrying`), and
the store's errors as the builtin ones a file system raises (`seam_error`), so that callers
above the seam treat both alike. `ObjectStorage` (`object_store`) keeps the `Storage` contract
over them.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import threading
import time
from typing import Callable, Dict, Tuple, TypeVar
from urllib.parse import urlparse

from ..errors import ConfigurationError

T = TypeVar("T")

S3_SCHEMES = ("s3", "s3a")
GCS_SCHEMES = ("gs", "gcs")
AZURE_SCHEMES = ("az", "abfs", "abfss", "azure")
SCHEMES = S3_SCHEMES + GCS_SCHEMES + AZURE_SCHEMES

THROTTLE_RETRIES = 8
# Settings that are not secrets, by URI prefix (`configure`); executors have none and use
# their environment.
_settings: Dict[str, Dict[str, object]] = {}
_stores: Dict[Tuple, object] = {}
_stores_guard = threading.Lock()
def is_object_store_uri(path: str) -> bool:
    return "://" in path and path.split("://", 1)[0].lower() in SCHEMES


def configure(prefix: str, **settings) -> None:
    """Settings for every table under `prefix` (`s3://bucket` or `s3://bucket/some/prefix`) in
    this process: `endpoint`, `region`, `allow_http`, `virtual_hosted_style_request`, or any
    obstore config key. Another process (a Spark executor) reads its environment instead:
    see `object_store_settings` for the Spark side. Credentials belong to the standard chains,
    not here."""
    _settings[prefix.rstrip("/")] = {k: v for k, v in settings.items() if v is not None}
    with _stores_guard:
        _stores.clear()


def settings_for(uri: str) -> Dict[str, object]:
    """The `configure`d settings whose prefix is the longest that covers `uri`."""
    best, found = -1, {}
    for prefix, settings in _settings.items():
        if (uri == prefix or uri.startswith(prefix + "/")) and len(prefix) > best:
            best, found = len(prefix), settings
    return dict(found)


def split_uri(uri: str) -> Tuple[str, str, str]:
    """(scheme, bucket or container, key prefix) of an object-store URI."""
    if "#" in uri or "?" in uri:  # a URI parser would cut the key prefix there (and so would S3A)
        raise ConfigurationError(f"{uri}: an object-store location cannot hold '#' or '?'; rename that folder or table")
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    bucket = parsed.netloc
    root = parsed.path.strip("/")
    if scheme in ("abfs", "abfss") and "@" in bucket:  # abfss://container@account.dfs.core.windows.net/path
        bucket = bucket.split("@", 1)[0]
    if not bucket:
        raise ConfigurationError(f"{uri}: an object-store location names its bucket (s3://bucket/prefix)")
    return scheme, bucket, root


def _truthy(value) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")


def _aws_profile_provider():
    """boto3's credential chain (profiles, SSO, assume-role) when the environment points at a
    profile and has no keys of its own; None otherwise (obstore's own chain then applies)."""
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        return None
    if not (os.environ.get("AWS_PROFILE") or os.path.exists(os.path.expanduser("~/.aws/credentials"))
            or os.path.exists(os.path.expanduser("~/.aws/config"))):
        return None
    try:
        import boto3
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        return None
    session = boto3.Session()
    return Boto3CredentialProvider(session) if session.get_credentials() is not None else None


def _build_store(scheme: str, bucket: str, settings: Dict[str, object], retries: bool = True):
    """The client of a bucket. `retries=False`: a client that sends each request once (the
    publishing PUT, whose every attempt must follow a fresh check of the lease)."""
    from obstore.store import AzureStore, GCSStore, S3Store

    settings = dict(settings)
    client_options = {}
    allow_http = settings.pop("allow_http", None)
    if allow_http is None:
        endpoint = str(settings.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL")
                       or os.environ.get("AWS_ENDPOINT") or "")
        allow_http = _truthy(os.environ.get("AWS_ALLOW_HTTP", "")) or endpoint.startswith("http://")
    if allow_http:
        client_options["allow_http"] = True
    retry_config = {"max_retries": 10, "retry_timeout": dt.timedelta(minutes=3),
                    "backoff": {"init_backoff": dt.timedelta(milliseconds=100),
                                "max_backoff": dt.timedelta(seconds=15), "base": 2}}
    if not retries:
        retry_config = dict(retry_config, max_retries=0, retry_timeout=dt.timedelta(0))
    if scheme in S3_SCHEMES:
        if os.environ.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST") and "virtual_hosted_style_request" not in settings:
            settings["virtual_hosted_style_request"] = _truthy(os.environ["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"])  # the tasks: as the driver
        if "virtual_hosted_style_request" not in settings and (settings.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL")
                                                             or os.environ.get("AWS_ENDPOINT")):
            settings["virtual_hosted_style_request"] = False  # S3-compatible servers: path style
        if "region" not in settings and not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
            settings["region"] = "us-east-1"
        provider = _aws_profile_provider()
        return S3Store(bucket, config=settings, client_options=client_options, retry_config=retry_config,
                       **({"credential_provider": provider} if provider is not None else {}))
    if scheme in GCS_SCHEMES:
        return GCSStore(bucket, config=settings, client_options=client_options, retry_config=retry_config)
    return AzureStore(bucket, config=settings, client_options=client_options, retry_config=retry_config)


def store_for(uri: str, retries: bool = True):
    """The obstore client of `uri`'s bucket in this process (one per bucket and settings, so
    that every `Storage` of a bucket shares its connections); `retries=False`: the one that
    sends each request once."""
    scheme, bucket, _ = split_uri(uri)
    settings = settings_for(uri)
    key = (scheme, bucket, tuple(sorted((k, str(v)) for k, v in settings.items())), retries)
    with _stores_guard:
        store = _stores.get(key)
        if store is None:
            store = _stores[key] = _build_store(scheme, bucket, settings, retries=retries)
        return store


def _is_throttled(err: Exception) -> bool:
    text = str(err)  # status codes as the store's error spells them, not digits a key may hold
    return any(s in text for s in ("429 Too Many Requests", "Too Many Requests", "SlowDown", "503 Service Unavailable"))


def retrying(call: Callable[[], T]) -> T:
    """`call`, again after a throttling answer the library gave up on (exponential backoff
    with jitter). Only answers where the store refused the request are retried here, so a
    conditional put is never sent twice after the store may have applied it. The store's
    errors leave as the builtin ones a file system raises (FileNotFoundError, PermissionError,
    OSError), so callers above the seam treat both alike; refused conditional puts stay
    obstore's AlreadyExistsError and PreconditionError."""
    from obstore.exceptions import (GenericError, NotFoundError, PermissionDeniedError,
                                    UnauthenticatedError)

    pause = 0.2
    for attempt in range(THROTTLE_RETRIES + 1):
        try:
            return call()
        except NotFoundError as err:
            raise FileNotFoundError(str(err)) from err
        except (PermissionDeniedError, UnauthenticatedError) as err:
            raise PermissionError(_denied(err)) from err
        except GenericError as err:
            if attempt < THROTTLE_RETRIES and _is_throttled(err):
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, 10.0)
                continue
            raise OSError(str(err)) from err
    raise AssertionError("unreachable")


def not_found(err: Exception) -> bool:
    from obstore.exceptions import NotFoundError
    return isinstance(err, (FileNotFoundError, NotFoundError))


def refused(err: Exception) -> bool:
    """A conditional put the store refused: the object exists (create) or changed (update).
    S3 answers 412, or 409 ConditionalRequestConflict to a racing conditional put."""
    from obstore.exceptions import AlreadyExistsError, PreconditionError
    return (isinstance(err, (AlreadyExistsError, PreconditionError, FileExistsError))
            or "ConditionalRequestConflict" in str(err) or "409 Conflict" in str(err))


def seam_error(err: Exception) -> Exception:
    """The builtin error a file system would raise for the store's `err` (as `retrying`)."""
    from obstore.exceptions import GenericError, NotFoundError, PermissionDeniedError, UnauthenticatedError
    if isinstance(err, NotFoundError):
        return FileNotFoundError(str(err))
    if isinstance(err, (PermissionDeniedError, UnauthenticatedError)):
        return PermissionError(_denied(err))
    if isinstance(err, GenericError):
        return OSError(str(err))
    return err


def _denied(err: Exception) -> str:
    """One line for a request the store refused (403, 401): which request, on which object,
    the store's answer, and what to check; instead of the client's multi-line report."""
    text = str(err)
    request = re.search(r"Error performing (\w+) (\S+)", text)
    status = re.search(r"status code: (\d{3}[A-Za-z ]*)", text)
    code = re.search(r"<Code>([^<]{1,80})</Code>", text)
    what = f"{request.group(1)} {request.group(2)}" if request else first_line(err)
    answer = ", ".join(x.group(1).strip() for x in (status, code) if x) or type(err).__name__
    return (f"no permission: the store refused {what} ({answer}); check the credentials this host "
            "finds (the standard chain: environment, profile, role) and the bucket's policy")


def first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
