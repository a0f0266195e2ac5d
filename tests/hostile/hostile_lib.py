"""Support for the hostile-peer suite (docs/hostile-peers.md): the real
server on free loopback ports, a well-behaved gRPC client (python3-h2), raw
HTTP/2 frames for the attackers, protobuf encoding of the few messages the
suite sends, and latency windows for the "a normal client keeps its latency"
checks.

Only Debian packages: python3-h2 (with python3-hpack). Every wait is bounded.
"""

import http.client
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

try:
    import h2.config
    import h2.connection
    import h2.events
    import hpack
except ImportError:  # python3-h2 missing: meson's "skipped"
    print("python3-h2 is not installed (tools/install-deps.sh installs it)")
    sys.exit(77)

GRPC_SERVICE = "/inferencecache.v1alpha1.InferenceCache/"
ENHANCE_YOUR_CALM = 0xB

# ---- protobuf (proto3 wire format, the fields the suite uses) ---------------


def _varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_bytes(field, value):
    if isinstance(value, str):
        value = value.encode()
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def pb_int(field, value):
    return _varint(field << 3) + _varint(value)


def pb_fields(data):
    """Yields (field, value) of a message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(data, i)
        elif wire == 2:
            n, i = _read_varint(data, i)
            v, i = data[i:i + n], i + n
        elif wire == 5:
            v, i = data[i:i + 4], i + 4
        elif wire == 1:
            v, i = data[i:i + 8], i + 8
        else:
            raise ValueError("wire type %d" % wire)
        yield field, v


def _read_varint(data, i):
    shift = v = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def key_hash(n):
    """An 8-byte prefix hash for key number n."""
    return struct.pack(">Q", 0x1000 + n)


def lookup_request(tenant, model="m", key=1, tokens=128, scheme="vllm"):
    return (pb_bytes(1, model) + pb_bytes(2, tenant) + pb_bytes(3, key_hash(key)) +
            pb_int(4, tokens) + pb_bytes(5, scheme))


def report(tenant, replica, keys, ts_us, model="m", scheme="vllm"):
    prefixes = b"".join(pb_bytes(6, pb_bytes(1, key_hash(k)) + pb_int(2, 128)) for k in keys)
    return (pb_bytes(1, replica) + pb_bytes(2, model) + pb_bytes(3, tenant) +
            pb_bytes(4, scheme) + pb_int(5, ts_us) + prefixes)


def event(kind, tenant, replica, key=None, ts_us=0, model="m"):
    """kind: 2 PREFIX_EVICTED, 4 ALL_CLEARED."""
    body = pb_int(1, kind) + pb_bytes(2, replica) + pb_bytes(3, model) + pb_bytes(4, tenant)
    if key is not None:
        body += pb_bytes(5, key_hash(key))
    if ts_us:
        body += pb_int(6, ts_us)
    return body


def reason_code(response):
    for field, value in pb_fields(response):
        if field == 2:
            return value.decode()
    return ""


def wall_us():
    return int(time.time() * 1e6)


# ---- the server --------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """inferencecache-server on free loopback ports; stop() returns its exit status."""

    def __init__(self, binary, *args, threads=1):
        self.log = tempfile.NamedTemporaryFile(prefix="ic-hostile-", suffix=".log", delete=False)
        for _ in range(3):
            self.grpc_port, self.http_port, self.control_port = free_port(), free_port(), free_port()
            cmd = [binary, "--grpc-bind-address", "127.0.0.1:%d" % self.grpc_port,
                   "--http-bind-address", "127.0.0.1:%d" % self.http_port,
                   "--snapshot-bind-address", "127.0.0.1:%d" % self.control_port,
                   "--threads", str(threads), "--pin-threads", "false",
                   "--insecure-disable-auth", "--log-level", "warn"] + list(args)
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
            if self._wait_ready(20):
                return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError("server did not start: " + self.output())

    def _wait_ready(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                if self.http_get("/readyz")[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def http_get(self, path, port=None, timeout=10):
        conn = http.client.HTTPConnection("127.0.0.1", port or self.http_port, timeout=timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def scrape(self):
        """The text of a whole /metrics scrape. /metrics answers 503 when a
        core is late to answer (a busy sanitizer build) and its text then
        holds no sample at all: asked again for up to 10 s."""
        end = time.monotonic() + 10
        status, body = self.http_get("/metrics")
        while status == 503 and time.monotonic() < end:
            time.sleep(0.1)
            status, body = self.http_get("/metrics")
        assert status == 200, (status, body[:200])
        return body.decode()

    def metric(self, name, labels=""):
        """The value of one sample of /metrics (0 when absent)."""
        text = self.scrape()
        key = "inferencecache_%s%s " % (name, "{%s}" % labels if labels else "")
        for line in text.splitlines():
            if line.startswith(key):
                return float(line[len(key):])
        return 0.0

    def limit_hits(self, kind):
        return self.metric("peer_limit_hits_total", 'kind="%s"' % kind)

    def rss_bytes(self):
        with open("/proc/%d/statm" % self.proc.pid) as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        status = self.stop()
        if exc[0] is not None or status != 0:
            print(self.output()[-4000:])
        assert status == 0, "server exit status %s" % status
        os.unlink(self.log.name)


# ---- a well-behaved gRPC client ------------------------------------------------


class GrpcError(Exception):
    pass


class GrpcClient:
    """One HTTP/2 connection making calls one at a time: unary (call) or
    server-streaming (start, then finish with on_data)."""

    def __init__(self, port, timeout=10):
        self.timeout = timeout
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.h2.initiate_connection()
        self.sock.sendall(self.h2.data_to_send())

    def start(self, method, message):
        """Sends one request (headers, the message, end of stream); returns
        its stream id."""
        sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(sid, [(":method", "POST"), (":scheme", "http"),
                                   (":path", GRPC_SERVICE + method), (":authority", "ic"),
                                   ("content-type", "application/grpc"), ("te", "trailers")])
        self._send_body(sid, grpc_message(message))
        return sid

    def _send_body(self, sid, data):
        """Sends `data` on `sid` with END_STREAM, in frames the peer's
        SETTINGS and flow-control windows allow; waits for its SETTINGS and
        WINDOW_UPDATEs when the window is used up (a fresh connection only:
        other streams' events are not kept)."""
        while True:
            n = min(len(data), self.h2.local_flow_control_window(sid),
                    self.h2.max_outbound_frame_size)
            if n == len(data):
                self.h2.send_data(sid, data, end_stream=True)
                self.sock.sendall(self.h2.data_to_send())
                return
            if n > 0:
                self.h2.send_data(sid, data[:n])
                data = data[n:]
            out = self.h2.data_to_send()
            if out:
                self.sock.sendall(out)
            if self.h2.local_flow_control_window(sid) == 0 or n == 0:
                received = self.sock.recv(65536)
                if not received:
                    raise GrpcError("connection closed")
                self.h2.receive_data(received)

    def finish(self, sid, on_data=None, until=None):
        """Reads until stream `sid` has its grpc-status. Response bytes go to
        on_data(bytes), or are collected. With `until` (a time.monotonic()
        deadline) it returns once that passes, status None. Returns (status,
        collected bytes)."""
        body, status = bytearray(), None
        while status is None:
            if until is not None:
                left = until - time.monotonic()
                if left <= 0:
                    return None, bytes(body)
                self.sock.settimeout(min(left, self.timeout))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                if until is not None and time.monotonic() >= until:
                    return None, bytes(body)
                raise
            if not data:
                raise GrpcError("connection closed")
            for ev in self.h2.receive_data(data):
                if isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    if on_data is None:
                        body += ev.data
                    else:
                        on_data(ev.data)
                    self.h2.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                    if ev.stream_id == sid:
                        for k, v in ev.headers:
                            if k == b"grpc-status":
                                status = int(v)
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                    raise GrpcError("stream reset %d" % ev.error_code)
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise GrpcError("GOAWAY %d" % ev.error_code)
            out = self.h2.data_to_send()
            if out:
                self.sock.sendall(out)
        return status, bytes(body)

    def call(self, method, message):
        """A unary call: (grpc-status as int, response message bytes)."""
        status, body = self.finish(self.start(method, message))
        return status, body[5:]

    def close(self):
        self.sock.close()


def call_once(port, method, message):
    c = GrpcClient(port)
    try:
        return c.call(method, message)
    finally:
        c.close()


# ---- raw frames for attackers ------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9)
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def settings(**values):
    ids = {"initial_window": 4, "max_frame": 5, "header_table": 1}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v)
                                          for k, v in values.items()))


