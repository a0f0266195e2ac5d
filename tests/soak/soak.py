#!/usr/bin/python3
"""Bounded soak of one inferencecache-server (docs/hostile-peers.md "Soak").

Runs, for --duration seconds, against one server:
  - 2 normal LookupRoute clients on persistent connections (their latency is
    what the chart shows),
  - ReportCacheState ingest over 8 tenants against a small global cap,
  - PublishEvent PREFIX_EVICTED / ALL_CLEARED,
  - policy pushes (PUT /policy) and scrapes (/metrics, /snapshot),
  - connection churn (a fresh connection per call),
  - hostile clients in rotation (HPACK bomb, rapid reset, half-closed peer,
    slow header block, zero window, PING flood, admin slowloris),
and samples the server's RSS, open fds, call errors and LookupRoute latency
every --interval seconds into CSV + an SVG chart. The verdict (exit status):
after the warm-up (a quarter of the run, at least 1 and at most 5 min) every sample's RSS
and fd count is within ±5 % of the post-warm-up median (fds: or ±3), there
is no unexpected error, and, with the traffic stopped, the soaked server's
LookupRoute p99 is within 2x of a fresh server's filled the same way, on the
same lookups interleaved call by call, judged when the box is not saturated
(docs/hostile-peers.md "Soak"). `--replot CSV` redraws and
re-judges RSS, fds and errors of a run.

    soak.py --server BUILD/src/inferencecache-server --duration 120 --out DIR
"""

import argparse
import csv
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hostile"))
import hostile_lib as hl  # noqa: E402
import hostile_test as ht  # noqa: E402

TENANTS = ["tenant-%d" % i for i in range(8)]
SERVER_FLAGS = ("--idle-timeout", "10s", "--index-max-entries", "20000")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = []
        self.calls = 0
        self.errors = []
        self.hostile = 0

    def call(self, seconds):
        with self.lock:
            self.latencies.append(seconds)
            self.calls += 1

    def error(self, what):
        with self.lock:
            self.errors.append("%.1f %s" % (time.time(), what))

    def take(self):
        with self.lock:
            lat, self.latencies = self.latencies, []
            return lat


def every(stop, period, fn, stats, name):
    while not stop.is_set():
        try:
            fn()
        except Exception as e:  # an unexpected error is a finding, not a crash
            stats.error("%s: %r" % (name, e))
        stop.wait(period)


def lookup_loop(srv, stop, stats, tenant):
    client = hl.GrpcClient(srv.grpc_port)
    rnd = random.Random(tenant)
    try:
        while not stop.is_set():
            msg = hl.lookup_request(rnd.choice(TENANTS), key=rnd.randrange(5000))
            t = time.perf_counter()
            try:
                status, resp = client.call("LookupRoute", msg)
            except Exception as e:
                stats.error("lookup: %r" % e)
                client.close()
                client = hl.GrpcClient(srv.grpc_port)
                continue
            stats.call(time.perf_counter() - t)
            if status != 0 or not hl.reason_code(resp):
                stats.error("lookup status %s" % status)
            stop.wait(0.001)
    finally:
        client.close()


class Persistent:
    """One persistent connection for the ingest / event writers."""

    def __init__(self, srv):
        self.srv, self.client = srv, None

    def call(self, method, msg):
        if self.client is None:
            self.client = hl.GrpcClient(self.srv.grpc_port)
        try:
            status, _ = self.client.call(method, msg)
        except Exception:
            self.client.close()
            self.client = None
            raise
        if status != 0:
            raise RuntimeError("%s grpc-status %d" % (method, status))


def report_message(rnd):
    """One ReportCacheState of the soak's ingest: 8 random keys of one tenant
    and replica, reported up to 60 s in the past."""
    return hl.report(rnd.choice(TENANTS), "r%d" % rnd.randrange(4),
                     [rnd.randrange(5000) for _ in range(8)],
                     hl.wall_us() - rnd.randrange(60_000_000))


