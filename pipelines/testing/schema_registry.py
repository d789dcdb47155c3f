"""Schema registries on 127.0.0.1 for development and tests: a real Apicurio Registry, and a replay of its answers.

:class:`LocalRegistry` runs the real Apicurio Registry (``io.apicurio:apicurio-registry-app``, its
``-all.tar.gz`` from Maven Central: a Quarkus runner jar and its libraries) with its default
in-memory H2 storage, serving the Confluent-compatible API under ``/apis/ccompat/v7``. Version 3.0.9
is the newest whose classes run on Java 17 (3.3.x needs Java 21). The archive is fetched once with
``mvn dependency:copy`` into ``<build_dir>/m2`` and unpacked into ``<build_dir>/apicurio/<version>``
(as :mod:`pipelines.testing.kafka_broker` does for Kafka); it starts in 15-60 s on two cores.

:class:`RecordedRegistry` is a tiny ``http.server`` that replays the answers the real Apicurio
gave (recorded 2026-11-23 from 3.0.9, ccompat v7: ``GET /schemas/ids/{id}`` →
``{"schema": ..., "schemaType": "AVRO", "references": []}``, an unknown id → HTTP 404
``{"message": "No content with ID '99' was found.", "error_code": 40403}``, an unknown path → 404
with an empty body) for unit tests that
cannot wait for a JVM. Its 401 answer follows Confluent's documented error body (Apicurio without
an identity server has no basic auth to record).

Typical use::

    with LocalRegistry() as reg:
        schema_id = reg.register("orders-value", avro_schema_dict)
        reg.url   # "http://127.0.0.1:PORT/apis/ccompat/v7"
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pipelines.spark import build_dir as default_build_dir
from pipelines.testing.kafka_broker import free_port, set_pdeathsig

APICURIO_VERSION = "3.0.9"
CCOMPAT_PATH = "/apis/ccompat/v7"
_ARTIFACT = "io.apicurio:apicurio-registry-app:{version}:tar.gz:all"


class RegistryError(RuntimeError):
    """The local registry could not be fetched, started or reached."""


def ensure_app(build_dir: str | os.PathLike[str] | None = None, version: str = APICURIO_VERSION) -> Path:
    """``<build_dir>/apicurio/<version>/apicurio-registry-app-<version>-runner.jar``, fetched on first use."""
    build = (Path(build_dir) if build_dir is not None else default_build_dir()).resolve()
    home = build / "apicurio" / version
    jar = home / f"apicurio-registry-app-{version}-runner.jar"
    if jar.is_file() and (home / "lib").is_dir():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RegistryError("Maven (mvn) is needed once to fetch Apicurio Registry from Maven Central")
    download = build / "apicurio" / "dl"
    archive = download / f"apicurio-registry-app-{version}-all.tar.gz"
    if not archive.is_file():
        cmd = [
            mvn,
            "-q",
            "-B",
            f"-Dmaven.repo.local={build / 'm2'}",
            "dependency:copy",
            f"-Dartifact={_ARTIFACT.format(version=version)}",
            f"-DoutputDirectory={download}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode != 0 or not archive.is_file():
            raise RegistryError(f"could not fetch Apicurio Registry {version}: {(done.stdout + done.stderr)[-800:]}")
    partial = home.with_name(f"{version}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(partial, filter="data")
    shutil.rmtree(home, ignore_errors=True)
    partial.rename(home)
    if not jar.is_file():
        raise RegistryError(f"{archive.name} holds no {jar.name}")
    return jar


class LocalRegistry:
    """A real Apicurio Registry (in-memory storage) on 127.0.0.1 and a free port."""

    def __init__(self, build_dir: str | os.PathLike[str] | None = None, port: int | None = None) -> None:
        self.build_dir = build_dir
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL (what ``schema_registry.url`` is set to)."""
        return self.base + CCOMPAT_PATH

    def start(self, timeout: float = 240.0) -> LocalRegistry:
        jar = ensure_app(self.build_dir)
        java = shutil.which("java")
        if java is None:
            raise RegistryError("java (17+) is not installed")
        self.log_path = jar.parent / f"registry-{self.port}.log"
        cmd = [
            java,
            "-Xmx384m",
            "-XX:TieredStopAtLevel=1",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.management.host=127.0.0.1",
            f"-Dquarkus.management.port={free_port()}",
            "-jar",
            str(jar),
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                cmd, cwd=jar.parent, stdout=log, stderr=subprocess.STDOUT, preexec_fn=set_pdeathsig
            )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RegistryError(f"Apicurio Registry exited with {self.process.returncode}: {self._log_tail()}")
            try:
                self._call("GET", "/subjects")
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(1.0)
        self.stop()
        raise RegistryError(f"Apicurio Registry did not answer within {timeout:g} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return self.log_path.read_text(errors="replace")[-1500:]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def register(self, subject: str, schema: Any) -> int:
        """Register an Avro schema (a dict, or its JSON text) under a subject; its global id."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return int(self._call("POST", f"/subjects/{subject}/versions", {"schema": text})["id"])

    def stop(self, timeout: float = 30.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __enter__(self) -> LocalRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------- recorded answers


#: Apicurio 3.0.9's answer to an unknown id (recorded).
NOT_FOUND_BODY = {"message": "No content with ID '{id}' was found.", "error_code": 40403}
#: Confluent's documented answer to missing or wrong credentials (not recorded: see the module docstring).
UNAUTHORIZED_BODY = {"error_code": 401, "message": "Unauthorized"}


class RecordedRegistry:
    """Replays the registry answers recorded from the real Apicurio ccompat API, on 127.0.0.1.

    ``schemas`` maps id → Avro schema (dict or text). ``credentials`` (user, password) makes every
    request without that basic-auth header a 401. ``delay`` seconds pass before each answer
    (timeouts). ``requests`` lists the paths asked for; ``auth_headers`` the Authorization headers seen.
    """

    def __init__(
        self,
        schemas: dict[int, Any] | None = None,
        credentials: tuple[str, str] | None = None,
        delay: float = 0.0,
        status: int | None = None,
    ) -> None:
        self.schemas = dict(schemas or {})
        self.credentials = credentials
        self.delay = delay
        self.status = status  # answer every request with this HTTP status (e.g. 503)
        self.requests: list[str] = []
        self.auth_headers: list[str | None] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}{CCOMPAT_PATH}"

    def start(self) -> RecordedRegistry:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.requests.append(self.path)
                owner.auth_headers.append(self.headers.get("Authorization"))
                if owner.delay:
                    time.sleep(owner.delay)
                status, body = owner.answer(self.path, self.headers.get("Authorization"))
                data = json.dumps(body).encode() if body is not None else b""
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout tests)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def answer(self, path: str, authorization: str | None) -> tuple[int, Any]:
        if self.credentials is not None:
            expected = "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
            if authorization != expected:
                return 401, UNAUTHORIZED_BODY
        if self.status is not None:
            return self.status, {"error_code": self.status * 100, "message": "recorded failure"}
        prefix = CCOMPAT_PATH + "/schemas/ids/"
        if path.startswith(prefix) and path[len(prefix) :].isdigit():
            schema_id = int(path[len(prefix) :])
            if schema_id in self.schemas:
                schema = self.schemas[schema_id]
                text = schema if isinstance(schema, str) else json.dumps(schema)
                return 200, {"schema": text, "schemaType": "AVRO", "references": []}
            return 404, {**NOT_FOUND_BODY, "message": NOT_FOUND_BODY["message"].format(id=schema_id)}
        return 404, None  # recorded: an unknown path is a 404 with an empty body

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> RecordedRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["APICURIO_VERSION", "LocalRegistry", "RecordedRegistry", "RegistryError", "ensure_app"]
