#!/usr/bin/python3
"""HTTP/2 peers that misuse the connection rather than flood it with work
(docs/hostile-peers.md "Connection misuse"), one case per run:

    transport_test.py SERVER_BINARY CASE

Each case starts its own server, drives it with raw frames, and asserts what
the peer gets (answers, GOAWAY code, close) and that nothing it had
accepted is lost.
"""

import socket
import struct
import threading
import time

import hostile_lib as hl

GRPC_OK = 0
FLOW_CONTROL_ERROR, PROTOCOL_ERROR = 3, 1  # RFC 9113 §7 error codes


def request_frames(sid, message, end_stream=True):
    return (hl.frame(hl.HEADERS, hl.END_HEADERS, sid, hl.request_block()) +
            hl.frame(hl.DATA, hl.END_STREAM if end_stream else 0, sid, hl.grpc_message(message)))


def window_update(stream, increment):
    return hl.frame(hl.WINDOW_UPDATE, 0, stream, struct.pack(">I", increment))


def grpc_statuses(frames):
    """{stream: grpc-status} from the trailers (HEADERS with END_STREAM) of
    `frames`; the server encodes grpc-status as a literal (not indexed)."""
    import hpack
    dec = hpack.Decoder()
    out = {}
    for t, flags, sid, payload in frames:
        if t != hl.HEADERS:
            continue
        fields = dict(dec.decode(payload))
        if flags & hl.END_STREAM and "grpc-status" in fields:
            out[sid] = int(fields["grpc-status"])
    return out


def case_half_close_pipelined(binary):
    """A client that sends its requests, each ended, then shuts its side (FIN)
    gets every answer: the requests were accepted. 300 of them in one write
    (over the per-turn budget of 16 streams, docs/hostile-peers.md "Fair
    turns"), tenants of both cores (answers that come back from the other
    core after the FIN was read)."""
    with hl.Server(binary, threads=2) as srv:
        tenants = ["tenant-%d" % i for i in range(8)]
        for t in tenants:
            assert hl.call_once(srv.grpc_port, "ReportCacheState",
                                hl.report(t, "r", [1], hl.wall_us()))[0] == GRPC_OK
        n = 300
        out = b"".join(request_frames(2 * i + 1, hl.lookup_request(tenants[i % 8]))
                       for i in range(n))
        s = hl.raw_connect(srv.grpc_port, out)
        s.shutdown(socket.SHUT_WR)
        frames, eof = hl.read_frames(s, 20)
        s.close()
        statuses = grpc_statuses(frames)
        assert eof, "the server kept a half-closed connection with every call answered"
        assert sorted(statuses) == [2 * i + 1 for i in range(n)], "%d answers" % len(statuses)
        assert set(statuses.values()) == {GRPC_OK}, set(statuses.values())
        assert not any(t == hl.RST_STREAM for t, _, _, _ in frames)
        answers = [p for t, _, _, p in frames if t == hl.DATA]
        assert len(answers) == n and all(b"PREFIX_MATCH" in a for a in answers)
        assert srv.limit_hits("half_closed") == 0


