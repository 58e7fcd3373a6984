#!/usr/bin/python3
"""What libjpeg-turbo's decode costs, measured through its TurboJPEG API
(ctypes, the library loaderd loads): the fixed cost per call (an 8×8
JPEG, where there is almost nothing to decode), and per image of the
large-image set at full size, to YUV planes (no upsampling or colour
conversion), and at the scaled sizes M/8.

    /usr/bin/python3 scripts/libjpeg-costs.py [--tar PATH] [--images N]

These are the figures behind loader/imagedec/jpegx (the setup it avoids) and
behind the scaled decodes loaderd does and does not use (docs/ARCHITECTURE.md).
"""

import argparse
import ctypes
import io
import os
import tarfile
import time

from PIL import Image

TJPF_RGB, TJFLAG_ACCURATEDCT = 0, 4096


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tar", default=os.path.expanduser("~/.cache/loaderd/large-images-v1.tar"))
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    tj = ctypes.CDLL("libturbojpeg.so.0")
    vp, cp, ul, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_int
    tj.tjInitDecompress.restype = vp
    tj.tjDecompressHeader3.argtypes = [vp, cp, ul, vp, vp, vp, vp]
    tj.tjDecompress2.argtypes = [vp, cp, ul, vp, ci, ci, ci, ci, ci]
    tj.tjDecompressToYUVPlanes.argtypes = [vp, cp, ul, vp, ci, vp, ci, ci]
    h = tj.tjInitDecompress()
    w_, h_, s_, c_ = ci(), ci(), ci(), ci()

    def size(d):
        tj.tjDecompressHeader3(h, d, len(d), ctypes.byref(w_), ctypes.byref(h_), ctypes.byref(s_), ctypes.byref(c_))
        return w_.value, h_.value

    with tarfile.open(a.tar) as t:
        ms = [m for m in t.getmembers() if m.isfile() and m.name.lower().endswith((".jpg", ".jpeg"))]
        step = max(1, len(ms) // a.images)
        datas = [t.extractfile(m).read() for m in ms[::step][:a.images]]
    buf = ctypes.create_string_buffer(max(size(d)[0] * size(d)[1] for d in datas) * 3)
    planes = [ctypes.create_string_buffer(len(buf)) for _ in range(3)]
    pp = (vp * 3)(*[ctypes.addressof(p) for p in planes])

    def timed(f, items):
        for d in items:  # warm: page cache, library, CPU clock
            f(d)
        best = None
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for d in items:
                if f(d) != 0:
                    raise SystemExit("libturbojpeg failed")
            dt = (time.perf_counter() - t0) / len(items)
            best = dt if best is None else min(best, dt)
        return best * 1e3

    def full(m):
        def f(d):
            w, hh = size(d)
            return tj.tjDecompress2(h, d, len(d), buf, (w * m + 7) // 8, 0, (hh * m + 7) // 8, TJPF_RGB, TJFLAG_ACCURATEDCT)
        return f

    tiny = io.BytesIO()
    Image.new("RGB", (8, 8), (90, 140, 200)).save(tiny, "JPEG", quality=90)
    tiny = [tiny.getvalue()] * 2000
    print(f"fixed cost per call (8×8 JPEG): {timed(full(8), tiny) * 1e3:.1f} µs")
    print(f"{len(datas)} images of {a.tar}, ms per image (best of {a.repeats}):")
    print(f"  full size RGB            {timed(full(8), datas):.3f}")
    yuv = lambda d: tj.tjDecompressToYUVPlanes(h, d, len(d), pp, 0, None, 0, TJFLAG_ACCURATEDCT)
    print(f"  YUV planes (no colour)   {timed(yuv, datas):.3f}")
    for m in (7, 6, 5, 4, 2):
        print(f"  scaled {m}/8 RGB           {timed(full(m), datas):.3f}")


if __name__ == "__main__":
    main()