def header_frames(stream, block, flags=0, max_frame=16384):
    """HEADERS (+ CONTINUATION) frames carrying `block`; `flags` may add
    END_STREAM to the HEADERS frame."""
    chunks = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
    out = b""
    for i, c in enumerate(chunks):
        last = END_HEADERS if i == len(chunks) - 1 else 0
        out += frame(HEADERS if i == 0 else CONTINUATION,
                     (flags if i == 0 else 0) | last, stream, c)
    return out


def request_block(method="LookupRoute", encoder=None):
    return (encoder or hpack.Encoder()).encode([
        (":method", "POST"), (":scheme", "http"), (":path", GRPC_SERVICE + method),
        (":authority", "ic"), ("content-type", "application/grpc"), ("te", "trailers")])


def grpc_message(message):
    return b"\0" + struct.pack(">I", len(message)) + message


def raw_connect(port, first=b"", timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(PREFACE + settings() + first)
    return s


def read_frames(sock, seconds):
    """Reads frames until EOF or `seconds`; returns (frames, eof) with frames
    a list of (type, flags, stream, payload)."""
    end = time.monotonic() + seconds
    buf, frames = b"", []
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return frames, False
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return frames, False
        except ConnectionResetError:
            return frames, True
        if not data:
            return frames, True
        buf += data
        i = 0  # parse by offset: slicing the rest per frame is quadratic in a flood
        while len(buf) - i >= 9:
            n = int.from_bytes(buf[i:i + 3], "big")
            if len(buf) - i < 9 + n:
                break
            frames.append((buf[i + 3], buf[i + 4],
                           int.from_bytes(buf[i + 5:i + 9], "big") & 0x7FFFFFFF,
                           buf[i + 9:i + 9 + n]))
            i += 9 + n
        buf = buf[i:]


def goaway_code(frames):
    for t, _, _, payload in frames:
        if t == GOAWAY:
            return int.from_bytes(payload[4:8], "big")
    return None


def wait_closed(sock, seconds):
    """(seconds until the server closed the socket or None, GOAWAY code)."""
    start = time.monotonic()
    frames, eof = read_frames(sock, seconds)
    return (time.monotonic() - start if eof else None), goaway_code(frames)


# ---- latency under attack ------------------------------------------------------


def p99(samples):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


def median(values):
    s = sorted(values)
    return s[len(s) // 2]


def measure_window(client, message, calls, until=None, seconds=30):
    """p99 (s) of LookupRoutes on `client`: at least `calls` of them, and on
    until `until()` is true (bounded by `seconds`)."""
    lat = []
    end = time.monotonic() + seconds
    while len(lat) < calls or (until is not None and not until()):
        assert time.monotonic() < end, "window not complete within %d s" % seconds
        t = time.perf_counter()
        status, _ = client.call("LookupRoute", message)
        lat.append(time.perf_counter() - t)
        assert status == 0, "LookupRoute grpc-status %d" % status
    return p99(lat)


def latency_kept(server, attack_on, attack_off, attacks=None, pairs=20, calls=300,
                 min_attacks=3, factor=2.0, allow_s=0.0005):
    """Acceptance 2 of docs/hostile-peers.md: a normal client's LookupRoute
    p99 under attack stays within `factor` x its quiet p99, measured on one
    normal connection in `pairs` pairs of windows, quiet then attacked, the
    attack running between attack_on() and attack_off().

    Noise is handled by pairing: a loaded machine flips between regimes (its
    p99 0.3 ms one moment, 8 ms the next, whichever server runs), so each
    attacked window is compared with the quiet window just before it, and the
    median pair must pass: attacked <= max(factor x quiet, quiet + allow),
    allow being the larger of allow_s and the quiet windows' own noise
    (quiet_noise).
    The attacker runs at SCHED_IDLE (Attacker), so its own CPU does not sit
    next to the normal client's: at nice 19 a rapid-reset or PING-flood loop
    added 0.2-0.35 ms to a 0.3 ms quiet p99 although no server turn takes more
    than ~0.1 ms of CPU (docs/hostile-peers.md "Fair turns"). At SCHED_IDLE
    and load ~2 the six cases' median ratios are 0.89-1.10, but with other
    processes compiling on the same two cores a rapid reset still measured
    2.10 (0.27 / 0.57 ms), hence `allow_s` (0.5 ms), raised to the quiet windows' noise. With
    `attacks` (a count of completed attacks) an attacked window lasts until at
    least `min_attacks` attacks completed in it,
    so a starved attacker cannot make the check pass. Returns the median quiet
    and attacked p99 (s)."""
    client = GrpcClient(server.grpc_port)
    message = lookup_request("normal")
    measure_window(client, message, 100)  # warm-up
    quiet, attacked = [], []
    try:
        for _ in range(pairs):
            quiet.append(measure_window(client, message, calls))
            attack_on()
            if attacks is None:
                attacked.append(measure_window(client, message, calls))
            else:
                started = attacks()
                attacked.append(measure_window(
                    client, message, calls, lambda: attacks() - started >= min_attacks))
            attack_off()
    finally:
        client.close()
    ratios = [a / q for q, a in zip(quiet, attacked)]
    allow = max(allow_s, quiet_noise(quiet))
    margins = [a - max(factor * q, q + allow) for q, a in zip(quiet, attacked)]
    q, a, r = median(quiet), median(attacked), median(ratios)
    print("normal client LookupRoute p99 (ms), quiet/attacked pairs: %s; medians %.3f / %.3f, "
          "median ratio %.2f, tolerance %.2f ms (load %.1f)" % (
              ", ".join("%.2f/%.2f" % (x * 1e3, y * 1e3) for x, y in zip(quiet, attacked)),
              q * 1e3, a * 1e3, r, allow * 1e3, os.getloadavg()[0]))
    if os.environ.get("IC_SANITIZED") == "1":
        print("sanitizer build: latency printed, not asserted")
        return q, a
    assert median(margins) <= 0, (
        "attacked p99 over max(%.1fx, +%.2f ms) of quiet in most pairs (median ratio %.2f)" % (
            factor, allow * 1e3, r))
    return q, a


def quiet_noise(quiet):
    """How far the p99 moves between two successive quiet windows (s): the
    median of their absolute differences. An attack's effect smaller than
    this cannot be told from the machine's own noise. On a quiet machine it
    is ~0.1 ms, under the fixed 0.5 ms tolerance; on a loaded CI machine
    quiet windows read 1.0-5.0 ms and moved ~2 ms apart (slowloris, whose
    idle held connections cost the server nothing, read median ratio 2.02
    there). A reactor blocked by an attack adds tens to hundreds of ms."""
    steps = [abs(x - y) for x, y in zip(quiet, quiet[1:])]
    return median(steps) if steps else 0.0


class Attacker:
    """Runs `attack(port)` in a loop in another process while switched on;
    the latency check toggles it. The process runs at SCHED_IDLE: on this
    machine it shares the two cores with the server and the normal client,
    and a real attacker's CPU is not the server's to protect (its requests
    are). `count` is the number of attacks completed."""

    def __init__(self, port, attack, pace_s=0.01):
        self.pace_s = pace_s
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        self.active, self.done = ctx.Event(), ctx.Event()
        self.count = ctx.Value("l", 0)
        self.busy = ctx.Value("i", 0)
        self.proc = ctx.Process(target=self._run, args=(port, attack), daemon=True)
        self.proc.start()

    def _run(self, port, attack):
        # SCHED_IDLE: the attacker runs on CPU time nobody else wants, so on
        # this shared 2-core box it stands for a peer on another machine and
        # does not take the normal client's CPU (what is measured is the
        # server's turns, not the test host's scheduler). Fallback nice 19.
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):
            os.nice(19)
        while not self.done.is_set():
            if not self.active.wait(0.005):
                continue
            self.busy.value = 1
            try:
                attack(port)
            except OSError:
                pass
            with self.count.get_lock():
                self.count.value += 1
            self.busy.value = 0
            time.sleep(self.pace_s)

    def completed(self):
        return self.count.value

    def on(self):
        self.active.set()

    def off(self):
        """Switches off and waits (bounded) for the attack in progress."""
        self.active.clear()
        end = time.monotonic() + 10
        while self.busy.value and time.monotonic() < end:
            time.sleep(0.001)

    def stop(self):
        self.done.set()
        self.active.clear()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def kept_under(server, attack):
    """latency_kept() with an Attacker running `attack(port)` against the
    server's gRPC port, stopped afterwards; returns the attacks completed."""
    attacker = Attacker(server.grpc_port, attack)
    try:
        latency_kept(server, attacker.on, attacker.off, attacks=attacker.completed)
    finally:
        attacker.stop()
    return attacker.count.value


def flood(payload, read_s):
    """An attack for Attacker: a connection that sends `payload` after the
    preface, reads what comes back for `read_s` seconds, and closes."""
    def attack(port):
        s = raw_connect(port, payload)
        read_frames(s, read_s)
        s.close()
    return attack


# ---- the suites' command line ----------------------------------------------------


def run_cases(namespace):
    """`SCRIPT SERVER_BINARY CASE`: runs the script's case_CASE(SERVER_BINARY)
    (`namespace` is the script's globals()) and prints "ok: CASE"."""
    cases = {name[len("case_"):]: fn for name, fn in namespace.items() if name.startswith("case_")}
    if len(sys.argv) != 3 or sys.argv[2] not in cases:
        sys.exit("usage: %s SERVER_BINARY {%s}" % (os.path.basename(sys.argv[0]),
                                                   "|".join(sorted(cases))))
    cases[sys.argv[2]](sys.argv[1])
    print("ok:", sys.argv[2])