class WindowedSender:
    """Sends DATA within the connection's flow-control window (RFC 9113
    §6.9), reading the server's WINDOW_UPDATEs when it runs out; fails on a
    GOAWAY or if the window is not given back within 10 s."""

    def __init__(self, sock):
        self.sock, self.window, self.buf = sock, 65535, b""
        self.frames = []  # every frame read, in order (HPACK state needs all)

    def data(self, sid, payload):
        for k in range(0, len(payload), 16000):
            chunk = payload[k:k + 16000]
            end = time.monotonic() + 10
            while self.window < len(chunk):
                assert time.monotonic() < end, "connection window not given back"
                self._read(end)
            self.sock.sendall(hl.frame(hl.DATA, 0, sid, chunk))
            self.window -= len(chunk)

    def read_for(self, seconds):
        """Reads frames for `seconds` (into self.frames)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._read(end)

    def _read(self, end):
        self.sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return
        assert data, "connection closed"
        self.buf += data
        while len(self.buf) >= 9 and len(self.buf) >= 9 + int.from_bytes(self.buf[:3], "big"):
            n = int.from_bytes(self.buf[:3], "big")
            t, flags = self.buf[3], self.buf[4]
            stream, payload = int.from_bytes(self.buf[5:9], "big"), self.buf[9:9 + n]
            assert t != hl.GOAWAY, "GOAWAY %r" % payload
            if t == hl.WINDOW_UPDATE and stream == 0:
                self.window += int.from_bytes(payload, "big")
            self.frames.append((t, flags, stream, payload))
            self.buf = self.buf[9 + n:]


def case_reset_mid_request(binary):
    """RST_STREAM(CANCEL) after 960,000 bytes of a 3 MB request message, 30
    times on one connection (28 MB, over the 16 MiB a connection may hold in
    partial messages; 30 resets, under the rapid-reset budget of 200): each
    reset frees its partial message and gives its bytes back to the
    connection's flow-control window, so the connection keeps working and a
    request after them is answered."""
    with hl.Server(binary) as srv:
        big = hl.grpc_message(hl.lookup_request("t") + hl.pb_bytes(10, "x" * 3_000_000))
        s = hl.raw_connect(srv.grpc_port)
        sender = WindowedSender(s)
        for i in range(30):
            sid = 2 * i + 1
            s.sendall(hl.frame(hl.HEADERS, hl.END_HEADERS, sid, hl.request_block()))
            sender.data(sid, big[:960_000])
            s.sendall(hl.frame(hl.RST_STREAM, 0, sid, struct.pack(">I", 8)))
        s.sendall(request_frames(61, hl.lookup_request("t")))
        sender.read_for(2)
        s.close()
        statuses = grpc_statuses(sender.frames)
        # The reset calls end without an answer; the last one is answered.
        assert statuses == {61: GRPC_OK}, statuses
        assert srv.limit_hits("flood") == 0


def case_window_update_abuse(binary):
    """WINDOW_UPDATE misuse: 200,000 increments of 1 on the connection cost
    their parse and nothing else (a request after them is answered on the
    same connection); an increment past 2^31-1 is FLOW_CONTROL_ERROR and one
    on an idle stream PROTOCOL_ERROR (RFC 9113 §6.9.1, §5.1), each a GOAWAY;
    a normal client keeps its latency under a loop of the flood."""
    with hl.Server(binary) as srv:
        s = hl.raw_connect(srv.grpc_port, window_update(0, 1) * 200_000 +
                           request_frames(1, hl.lookup_request("t")))
        frames, eof = hl.read_frames(s, 5)
        s.close()
        assert grpc_statuses(frames) == {1: GRPC_OK} and hl.goaway_code(frames) is None, eof
        for payload, code in ((window_update(0, 0x7FFFFFFF) * 2, FLOW_CONTROL_ERROR),
                              (window_update(7, 1), PROTOCOL_ERROR)):
            s = hl.raw_connect(srv.grpc_port, payload)
            closed, got = hl.wait_closed(s, 5)
            s.close()
            assert closed is not None and got == code, (closed, got, code)
        assert hl.kept_under(srv, hl.flood(window_update(0, 1) * 20_000, 0.2)) > 0


def case_streams_then_close(binary):
    """500 streams, each with 5 bytes of its message, then the socket closed
    (FIN, or RST by SO_LINGER 0), 20 times: every connection is released,
    no descriptor is left behind, and the server answers on."""
    with hl.Server(binary) as srv:
        fds = srv.fds()
        msg = hl.grpc_message(hl.lookup_request("t"))
        out = b"".join(hl.frame(hl.HEADERS, hl.END_HEADERS, 2 * i + 1, hl.request_block()) +
                       hl.frame(hl.DATA, 0, 2 * i + 1, msg[:5]) for i in range(500))
        for r in range(20):
            s = hl.raw_connect(srv.grpc_port, out)
            if r % 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        deadline = time.monotonic() + 10
        while srv.metric("open_connections", 'listener="grpc"') > 0 or srv.fds() > fds:
            assert time.monotonic() < deadline, "connections of closed peers still held"
            time.sleep(0.05)
        assert hl.call_once(srv.grpc_port, "LookupRoute", hl.lookup_request("t"))[0] == GRPC_OK


def case_unread_responses(binary):
    """A peer that pipelines requests and never reads the answers (a
    slowloris on the read side), with the largest windows it may grant: the
    server stops taking its requests once the answers cannot leave (here
    after ~160 KB of requests: the socket buffers), so what it holds is
    bounded, and with nothing moving it is cut within about the idle timeout
    (the idle close, whose GOAWAY is not read either, aborted one watchdog
    tick later); a normal client is served meanwhile."""
    idle_s = 3
    with hl.Server(binary, "--idle-timeout", "%ds" % idle_s) as srv:
        rss = srv.rss_bytes()
        s = socket.create_connection(("127.0.0.1", srv.grpc_port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(hl.PREFACE + hl.settings(initial_window=0x7FFFFFFF) +
                  window_update(0, 0x7FFFFFFF - 65535))
        s.setblocking(False)
        sent, sid, pending = 0, 1, b""
        blocked_at = None
        end = time.monotonic() + 30
        while blocked_at is None or time.monotonic() - blocked_at < 1:
            assert time.monotonic() < end, "the server read %d bytes of requests" % sent
            if not pending:
                pending = b"".join(request_frames(sid + 2 * i, hl.lookup_request("t"))
                                   for i in range(100))
                sid += 200
            try:
                n = s.send(pending)
                pending, sent, blocked_at = pending[n:], sent + n, None
            except BlockingIOError:
                blocked_at = blocked_at or time.monotonic()
                time.sleep(0.01)
        # The server stopped reading: the requests it took are bounded by its
        # output caps (4 MiB queued, docs/hostile-peers.md), not by the peer.
        grown = srv.rss_bytes() - rss
        assert sent < 64 << 20 and grown < 64 << 20, (sent, grown)
        assert hl.call_once(srv.grpc_port, "LookupRoute", hl.lookup_request("t"))[0] == GRPC_OK
        # Cut without being read from (reading would be send progress).
        while srv.metric("open_connections", 'listener="grpc"') > 0:
            assert time.monotonic() - blocked_at <= idle_s * 2 + 4, "a non-reader still held"
            time.sleep(0.1)
        print("cut %.1f s after the peer's requests blocked" % (time.monotonic() - blocked_at))
        s.close()


def case_deadline_edge(binary):
    """grpc-timeout at the edge of the reactor's sleep: LookupRoutes with
    1 µs .. 3 ms deadlines, to tenants of this core and of the other, four
    connections at once: every call is answered (OK, TIMEOUT reason or
    DEADLINE_EXCEEDED), none hangs."""
    with hl.Server(binary, threads=2) as srv:
        tenants = ["tenant-%d" % i for i in range(4)]
        for t in tenants:
            assert hl.call_once(srv.grpc_port, "ReportCacheState",
                                hl.report(t, "r", [1], hl.wall_us()))[0] == GRPC_OK
        timeouts = ["1u", "50u", "200u", "999u", "1m", "2m", "3m", "1n"]
        failures, outcomes = [], {}

        def client(k):
            try:
                c = hl.GrpcClient(srv.grpc_port)
                for i in range(400):
                    sid = c.h2.get_next_available_stream_id()
                    c.h2.send_headers(sid, [(":method", "POST"), (":scheme", "http"),
                                            (":path", hl.GRPC_SERVICE + "LookupRoute"),
                                            (":authority", "ic"),
                                            ("content-type", "application/grpc"),
                                            ("te", "trailers"),
                                            ("grpc-timeout", timeouts[(i + k) % len(timeouts)])])
                    c.h2.send_data(sid, hl.grpc_message(hl.lookup_request(tenants[i % 4])),
                                   end_stream=True)
                    c.sock.sendall(c.h2.data_to_send())
                    status, body = c.finish(sid, until=time.monotonic() + 10)
                    assert status in (0, 4), (status, i)
                    outcome = hl.reason_code(body[5:]) if status == 0 else "DEADLINE_EXCEEDED"
                    assert outcome in ("PREFIX_MATCH", "TIMEOUT", "DEADLINE_EXCEEDED"), outcome
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                c.close()
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(repr(e))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        print("outcomes", outcomes)
        assert not failures, failures
        assert sum(outcomes.values()) == 1600


if __name__ == "__main__":
    hl.run_cases(globals())