def start_workers(srv, stop, stats):
    rnd = random.Random(12)
    ingest, events = Persistent(srv), Persistent(srv)

    def report():
        ingest.call("ReportCacheState", report_message(rnd))

    def evict():
        if rnd.random() < 0.01:
            events.call("PublishEvent", hl.event(4, rnd.choice(TENANTS), "r%d" % rnd.randrange(4)))
        else:
            events.call("PublishEvent", hl.event(2, rnd.choice(TENANTS), "r%d" % rnd.randrange(4),
                                                 key=rnd.randrange(5000)))

    def churn():
        status, _ = hl.call_once(srv.grpc_port, "LookupRoute",
                                 hl.lookup_request(rnd.choice(TENANTS), key=rnd.randrange(5000)))
        if status != 0:
            raise RuntimeError("churn grpc-status %d" % status)

    def policy():
        import http.client
        # Alternating quotas so each push changes something.
        quota = 3000 if int(time.monotonic() / 2) % 2 else 2500
        body = json.dumps({"version": 7, "policies": [
            {"namespace": "team-a", "routingFloorScore": 0}],
            "tenants": [{"tenantID": t, "maxIndexEntries": quota} for t in TENANTS[:4]]})
        conn = http.client.HTTPConnection("127.0.0.1", srv.control_port, timeout=10)
        try:
            conn.request("PUT", "/policy", body)
            r = conn.getresponse()
            r.read()
            if r.status != 204:
                raise RuntimeError("policy %d" % r.status)
        finally:
            conn.close()

    def scrape():
        for path, port in (("/metrics", srv.http_port), ("/healthz", srv.http_port)):
            if srv.http_get(path, port)[0] != 200:
                raise RuntimeError(path)

    def snapshot():
        if srv.http_get("/snapshot", srv.control_port)[0] != 200:
            raise RuntimeError("/snapshot")

    jobs = [(0.005, report, "ingest"), (0.02, evict, "event"), (0.02, churn, "churn"),
            (2.0, policy, "policy"), (1.0, scrape, "scrape"), (5.0, snapshot, "snapshot"),
            (1.0, lambda: hostile(srv, rnd, stats), "hostile")]
    threads = [threading.Thread(target=lookup_loop, args=(srv, stop, stats, "c%d" % i),
                                daemon=True) for i in range(2)]
    threads += [threading.Thread(target=every, args=(stop, p, fn, stats, name), daemon=True)
                for p, fn, name in jobs]
    for t in threads:
        t.start()
    return threads


BOMB = ht.hpack_bomb(2)
RESET = ht.rapid_reset_bytes(300)


def hostile(srv, rnd, stats):
    """One hostile client per call, in rotation; the server's answer is not
    checked here (the hostile suite does), only that it stays healthy."""
    kind = stats.hostile % 7
    stats.hostile += 1
    port = srv.grpc_port
    if kind == 0:
        ht.send_and_wait(port, BOMB, 2)
    elif kind == 1:
        ht.send_and_wait(port, RESET, 2)
    elif kind == 2:
        s = ht.half_closed_peer(port)
        hl.wait_closed(s, 2)
        s.close()
    elif kind == 3:
        s = hl.raw_connect(port, hl.frame(hl.HEADERS, hl.END_HEADERS, 1, hl.request_block())[:7])
        threading.Timer(15, s.close).start()  # held past the request deadline
    elif kind == 4:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(hl.PREFACE + hl.settings(initial_window=0) +
                  hl.frame(hl.HEADERS, hl.END_HEADERS, 1, hl.request_block()) +
                  hl.frame(hl.DATA, hl.END_STREAM, 1, hl.grpc_message(hl.lookup_request("z"))))
        threading.Timer(15, s.close).start()
    elif kind == 5:
        ht.control_flood(port, "ping")
    else:
        s = socket.create_connection(("127.0.0.1", srv.http_port))
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        threading.Timer(15, s.close).start()


def sample_row(srv, stats, start):
    lat = sorted(stats.take())
    p = (lambda q: lat[min(len(lat) - 1, int(len(lat) * q))] * 1e3) if lat else (lambda q: 0.0)
    entries = sum(srv.metric("core_index_entries", 'core="%d"' % c) for c in (0, 1))
    return {"t_s": round(time.monotonic() - start, 1), "rss_mib": round(srv.rss_bytes() / 2**20, 2),
            "fds": srv.fds(), "calls": len(lat), "errors": len(stats.errors),
            "p50_ms": round(p(0.5), 3), "p99_ms": round(p(0.99), 3),
            "index_entries": int(entries), "loadavg_1m": round(os.getloadavg()[0], 2)}


