//go:build ignore

// gen writes the small fixtures of the image formats' tests. Run it from
// the repository root when they must change:
//
//	go run ./loader/testdata/formats/gen.go
//
// The files it writes are committed; tests never run it.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"log"
	"os"
	"path/filepath"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/internal/convert"
)

const dir = "loader/testdata/formats"

// W×H of the fixture images: small, and odd enough to catch stride bugs.
const W, H = 8, 6

func main() {
	img := filepath.Join(dir, "img")
	write(filepath.Join(img, "rgb.jpg"), enc(jpg, pattern(image.NewRGBA(image.Rect(0, 0, W, H)), false)))
	write(filepath.Join(img, "gray.jpg"), enc(jpg, pattern(image.NewGray(image.Rect(0, 0, W, H)), false)))
	write(filepath.Join(img, "rgb.png"), enc(png.Encode, pattern(image.NewRGBA(image.Rect(0, 0, W, H)), false)))
	write(filepath.Join(img, "alpha.png"), enc(png.Encode, pattern(image.NewNRGBA(image.Rect(0, 0, W, H)), true)))
	write(filepath.Join(img, "gray.png"), enc(png.Encode, pattern(image.NewGray(image.Rect(0, 0, W, H)), false)))
	write(filepath.Join(img, "gray16.png"), enc(png.Encode, pattern(image.NewGray16(image.Rect(0, 0, W, H)), false)))
	write(filepath.Join(img, "alpha16.png"), enc(png.Encode, pattern(image.NewNRGBA64(image.Rect(0, 0, W, H)), true)))
	write(filepath.Join(img, "paletted.png"), enc(png.Encode, pattern(image.NewPaletted(image.Rect(0, 0, W, H), palette.Plan9), false)))
	write(filepath.Join(img, "paletted.gif"), enc(func(w io.Writer, m image.Image) error { return gif.Encode(w, m, nil) },
		pattern(image.NewPaletted(image.Rect(0, 0, W, H), palette.WebSafe), false)))
	write(filepath.Join(img, "rgb.bmp"), enc(bmp.Encode, pattern(image.NewRGBA(image.Rect(0, 0, W, H)), false)))
	write(filepath.Join(img, "alpha.tiff"), enc(func(w io.Writer, m image.Image) error { return tiff.Encode(w, m, nil) },
		pattern(image.NewNRGBA(image.Rect(0, 0, W, H)), true)))

	// A folder dataset of every format, with what the layout ignores.
	fol := filepath.Join(dir, "folder")
	write(filepath.Join(fol, "README"), []byte("not part of the layout: files directly in the root are ignored\n"))
	copyFile(filepath.Join(img, "rgb.png"), filepath.Join(fol, "bird", "0.png"))
	copyFile(filepath.Join(img, "rgb.jpg"), filepath.Join(fol, "bird", "1.jpg"))
	write(filepath.Join(fol, "bird", ".DS_Store"), []byte("hidden: ignored"))
	copyFile(filepath.Join(img, "paletted.gif"), filepath.Join(fol, "cat", "2.gif"))
	copyFile(filepath.Join(img, "rgb.bmp"), filepath.Join(fol, "cat", "sub", "3.bmp"))
	copyFile(filepath.Join(img, "alpha.tiff"), filepath.Join(fol, "cat", "4.TIFF"))

	bad := filepath.Join(dir, "bad")
	good := read(filepath.Join(img, "rgb.jpg"))
	write(filepath.Join(bad, "images", "c", "truncated.jpg"), good[:len(good)/2])
	write(filepath.Join(bad, "images", "c", "corrupt.jpg"), corruptScan(good))
	write(filepath.Join(bad, "images", "c", "notimage.jpg"), []byte("this is text, not a JPEG\n"))
	write(filepath.Join(bad, "images", "c", "bomb.png"), pngHeader(1<<20, 1<<20))
	write(filepath.Join(bad, "images", "c", "bomb.jpg"), jpegHeader(65000, 65000))
	write(filepath.Join(bad, "images", "c", "wrongsize.png"), enc(png.Encode, pattern(image.NewRGBA(image.Rect(0, 0, 4, 4)), false)))
	pngGood := read(filepath.Join(img, "rgb.png"))
	write(filepath.Join(bad, "images", "c", "truncated.png"), pngGood[:len(pngGood)-20])

	write(filepath.Join(bad, "badext", "cls", "0.png"), pngGood)
	write(filepath.Join(bad, "badext", "cls", "notes.txt"), []byte("an unknown extension\n"))
	write(filepath.Join(bad, "emptyclass", "a", "0.png"), pngGood)
	write(filepath.Join(bad, "emptyclass", "b", ".keep"), nil)

	// A member declaring 512 bytes more than it has: the next header is
	// read from the following member's data. One declaring far more than
	// the archive holds. One declaring 512 bytes less, so the next header
	// is read from inside its own data.
	noise := enc(png.Encode, noisy(24, 24))
	write(filepath.Join(bad, "lying-big.tar"), tarOf(map[string]int64{"train/a/0.png": 512},
		"train/a/0.png", pngGood, "train/b/1.png", noise))
	write(filepath.Join(bad, "lying-huge.tar"), tarOf(map[string]int64{"train/b/1.png": 1 << 20},
		"train/a/0.png", pngGood, "train/b/1.png", pngGood))
	write(filepath.Join(bad, "lying-small.tar"), tarOf(map[string]int64{"train/a/0.png": -512},
		"train/a/0.png", noise, "train/b/1.png", pngGood))
	// One declaring 512 bytes more, landing on zeros inside the next
	// member's data: the reader takes them for the end of the archive.
	write(filepath.Join(bad, "lying-zeros.tar"), tarOf(map[string]int64{"train/a/0.png": 512},
		"train/a/0.png", pngGood, "train/a/1.png", make([]byte, 2048), "train/b/2.png", pngGood))
	write(filepath.Join(bad, "ext.tar"), tarOf(nil, "train/a/0.png", pngGood, "train/a/notes.txt", []byte("hi")))
	write(filepath.Join(bad, "wds-nolabel.tar"), tarOf(nil, "s0.png", pngGood, "s0.cls", []byte("1"), "s1.png", pngGood))
	write(filepath.Join(bad, "wds-badlabel.tar"), tarOf(nil, "s0.png", pngGood, "s0.cls", []byte("cat")))

	var ab bytes.Buffer
	aw, err := convert.NewArrowWriter(&ab, augment.Spec{H: H, W: W, C: 3, DType: sample.U8, Layout: sample.HWC}, []string{"a", "b"}, 0)
	check(err)
	check(aw.Write(0, make([]byte, W*H*3)))
	check(aw.Write(7, make([]byte, W*H*3))) // label 7 with 2 classes
	check(aw.Close())
	write(filepath.Join(bad, "label.arrow"), ab.Bytes())
	write(filepath.Join(bad, "truncated.arrow"), ab.Bytes()[:ab.Len()-40])

	var pb bytes.Buffer
	pw, err := convert.NewParquetWriter(&pb, "picture", "y", []string{"a", "b"}, 0)
	check(err)
	check(pw.Write(pngGood, "0.png", 0))
	check(pw.Close())
	write(filepath.Join(bad, "columns.parquet"), pb.Bytes())
	write(filepath.Join(bad, "truncated.parquet"), pb.Bytes()[:pb.Len()/2])
}

