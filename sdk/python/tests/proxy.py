"""A TCP proxy the tests control, between the SDK and the server: it can
drop the next connections (the request gets no answer), answer 503 as an
overloaded load balancer would, or pass everything through."""

from __future__ import annotations

import socket
import threading
from typing import List


class Proxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._drop = 0
        self._unavailable = False
        self.dropped = 0
        self.refused = 0  # requests answered 503
        self.passed = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        self._conns: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_next(self, n: int) -> None:
        """The next n connections are closed after the request arrives,
        without an answer."""
        with self._lock:
            self._drop = n

    def unavailable(self, on: bool) -> None:
        """While on, every request is answered 503 with an HTML page."""
        with self._lock:
            self._unavailable = on

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            with self._lock:
                drop = self._drop > 0
                if drop:
                    self._drop -= 1
                    self.dropped += 1
                unavailable = self._unavailable
                if unavailable and not drop:
                    self.refused += 1
            if drop:
                threading.Thread(target=self._hang_up, args=(conn,), daemon=True).start()
            elif unavailable:
                threading.Thread(target=self._answer_503, args=(conn,), daemon=True).start()
            else:
                with self._lock:
                    self.passed += 1
                threading.Thread(target=self._forward, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
        except OSError:
            return

    def _hang_up(self, conn: socket.socket) -> None:
        self._read_request(conn)
        conn.close()

    def _answer_503(self, conn: socket.socket) -> None:
        self._read_request(conn)
        body = b"<html><body>503 Service Unavailable</body></html>"
        conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        conn.close()

    def _forward(self, conn: socket.socket) -> None:
        try:
            up = socket.create_connection(self.upstream)
        except OSError:
            conn.close()
            return

        def pipe(a: socket.socket, b: socket.socket) -> None:
            try:
                while True:
                    chunk = a.recv(65536)
                    if not chunk:
                        break
                    b.sendall(chunk)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
        pipe(conn, up)