def verdict(rows, warmup_s, errors):
    post = [r for r in rows if r["t_s"] >= warmup_s]
    problems = []
    if len(post) < 3:
        return ["too few samples after warm-up"]
    if os.environ.get("IC_SANITIZED") == "1":
        # ASan's quarantine holds freed memory and every call costs more:
        # only errors count in a sanitizer build.
        return ["%d unexpected errors, first: %s" % (len(errors), errors[:3])] if errors else []
    for key, tol_abs in (("rss_mib", 0.0), ("fds", 3.0)):
        values = sorted(r[key] for r in post)
        med = values[len(values) // 2]
        worst = max(abs(v - med) for v in values)
        if worst > max(0.05 * med, tol_abs):
            problems.append("%s not flat: median %s, worst deviation %s" % (key, med, worst))
    if errors:
        problems.append("%d unexpected errors, first: %s" % (len(errors), errors[:3]))
    return problems


# ---- p99 stable: the soaked server against a fresh one, side by side -------

FRESH_REPORTS = 3000  # 24,000 upserts: a fresh server at the 20,000-entry cap like the soaked one
# Windows spread over ~30 s: on a loaded box one server's reactor threads can
# sit behind a busy CPU for ~10 s (its p99 0.3 -> 8 ms while the other's stays
# 0.3 ms, either way round), so the median must span several such spells.
PAIR_WINDOWS, PAIR_CALLS, PAIR_PAUSE_S = 20, 300, 1.0


def lookup_window(clients, rnd):
    """PAIR_CALLS LookupRoutes on each client, interleaved call by call (the
    same message to each, the first alternating), so that every client's
    samples come from the same moments of the machine. Returns p99 s by name."""
    lat = {name: [] for name in clients}
    names = list(clients)
    for i in range(PAIR_CALLS):
        msg = hl.lookup_request(rnd.choice(TENANTS), key=rnd.randrange(5000))
        for name in (names if i % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            status, resp = clients[name].call("LookupRoute", msg)
            lat[name].append(time.perf_counter() - t)
            if status != 0 or not hl.reason_code(resp):
                raise RuntimeError("LookupRoute grpc-status %d (%s)" % (status, name))
    return {name: hl.p99(v) for name, v in lat.items()}


def p99_against_fresh(binary, soaked):
    """p99 stable, judged so that machine load cannot fake it: a trend over the
    run follows the box's load (the first 30-minute run saw the load average go
    from 18 to 40 and the p99 with it), and a shared box flips between a
    0.25 ms and a 10 ms regime within seconds, so the soaked server is compared
    with a fresh server of the same flags, filled to the same cap by the same
    ingest, on the same lookups interleaved call by call. Returns (problems,
    (fresh, soaked) p99 pairs in ms, one per window)."""
    with hl.Server(binary, *SERVER_FLAGS, threads=2) as fresh:
        feeder = Persistent(fresh)
        rnd = random.Random(7)
        for _ in range(FRESH_REPORTS):
            feeder.call("ReportCacheState", report_message(rnd))
        clients = {"soaked": hl.GrpcClient(soaked.grpc_port),
                   "fresh": hl.GrpcClient(fresh.grpc_port)}
        pairs = []
        try:
            lookup_window(clients, random.Random(0))  # warm-up
            for i in range(PAIR_WINDOWS):
                got = lookup_window(clients, random.Random(i))
                pairs.append((got["fresh"] * 1e3, got["soaked"] * 1e3))
                time.sleep(PAIR_PAUSE_S)
        finally:
            for c in clients.values():
                c.close()
            if feeder.client is not None:
                feeder.client.close()
    ratio = hl.median([s / max(f, 1e-6) for f, s in pairs])
    print("soaked/fresh LookupRoute p99: %.2fx (median window)" % ratio)
    if os.environ.get("IC_SANITIZED") == "1":
        return [], pairs  # every call costs several times more: printed only
    pressure = cpu_pressure()
    if pressure > 50.0:
        print("p99 not judged: CPU pressure %.0f %% over the last 10 s (tasks waiting for a "
              "core); a p99 on a saturated box is the scheduler's, not the server's" % pressure)
        return [], pairs
    if ratio > 2.0:
        return ["p99 not stable: the soaked server's LookupRoute p99 is %.2fx a fresh "
                "server's (median window; limit 2x)" % ratio], pairs
    return [], pairs


def cpu_pressure():
    """Share of the last 10 s (%) in which some runnable task waited for a CPU
    (Linux PSI, /proc/pressure/cpu "some avg10"); without PSI, 100 x the 1-min
    load average per core, capped at 100."""
    try:
        with open("/proc/pressure/cpu") as f:
            fields = dict(kv.split("=") for kv in f.readline().split()[1:])
        return float(fields["avg10"])
    except (OSError, KeyError, ValueError):
        return min(100.0, 100.0 * os.getloadavg()[0] / (os.cpu_count() or 1))


def write_svg(path, rows, warmup_s, title):
    panels = [("rss_mib", "RSS (MiB)"), ("fds", "open fds"), ("p99_ms", "LookupRoute p99 (ms)"),
              ("p50_ms", "LookupRoute p50 (ms)"), ("index_entries", "index entries"),
              ("errors", "unexpected errors (cumulative)"),
              ("loadavg_1m", "machine load average (1 min)")]
    panels = [p for p in panels if p[0] in rows[0]]
    w, ph, pad = 900, 130, 50
    h = 40 + len(panels) * (ph + 30)
    t_max = max(r["t_s"] for r in rows) or 1
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">%s</text>' % (pad, title)]
    for i, (key, label) in enumerate(panels):
        y0 = 40 + i * (ph + 30)
        vals = [r[key] for r in rows]
        lo, hi = 0.0, max(vals) * 1.1 or 1.0
        sx = lambda t: pad + (w - 2 * pad) * t / t_max  # noqa: E731
        sy = lambda v: y0 + ph - ph * (v - lo) / (hi - lo)  # noqa: E731
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' %
                   (pad, y0, w - 2 * pad, ph))
        wx = sx(min(warmup_s, t_max))
        out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="#eee"/>' %
                   (pad, y0, wx - pad, ph))
        out.append('<text x="%d" y="%d">%s — max %.4g, last %.4g</text>' %
                   (pad, y0 - 4, label, max(vals), vals[-1]))
        out.append('<text x="%d" y="%d" text-anchor="end">%.4g</text>' % (pad - 4, y0 + 10, hi))
        out.append('<text x="%d" y="%d" text-anchor="end">0</text>' % (pad - 4, y0 + ph))
        pts = " ".join("%.1f,%.1f" % (sx(r["t_s"]), sy(r[key])) for r in rows)
        out.append('<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>' % pts)
    out.append('<text x="%d" y="%d">time (s), 0 – %d; grey: warm-up</text>' % (pad, h - 8, t_max))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def replot(csv_path):
    with open(csv_path) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    duration = rows[-1]["t_s"]
    warmup = min(300.0, max(duration / 4, 60.0))
    errors = int(rows[-1]["errors"])
    problems = verdict(rows, warmup, ["see the run's log"] * errors)
    title = "inferencecache soak: %d s, %d LookupRoute samples, %s" % (
        duration, sum(r["calls"] for r in rows), "PASS" if not problems else "FAIL")
    write_svg(os.path.join(os.path.dirname(csv_path), "soak.svg"), rows, warmup, title)
    print(title)
    for p in problems:
        print("  " + p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server")
    ap.add_argument("--duration", type=float, default=120)
    ap.add_argument("--interval", type=float, default=0)
    ap.add_argument("--out", default=".")
    ap.add_argument("--replot", help="re-judge and redraw an existing soak.csv")
    args = ap.parse_args()
    if args.replot:
        replot(args.replot)
        return
    if not args.server:
        ap.error("--server is required")
    interval = args.interval or max(2.0, args.duration / 200)
    warmup = min(300.0, max(args.duration / 4, 60.0))
    os.makedirs(args.out, exist_ok=True)
    stats, stop, rows = Stats(), threading.Event(), []
    with hl.Server(args.server, *SERVER_FLAGS, threads=2) as srv:
        start = time.monotonic()
        threads = start_workers(srv, stop, stats)
        csv_path = os.path.join(args.out, "soak.csv")
        with open(csv_path, "w", newline="") as f:
            writer = None
            while time.monotonic() - start < args.duration:
                time.sleep(interval)
                row = sample_row(srv, stats, start)
                rows.append(row)
                if writer is None:
                    writer = csv.DictWriter(f, fieldnames=list(row))
                    writer.writeheader()
                writer.writerow(row)
                f.flush()
        stop.set()
        for t in threads:
            t.join(30)
        p99_problems, pairs = p99_against_fresh(args.server, srv)
    print("LookupRoute p99 (ms) after the soak, fresh/soaked pairs: %s" % ", ".join(
        "%.2f/%.2f" % p for p in pairs))
    problems = verdict(rows, warmup, stats.errors) + p99_problems
    title = "inferencecache soak: %d s, %d LookupRoute samples, %d hostile clients, %s" % (
        args.duration, sum(r["calls"] for r in rows), stats.hostile,
        "PASS" if not problems else "FAIL")
    write_svg(os.path.join(args.out, "soak.svg"), rows, warmup, title)
    print(title)
    for p in problems:
        print("  " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
