#!/usr/bin/env bash
# make-format-fixtures.sh writes the JPEG and WebP fixtures of
# loader/testdata/formats/img that gen.go does not write. All are one
# picture of ours, 150×103 (odd sizes: partial MCUs and macroblocks), drawn
# below from formulas: colour gradients and rings, a disc, a square, fine
# diagonal stripes and a checker; an alpha channel (a radial fade with a
# transparent hole) for the WebPs that carry one.
#
#   shapes.q50.{410,411,420,422,440,444}.jpeg  cjpeg -quality 50 -sample
#       4x2, 4x1, 2x2, 2x1, 1x2, 1x1 (luma factors; chroma 1x1): baseline,
#       libjpeg's standard Huffman tables
#   shapes.progressive.jpeg  cjpeg -quality 100 (all-1 tables) -sample 1x1
#       -progressive: libjpeg's 10-scan script, optimised Huffman tables
#   shapes.cmyk.jpeg  PIL, mode CMYK (K = 255 − max(R,G,B)): 4:4:4, an
#       Adobe marker (transform 0) and inverted samples, as Photoshop writes
#   shapes.lossy.webp  PIL/libwebp lossy, no alpha: a simple VP8 file
#   shapes.lossy-with-alpha.webp  lossy with alpha: VP8X, ALPH, VP8
#   shapes.lossless-with-alpha.webp  the picture's left half (75×103),
#       lossless, with alpha and an sRGB ICC profile made by LittleCMS:
#       VP8X, ICCP, VP8L
#
# and, from the last, loader/imagedec's FuzzImageDecodeConfig regression
# seed: the file with its chunk name VP8X mangled to VV8X (a RIFF/WEBP
# file that must not be sniffed as WebP). A regenerated seed is named by
# its hash; delete the one it replaces.
#
# Needs libjpeg-turbo-progs (cjpeg; installed here through apt_ensure) and
# Debian's python3-pil with libwebp and lcms2, python3-numpy, under
# /usr/bin/python3. The outputs are committed; tests never run this.
# Usage, from anywhere: scripts/make-format-fixtures.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib/apt.sh"
apt_ensure make-format-fixtures libjpeg-turbo-progs python3-pil python3-numpy

/usr/bin/python3 - "$root/loader/testdata/formats/img" \
	"$root/loader/imagedec/testdata/fuzz/FuzzImageDecodeConfig" <<'EOF'
import hashlib, os, subprocess, sys, tempfile
import numpy as np
from PIL import Image, ImageCms

img, seeds = sys.argv[1:3]
W, H = 150, 103
y, x = np.mgrid[0:H, 0:W]
xf, yf = x.astype(np.float64), y.astype(np.float64)
rgb = np.stack([255 * xf / (W - 1), 255 * yf / (H - 1),
                127.5 + 127.5 * np.cos(np.hypot(xf - 110, yf - 28) / 6)], -1)
rgb[np.hypot(xf - 38, yf - 62) < 25] = (230, 30, 40)            # disc
rgb[(x >= 86) & (x < 126) & (y >= 52) & (y < 93)] = (20, 40, 210)  # square
band = (x >= 4) & (x < 72) & (y >= 4) & (y < 26)                 # 2-pixel stripes
rgb[band & ((x + y) % 4 < 2)] = (250, 225, 20)
rgb[band & ((x + y) % 4 >= 2)] = (20, 150, 70)
chk = (x >= 128) & (y >= 40) & (((x // 3) + (y // 3)) % 2 == 0)  # off-grid checker
rgb[chk] = 255 - rgb[chk]
rgb = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
alpha = np.clip(np.rint(255 * (1.6 - np.hypot(xf - 75, yf - 51) / 55)), 0, 255)
alpha[(x >= 60) & (x < 84) & (y >= 40) & (y < 58)] = 0
rgba = np.dstack([rgb, alpha.astype(np.uint8)])


def out(name):
    return os.path.join(img, name)


with tempfile.TemporaryDirectory() as tmp:
    ppm = os.path.join(tmp, "shapes.ppm")
    Image.fromarray(rgb, "RGB").save(ppm)
    for name, samp in [("410", "4x2"), ("411", "4x1"), ("420", "2x2"),
                       ("422", "2x1"), ("440", "1x2"), ("444", "1x1")]:
        subprocess.run(["cjpeg", "-quality", "50", "-sample", samp + ",1x1,1x1",
                        "-outfile", out(f"shapes.q50.{name}.jpeg"), ppm], check=True)
    subprocess.run(["cjpeg", "-quality", "100", "-sample", "1x1,1x1,1x1", "-progressive",
                    "-outfile", out("shapes.progressive.jpeg"), ppm], check=True)

f = rgb.astype(np.float64)
k = 255 - f.max(-1)
cmy = np.where(k[..., None] < 255, 255 * (255 - f - k[..., None]) / np.maximum(255 - k, 1)[..., None], 0)
cmyk = np.clip(np.rint(np.dstack([cmy, k])), 0, 255).astype(np.uint8)
Image.fromarray(cmyk, "CMYK").save(out("shapes.cmyk.jpeg"), quality=90)

Image.fromarray(rgb, "RGB").save(out("shapes.lossy.webp"), quality=75, method=6)
Image.fromarray(rgba, "RGBA").save(out("shapes.lossy-with-alpha.webp"), quality=75, method=6)
icc = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
icc[24:36] = bytes([7, 234, 0, 1, 0, 1] + [0] * 6)  # its creation time: 2026-01-01, not now
Image.fromarray(rgba[:, :75], "RGBA").save(out("shapes.lossless-with-alpha.webp"),
                                          lossless=True, quality=100, method=6, icc_profile=bytes(icc))

data = bytearray(open(out("shapes.lossless-with-alpha.webp"), "rb").read())
assert data[12:16] == b"VP8X", data[:16]
data[13] = ord("V")
lit = "".join(chr(c) if 32 <= c < 127 and c not in b'"\\' else "\\x%02x" % c for c in data)
seed = f'go test fuzz v1\n[]byte("{lit}")\n'.encode()
with open(os.path.join(seeds, hashlib.sha256(seed).hexdigest()[:16]), "wb") as fh:
    fh.write(seed)
EOF
ls -l "$root/loader/testdata/formats/img"/shapes.*