func jpg(w io.Writer, m image.Image) error { return jpeg.Encode(w, m, &jpeg.Options{Quality: 90}) }

// pattern fills m with a gradient that uses every channel, and alpha.
func pattern[M interface {
	image.Image
	Set(x, y int, c color.Color)
}](m M, alpha bool) M {
	for y := 0; y < H*4; y++ {
		for x := 0; x < W*4; x++ {
			a := uint8(255)
			if alpha {
				a = uint8(255 - x*13)
			}
			m.Set(x, y, color.NRGBA{uint8(x * 31), uint8(y * 41), uint8((x + y) * 17), a})
		}
	}
	return m
}

func enc(f func(io.Writer, image.Image) error, m image.Image) []byte {
	var b bytes.Buffer
	check(f(&b, m))
	return b.Bytes()
}

// corruptScan keeps the headers of a JPEG and puts a reserved marker in
// its scan data.
func corruptScan(j []byte) []byte {
	out := bytes.Clone(j)
	sos := bytes.Index(out, []byte{0xff, 0xda})
	n := int(out[sos+2])<<8 | int(out[sos+3])
	data := sos + 2 + n
	out[data+1], out[data+2] = 0xff, 0x02
	return out
}

// pngHeader is a PNG signature and a valid IHDR declaring w×h, and nothing
// else: a decompression bomb's header.
func pngHeader(w, h uint32) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk := append([]byte("IHDR"), ihdr...)
	out := []byte("\x89PNG\r\n\x1a\n")
	out = binary.BigEndian.AppendUint32(out, 13)
	out = append(out, chunk...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(chunk))
}

// jpegHeader is SOI, a baseline SOF0 declaring w×h and a scan header,
// with no tables and no scan data: a decompression bomb's header.
func jpegHeader(w, h int) []byte {
	return []byte{0xff, 0xd8, 0xff, 0xc0, 0, 17, 8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 3,
		1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1,
		0xff, 0xda, 0, 12, 3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0, 0xff, 0xd9}
}

// tarOf writes an honest archive of name, data pairs, then makes the
// headers named in lie declare delta more bytes (with a valid checksum).
func tarOf(lie map[string]int64, kv ...any) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var offs []int
	for i := 0; i < len(kv); i += 2 {
		name, data := kv[i].(string), kv[i+1].([]byte)
		offs = append(offs, b.Len())
		check(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Format: tar.FormatUSTAR}))
		_, err := tw.Write(data)
		check(err)
		check(tw.Flush())
	}
	check(tw.Close())
	raw := b.Bytes()
	for k, off := range offs {
		delta, ok := lie[kv[2*k].(string)]
		if !ok {
			continue
		}
		h := raw[off : off+512]
		size := int64(len(kv[2*k+1].([]byte))) + delta
		copy(h[124:136], fmt.Sprintf("%011o\x00", size))
		copy(h[148:156], "        ")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	}
	return raw
}

// noisy is an image that compresses badly: its PNG is over 1 KiB.
func noisy(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	x := uint32(1)
	for i := range m.Pix {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		m.Pix[i] = byte(x)
	}
	return m
}

func copyFile(from, to string) { write(to, read(from)) }

func read(p string) []byte {
	b, err := os.ReadFile(p)
	check(err)
	return b
}

func write(p string, b []byte) {
	check(os.MkdirAll(filepath.Dir(p), 0o755))
	check(os.WriteFile(p, b, 0o644))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
