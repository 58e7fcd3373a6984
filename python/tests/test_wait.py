"""Acks carry how long the caller waited for each batch (Ack.wait_ns), to a
fake daemon that records them, and to the real one's histogram."""

import re
import threading
import time
import urllib.request
from concurrent import futures

import grpc

import loaderd
from loaderd import _stream
from loaderd.v1 import loader_pb2 as pb
from loaderd.v1 import loader_pb2_grpc as pb_grpc

SLOW_SEQ, DELAY = 2, 0.2


class _Fake(pb_grpc.LoaderServicer):
    """Sends a header and 4 tiny batches, batch SLOW_SEQ DELAY late, and
    records every ack."""

    def __init__(self):
        self.acks = []
        self.all_acked = threading.Event()

    def Stream(self, requests, context):
        assert next(requests).WhichOneof("msg") == "open"

        def read():
            try:
                for r in requests:
                    self.acks.append(r.ack)
                    if sum(len(a.seqs) for a in self.acks) >= 4:
                        self.all_acked.set()
            except grpc.RpcError:
                pass  # the client cancelled: the test is over

        threading.Thread(target=read, daemon=True).start()
        yield pb.StreamReply(header=pb.StreamHeader(
            batch_size=2, dtype=pb.DTYPE_U8, layout=pb.LAYOUT_CHW, sample_shape=[3, 2, 2], sample_bytes=12,
            max_in_flight=4, batches_per_epoch=100, transport=pb.TRANSPORT_INLINE))
        for seq in range(4):
            if seq == SLOW_SEQ:
                time.sleep(DELAY)
            yield pb.StreamReply(batch=pb.Batch(
                seq=seq, epoch=0, batch_index=seq, indices=[0, 1], labels=[0, 1], dtype=pb.DTYPE_U8,
                layout=pb.LAYOUT_CHW, shape=[2, 3, 2, 2], data=bytes(24)))
        self.all_acked.wait(10)


def test_acks_carry_the_callers_wait():
    fake = _Fake()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_LoaderServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        s = _stream.Session(pb_grpc.LoaderStub(channel), pb.Open(dataset="fake", batch_size=2), f"127.0.0.1:{port}")
        for _ in range(4):
            s.next().release()
        assert fake.all_acked.wait(10), f"acks received: {fake.acks}"
        s.close()
    finally:
        channel.close()
        server.stop(0)
    waits = {}
    for a in fake.acks:
        assert len(a.wait_ns) == len(a.seqs), f"ack {a}: wait_ns not parallel to seqs"
        waits.update(zip(a.seqs, a.wait_ns))
    assert sorted(waits) == [0, 1, 2, 3]
    # The late batch kept the caller waiting about DELAY; the others were
    # already there, or nearly.
    assert waits[SLOW_SEQ] >= 0.75 * DELAY * 1e9, waits
    assert all(w < 0.5 * DELAY * 1e9 for seq, w in waits.items() if seq != SLOW_SEQ), waits


def _client_waits(daemon, dataset):
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r'^loaderd_client_wait_seconds_count\{dataset="%s"\} (\S+)$' % dataset, text, re.M)
    return float(m[1]) if m else 0.0


def test_daemon_sees_the_waits(open_dataset, daemon):
    before = _client_waits(daemon, "odd")
    ds = open_dataset("odd", 64, epochs=1)
    delivered = sum(1 for _ in ds.batches(1))
    ds.close()
    daemon.wait_metrics(loaderd_streams=0)
    got = _client_waits(daemon, "odd") - before
    # Every batch the iterator released was acked with its wait; the last
    # acks may not leave before the stream's cancel (the client waits for
    # them only briefly), more of them on a loaded machine.
    assert 0 < got <= delivered and got >= delivered // 2, (got, delivered)
