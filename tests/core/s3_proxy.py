"""An HTTP proxy in front of a local S3 server, for the tests and the benchmark
(`benchmarks/s3.py`): it relays every request, records it (kind and client), and can answer
chosen requests with an S3 error instead of relaying them.

Point a client at `proxy.url` instead of the server: the core's obstore clients through
`AWS_ENDPOINT_URL` (set before Spark starts, so its Python tasks inherit it) or
`object_store_client.configure`, Spark's S3A through `fs.s3a.endpoint`. Request bodies sent with a
Content-Length, chunked (`Transfer-Encoding: chunked`) or after `Expect: 100-continue` are
relayed whole, so multipart uploads pass through.
"""

from __future__ import annotations

import http.client
import http.server
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlparse

KINDS = ("LIST", "GET", "HEAD", "PUT", "POST", "DELETE")


def start_moto_server() -> Tuple[subprocess.Popen, str]:
    """A moto S3 server (server mode, it honours If-None-Match and If-Match) on a free port of
    127.0.0.1: (its process, its endpoint), once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).read()
            return proc, endpoint
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto_server did not start on {endpoint}")
            time.sleep(0.2)


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # with its query
    kind: str  # one of KINDS: LIST is a GET of a bucket listing
    client: str  # "S3A" (Spark, the AWS Java SDK), "obstore" (the core), "boto3", or "other"


def request_kind(method: str, path: str) -> str:
    """LIST for a GET of a bucket listing (`GET /bucket?list-type=2...`, path style), else the
    method."""
    parsed = urlparse(path)
    key = parsed.path.lstrip("/").partition("/")[2]
    if method == "GET" and not key:
        query = parse_qs(parsed.query, keep_blank_values=True)
        if not query or {"list-type", "prefix", "delimiter", "uploads", "continuation-token"} & set(query):
            return "LIST"
    return method


def client_of(user_agent: str) -> str:
    agent = user_agent.lower()
    if "hadoop" in agent or "aws-sdk-java" in agent or "s3a" in agent:
        return "S3A"
    if "object_store" in agent or "obstore" in agent:
        return "obstore"
    if "boto" in agent:
        return "boto3"
    return "other"


# A fault: the request (method, path with query) -> (status, S3 error code, message), or None to relay it.
Fault = Callable[[str, str], Optional[Tuple[int, str, str]]]


class S3Proxy:
    """Relays to `upstream` (http://host:port) from 127.0.0.1 on a free port, `url`."""

    def __init__(self, upstream: str):
        proxy, target = self, urlparse(upstream)
        self.requests: List[Request] = []
        self.fault: Optional[Fault] = None
        self._guard = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and `Expect: 100-continue` answered

            def log_message(self, *args):
                pass

            def _body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    parts = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                                pass
                            return b"".join(parts)
                        parts.append(self.rfile.read(size))
                        self.rfile.readline()  # the CRLF after the chunk
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _relay(self):
                body = self._body()
                proxy.record(Request(self.command, self.path, request_kind(self.command, self.path),
                                     client_of(self.headers.get("User-Agent") or "")))
                fault = proxy.fault(self.command, self.path) if proxy.fault else None
                if fault is not None:
                    status, code, message = fault
                    error = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
                             f"<Message>{message}</Message><Resource>{self.path.split('?')[0]}</Resource>"
                             "<RequestId>proxy</RequestId></Error>").encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(error)
                    return
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "transfer-encoding", "expect", "content-length", "keep-alive")}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
                try:
                    upstream_conn.request(self.command, self.path, body=body or None, headers=headers)
                    answer = upstream_conn.getresponse()
                    data = answer.read()
                    self.send_response(answer.status)
                    length = None
                    for key, value in answer.getheaders():
                        if key.lower() == "content-length":
                            length = value
                        elif key.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                            self.send_header(key, value)
                    # A HEAD's answer keeps the object's length (its body is empty).
                    self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream_conn.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _relay

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def record(self, request: Request) -> None:
        with self._guard:
            self.requests.append(request)

    def mark(self) -> int:
        """A point in the record, for `counts(since=...)`."""
        with self._guard:
            return len(self.requests)

    def since(self, mark: int = 0) -> List[Request]:
        with self._guard:
            return list(self.requests[mark:])

    def counts(self, since: int = 0, client: Optional[str] = None) -> Dict[str, int]:
        """Requests by kind (every kind of KINDS, zeros included) since `since`, of one client or all."""
        found = Counter(r.kind for r in self.since(since) if client is None or r.client == client)
        return {kind: found.get(kind, 0) for kind in KINDS}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
