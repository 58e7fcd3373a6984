"""The scheduler of a pool stream (see _pool): which daemon owes which
batch numbers, the batches received ahead of their turn, and the next
number for the caller. A thread of its own runs it; only that thread
touches its state once started, but for what the caller reads to report
(members, all_down_since) and the queues between them.

Events (on self.events): ("batch", member, gen, Arrival, time) and
("error", member, gen, err) from the receivers, ("opened", member, Conn or
error) from dials, ("resolved", addresses) from DNS, ("took",) when the
caller took a batch, ("close",). To the caller (on self.ready): ("batch",
number, Arrival, daemon), then ("end",) or ("error", Error).
"""

import logging
import queue
import threading
import time
from typing import Any, Dict, Optional, Tuple

from . import _address
from ._errors import Error
from ._poolmember import FATAL, Member, code, dial, same_stream, why

log = logging.getLogger("loaderd.pool")

WINDOW = 4             # batches wanted of one daemon and not yet received
CONNECT_TIMEOUT = 2.0  # one attempt to open a daemon's stream (after the first)
RESOLVE_EVERY = 30.0   # a dns:/// name is looked up again this often
TICK = 0.05            # how often the scheduler looks for silent daemons and late batches
STALE_AFTER = 1.0      # a batch time older than this counts as unmeasured: the daemon is asked first
HEDGE_AFTER = 0.1      # how late the caller's next batch may be before a second daemon is asked
BACKOFF = (0.1, 2.0)   # redialling a lost daemon: first and longest wait


class Scheduler:
    """Owns a pool stream's daemons and numbers; see the module's doc."""

    def __init__(self, pool, creds, open_msg, addrs, failover_after):
        self.pool, self.creds, self.open = pool, creds, open_msg
        self.address = pool.text
        self.failover = float(failover_after)
        self.events: queue.SimpleQueue[Tuple[Any, ...]] = queue.SimpleQueue()
        self.ready: queue.SimpleQueue[Tuple[Any, ...]] = queue.SimpleQueue()
        self.lock, self.stopped = threading.Lock(), False
        self.members = [Member(a) for a in addrs]
        self.last_wait = 0            # the caller's last wait, in ns, sent with each ack
        self.all_down_since = None
        self.thread = None

    def start(self, header, num, prefetch, opened):
        """Run the stream of reference header, numbered num, with the
        daemons' first dials (member -> Conn or error)."""
        self.header, self.num, self.total = header, num, num.count()
        # Tokens: a window per daemon, the caller's prefetch beside it, and
        # a window more that new numbers never take, for asking a lost or
        # slow daemon's batches of another while the rest wait in order.
        self.cap = int(prefetch) + WINDOW * (max(len(self.members), 2) + 1)
        self.span = self.cap - int(prefetch) - WINDOW
        self.tokens = 0           # wants outstanding + batches received and not yet taken by the caller
        self.next_num = 0         # first number never wanted
        self.lost = []            # numbers a lost daemon owed, to ask again (sorted)
        self.got = {}             # number -> (Arrival, daemon) received ahead of its turn
        self.deliver = 0          # the next number the caller gets
        self.hedged = set()       # numbers also wanted of a second daemon
        self.failed, self.failed_at = None, 0
        self.waiting = time.monotonic()
        self.last_resolve = time.monotonic()
        for m, r in opened.items():
            if isinstance(r, BaseException):
                self._backoff(m, r)
            else:
                self._up(m, r)
        self.thread = threading.Thread(target=self._run, name="loaderd-pool", daemon=True)
        self.thread.start()

    def stop(self):
        if self.thread is None:
            self.shutdown()
            return
        self.events.put(("close",))
        self.thread.join(5)

    def dial(self, m, timeout, wait_for_ready):
        m.dialling = True

        def run():
            r = dial(m.addr, self.creds, self.open, timeout, wait_for_ready)
            with self.lock:
                if not self.stopped:
                    self.events.put(("opened", m, r))
                    return
            if not isinstance(r, BaseException):
                r.close()

        threading.Thread(target=run, name="loaderd-pool-dial", daemon=True).start()

    def dial_all(self, connect_timeout):
        """Dial every daemon at once; wait for all, or, once one answered,
        CONNECT_TIMEOUT more (a late one joins through the scheduler)."""
        wait = connect_timeout if connect_timeout and connect_timeout > 0 else CONNECT_TIMEOUT
        for m in self.members:
            self.dial(m, wait, bool(connect_timeout and connect_timeout > 0))
        t0 = time.monotonic()
        opened: Dict[Any, Any] = {}  # member -> its open stream or error
        while len(opened) < len(self.members):
            ok = any(not isinstance(r, BaseException) for r in opened.values())
            left = t0 + CONNECT_TIMEOUT - time.monotonic() if ok else wait + 5
            if left <= 0:
                break
            try:
                _, m, r = self.events.get(timeout=left)
            except queue.Empty:
                break
            m.dialling = False
            opened[m] = r
        return opened

    def _run(self):
        try:
            while True:
                if self.failed is not None and self.deliver >= self.failed_at:
                    self.ready.put(("error", self.failed))
                    return
                self._assign()
                if 0 <= self.total <= self.deliver:
                    self.ready.put(("end",))
                    return
                self._housekeep()
                try:
                    ev: Optional[Tuple[Any, ...]] = self.events.get(timeout=TICK)
                except queue.Empty:
                    continue
                while ev is not None:
                    if ev[0] == "close":
                        return
                    self._handle(ev)
                    try:
                        ev = self.events.get_nowait()
                    except queue.Empty:
                        ev = None
        except BaseException as e:  # a bug: say so rather than hang the caller
            log.exception("loaderd pool: the scheduler failed")
            self.ready.put(("error", Error(f"loaderd: pool {self.address}: the scheduler failed: {e!r}")))
        finally:
            self.shutdown()

    def shutdown(self):
        with self.lock:
            self.stopped = True
        for m in self.members:
            conn, m.conn = m.conn, None
            if conn is not None:
                conn.close()

    def _handle(self, ev):
        kind = ev[0]
        if kind == "batch":
            self._arrival(*ev[1:])
        elif kind == "error":
            self._failure(*ev[1:])
        elif kind == "took":
            self.tokens -= 1
        elif kind == "opened":
            self._opened(*ev[1:])
        elif kind == "resolved":
            self._resolved(ev[1])

    def _next_wanted(self):
        k = self.next_num
        if self.lost:
            k = self.lost[0]
        elif 0 <= self.total <= k or k >= self.deliver + self.span:
            return None
        if self.failed is not None and k >= self.failed_at:
            return None  # the stream ends there
        return k

    def _pick(self, exclude=None):
        """The daemon expected to deliver one more batch soonest, among those
        up with room in their window; an unmeasured one goes first."""
        best, best_at, now = None, 0.0, time.monotonic()
        for m in self.members:
            if not m.up or m.removed or m is exclude or len(m.wanted) >= WINDOW:
                continue
            at = (len(m.wanted) + 1) * (m.svc if now - m.asked <= STALE_AFTER else 0.0)
            if best is None or at < best_at or (at == best_at and len(m.wanted) < len(best.wanted)):
                best, best_at = m, at
        return best

    def _want(self, m, k):
        now = time.monotonic()
        if not m.wanted:
            m.busy = now
        m.asked = now
        m.wanted.append(k)
        self.tokens += 1
        m.conn.want(k)

    def _assign(self):
        while self.tokens < self.cap:
            k = self._next_wanted()
            m = self._pick() if k is not None else None
            if m is None:
                return
            self._want(m, k)
            if self.lost and self.lost[0] == k:
                self.lost.pop(0)
            else:
                self.next_num += 1

    def _arrival(self, m, gen, a, t):
        k = a.seq
        current = m.up and gen == m.gen
        if current:
            m.conn.ack(k, self.last_wait)  # at once: the batch is ours now
        at = self.num.at(k)
        if at != (a.epoch, a.index):
            if current:
                self._down(m, Error(f"it sent ({a.epoch}, {a.index}) as batch {k}, which is {at}"))
            return
        if current:
            if k not in m.wanted:
                self._down(m, Error(f"it sent batch {k}, which it was not asked for"))
                return
            m.wanted.remove(k)
            m.svc = t - m.busy if not m.svc else (3 * m.svc + t - m.busy) / 4
            m.busy = t
        else:
            self.tokens += 1  # a dropped stream's late batch: its want gave its token back
        if k < self.deliver or k in self.got:
            self.tokens -= 1  # a second copy: the first won
            return
        if k in self.lost:
            self.lost.remove(k)
        m.made += 1
        self.got[k] = (a, m.addr.text)
        while self.deliver in self.got:
            a, daemon = self.got.pop(self.deliver)
            self.hedged.discard(self.deliver)
            self.ready.put(("batch", self.deliver, a, daemon))
            self.deliver += 1
            self.waiting = time.monotonic()

    def _failure(self, m, gen, err):
        if not (m.up and gen == m.gen):
            return  # a stream already dropped
        if code(err) in FATAL and self.failed is None:
            # The batch it was making fails the stream, as on one daemon:
            # after every batch before it.
            self.failed = Error(f"loaderd: stream (pool daemon {m.addr.text}): {why(err)}", code(err), why(err))
            self.failed_at = m.wanted[0] if m.wanted else self.deliver
        self._down(m, err)

    def _backoff(self, m, err):
        m.last_err = err
        m.backoff = min(max(BACKOFF[0], 2 * m.backoff), BACKOFF[1])
        m.retry_at = time.monotonic() + m.backoff

    def _up(self, m, conn):
        m.gen += 1
        m.conn, m.backoff, m.last_err, m.svc = conn, 0.0, None, 0.0  # measured afresh
        m.connects += 1
        self.all_down_since = None
        threading.Thread(target=m.receive, args=(m.gen, conn.call, self.events), daemon=True,
                         name="loaderd-pool-recv").start()
        log.info("loaderd pool: daemon %s up", m.addr.text)

    def _down(self, m, err):
        """Drop m's stream; what it owed is asked of the others."""
        if not m.up:
            return
        m.conn.close()
        m.conn = None
        others = [o for o in self.members if o is not m and o.up]
        moved = 0
        for k in m.wanted:
            self.tokens -= 1
            if k >= self.deliver and k not in self.got and k not in self.lost \
                    and not any(k in o.wanted for o in others):
                self.lost.append(k)
                moved += 1
        self.lost.sort()
        m.wanted = []
        self._backoff(m, err)
        log.warning("loaderd pool: daemon %s down, %d batches asked of the others: %s", m.addr.text, moved, why(err))

    def _opened(self, m, r):
        m.dialling = False
        if isinstance(r, BaseException):
            self._backoff(m, r)
            return
        reason = same_stream(self.header, r.header)
        if reason or m.removed:
            r.close()
            if reason:
                m.last_err, m.retry_at = Error(reason), time.monotonic() + 10
                log.warning("loaderd pool: daemon %s refused: %s", m.addr.text, reason)
            return
        self._up(m, r)

    def _housekeep(self):
        now = time.monotonic()
        up, fastest = 0, 0.0
        for m in self.members:
            if m.up and m.wanted and now - m.busy > max(self.failover, 8 * m.svc):
                self._down(m, Error(f"silent for {now - m.busy:.1f} s while owing {len(m.wanted)} batches"))
            if m.up and m.removed and not m.wanted:
                self._down(m, Error("gone from the pool's name"))
            if m.up:
                up += 1
                fastest = m.svc if m.svc and (not fastest or m.svc < fastest) else fastest
        # The caller waits for the head number: if its daemon is late, the
        # others make it too, and what else that daemon owes behind it.
        head = self.deliver
        if up > 1 and head not in self.got and head not in self.hedged \
                and now - self.waiting > max(HEDGE_AFTER, 4 * fastest):
            for m in self.members:
                if m.up and head in m.wanted:
                    self._hedge(m)
                    break
        for m in self.members:
            if not m.up and not m.removed and not m.dialling and now >= m.retry_at:
                self.dial(m, CONNECT_TIMEOUT, False)
        if up == 0 and self.all_down_since is None:
            self.all_down_since = now
            log.warning("loaderd pool: every daemon of %s is down (%s): waiting for one to come back: %s",
                        self.address, ", ".join(m.addr.text for m in self.members),
                        "; ".join(f"{m.addr.text}: {why(m.last_err)}" for m in self.members if m.last_err))
            self._resolve_again()
        if now - self.last_resolve > RESOLVE_EVERY:
            self._resolve_again()

    def _hedge(self, m):
        for k in list(m.wanted):
            if k in self.hedged or k in self.got:
                continue
            m2 = self._pick(exclude=m)
            if m2 is None or self.tokens >= self.cap:
                return
            self._want(m2, k)
            self.hedged.add(k)

    def _resolve_again(self):
        self.last_resolve = time.monotonic()
        if self.pool.host is None:
            return

        def run():
            try:
                addrs = _address.resolve(self.pool)
            except OSError:
                return  # keep the daemons known; the next look-up tries again
            if addrs:
                self.events.put(("resolved", addrs))

        threading.Thread(target=run, name="loaderd-pool-resolve", daemon=True).start()

    def _resolved(self, addrs):
        targets = {a.target for a in addrs}
        for m in self.members:
            m.removed = m.addr.target not in targets
        known = {m.addr.target for m in self.members}
        self.members += [Member(a) for a in addrs if a.target not in known]
