package jpegx

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"
)

// progFixture is a 150×103 4:4:4 progressive JPEG (quality 100) that
// scripts/make-format-fixtures.sh encodes with cjpeg -progressive:
// libjpeg's standard scans; testdata holds small ones from PIL: 4:4:4 and
// greyscale at 45×37, 4:2:2 and 4:2:0 at 40×37, where the MCU padding
// exceeds the blocks a single-component scan covers. All decode exactly
// as libjpeg-turbo does (loader/imagedec's TestExactFixtures).
const progFixture = "../../testdata/formats/img/shapes.progressive.jpeg"

var progFiles = []string{progFixture, "testdata/prog444.jpg", "testdata/prog422.jpg", "testdata/prog420.jpg", "testdata/proggray.jpg"}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeFresh decodes data with a new Decoder.
func decodeFresh(data []byte) ([]byte, error) {
	w, h, ok := frameSize(data)
	if !ok {
		return nil, ErrUnsupported
	}
	dst := make([]byte, w*h*3)
	var d Decoder
	return dst, d.DecodeRGB(data, dst)
}

// Scan scripts over nc components. Those that code every coefficient
// fully (up to Al = 0) must give the original file's pixels.
func stdScript(nc int) []scan {
	if nc == 1 {
		return []scan{{[]int{0}, 0, 0, 0, 1}, {[]int{0}, 1, 5, 0, 2}, {[]int{0}, 6, 63, 0, 2},
			{[]int{0}, 1, 63, 2, 1}, {[]int{0}, 0, 0, 1, 0}, {[]int{0}, 1, 63, 1, 0}}
	}
	all := []int{0, 1, 2}
	return []scan{{all, 0, 0, 0, 1}, {[]int{0}, 1, 5, 0, 2}, {[]int{2}, 1, 63, 0, 1}, {[]int{1}, 1, 63, 0, 1},
		{[]int{0}, 6, 63, 0, 2}, {[]int{0}, 1, 63, 2, 1}, {all, 0, 0, 1, 0}, {[]int{2}, 1, 63, 1, 0},
		{[]int{1}, 1, 63, 1, 0}, {[]int{0}, 1, 63, 1, 0}}
}

func comps(nc int) []int { return []int{0, 1, 2}[:nc] }

// dcAll is one DC scan of all components at Al = 0.
func dcAll(nc int) []scan { return []scan{{comps(nc), 0, 0, 0, 0}} }

// perComponent appends f's scans for each component.
func perComponent(nc int, s []scan, f func(ci int) []scan) []scan {
	for ci := range nc {
		s = append(s, f(ci)...)
	}
	return s
}

var progScripts = []struct {
	name   string
	script func(nc int) []scan
	same   bool // decodes to the original's pixels; else must decline
	noRef  bool // decodes, but to other pixels (not every coefficient coded)
	minNC  int
}{
	{"libjpeg standard", stdScript, true, false, 1},
	{"DC per component, spectral selection only", func(nc int) []scan {
		s := perComponent(nc, nil, func(ci int) []scan { return []scan{{[]int{ci}, 0, 0, 0, 0}} })
		return perComponent(nc, s, func(ci int) []scan {
			return []scan{{[]int{ci}, 1, 2, 0, 0}, {[]int{ci}, 3, 63, 0, 0}}
		})
	}, true, false, 1},
	{"DC of component subsets, four refinements", func(nc int) []scan {
		s := []scan{{[]int{0}, 0, 0, 0, 3}, {[]int{0}, 0, 0, 3, 2}, {[]int{0}, 0, 0, 2, 1}, {[]int{0}, 0, 0, 1, 0}}
		if nc == 3 {
			all := comps(3)
			s = []scan{{[]int{0, 1}, 0, 0, 0, 3}, {[]int{2}, 0, 0, 0, 3}, {all, 0, 0, 3, 2},
				{[]int{1, 2}, 0, 0, 2, 1}, {[]int{0}, 0, 0, 2, 1}, {all, 0, 0, 1, 0}}
		}
		s = perComponent(nc, s, func(ci int) []scan { return []scan{{[]int{ci}, 1, 63, 0, 4}} })
		return perComponent(nc, s, func(ci int) []scan {
			c := []int{ci}
			return []scan{{c, 1, 20, 4, 3}, {c, 21, 63, 4, 3}, {c, 1, 63, 3, 2}, {c, 1, 63, 2, 1}, {c, 1, 63, 1, 0}}
		})
	}, true, false, 1},
	{"a scan per coefficient", func(nc int) []scan {
		s := dcAll(nc)
		for k := 1; k < 64; k++ {
			s = append(s, scan{[]int{0}, k, k, 0, 1})
		}
		for k := 1; k < 64; k++ {
			s = append(s, scan{[]int{0}, k, k, 1, 0})
		}
		return perComponent(nc, s[:len(s):len(s)], func(ci int) []scan {
			if ci == 0 {
				return nil
			}
			return []scan{{[]int{ci}, 1, 63, 0, 0}}
		})
	}, true, false, 1},
	{"overlapping bands at Al 0", func(nc int) []scan {
		return perComponent(nc, dcAll(nc), func(ci int) []scan {
			return []scan{{[]int{ci}, 1, 10, 0, 0}, {[]int{ci}, 5, 63, 0, 0}}
		})
	}, true, false, 1},
	{"Al 13 and 9", func(nc int) []scan {
		s := []scan{{comps(nc), 0, 0, 0, 13}}
		for al := 12; al >= 0; al-- {
			s = append(s, scan{comps(nc), 0, 0, al + 1, al})
		}
		return perComponent(nc, s, func(ci int) []scan {
			s := []scan{{[]int{ci}, 1, 63, 0, 9}}
			for al := 8; al >= 0; al-- {
				s = append(s, scan{[]int{ci}, 1, 63, al + 1, al})
			}
			return s
		})
	}, true, false, 1},
	{"coefficients 10..63 left at Al 1 (no smoothing in libjpeg)", func(nc int) []scan {
		return perComponent(nc, dcAll(nc), func(ci int) []scan {
			return []scan{{[]int{ci}, 1, 9, 0, 0}, {[]int{ci}, 10, 63, 0, 1}}
		})
	}, false, true, 1},
	{"coefficients 10..63 never coded", func(nc int) []scan {
		return perComponent(nc, dcAll(nc), func(ci int) []scan { return []scan{{[]int{ci}, 1, 9, 0, 0}} })
	}, false, true, 1},
	{"final refinements missing", func(nc int) []scan {
		s := stdScript(nc)
		return s[:len(s)-nc]
	}, false, false, 1},
	{"coefficient 9 left at Al 1 (libjpeg smooths)", func(nc int) []scan {
		return perComponent(nc, dcAll(nc), func(ci int) []scan {
			return []scan{{[]int{ci}, 1, 8, 0, 0}, {[]int{ci}, 9, 9, 0, 1}, {[]int{ci}, 10, 63, 0, 0}}
		})
	}, false, false, 1},
	{"DC left at Al 1", func(nc int) []scan {
		return perComponent(nc, []scan{{comps(nc), 0, 0, 0, 1}}, func(ci int) []scan { return []scan{{[]int{ci}, 1, 63, 0, 0}} })
	}, false, false, 1},
	{"a component without scans", func(nc int) []scan {
		return []scan{{[]int{0}, 0, 0, 0, 0}, {[]int{0}, 1, 63, 0, 0}}
	}, false, false, 3},
	{"AC before DC", func(nc int) []scan {
		s := append([]scan{{[]int{0}, 1, 63, 0, 0}}, dcAll(nc)...)
		return perComponent(nc, s, func(ci int) []scan { return []scan{{[]int{ci}, 1, 63, 0, 0}}[:min(ci, 1)] })
	}, false, false, 1},
	{"refinement whose Ah is not the last Al", func(nc int) []scan {
		s := stdScript(nc)
		for i := range s {
			if s[i].ss == 1 && s[i].ah == 2 {
				s[i].ah, s[i].al = 3, 2
			}
		}
		return s
	}, false, false, 1},
	{"refinement by two bits", func(nc int) []scan {
		return perComponent(nc, dcAll(nc), func(ci int) []scan {
			return []scan{{[]int{ci}, 1, 63, 0, 2}, {[]int{ci}, 1, 63, 2, 0}}
		})
	}, false, false, 1},
	{"DC refinement first", func(nc int) []scan {
		return append([]scan{{comps(nc), 0, 0, 1, 0}}, stdScript(nc)...)
	}, false, false, 1},
	{"AC scan of two components", func(nc int) []scan {
		return append(dcAll(nc), scan{[]int{0, 1}, 1, 63, 0, 0}, scan{[]int{2}, 1, 63, 0, 0})
	}, false, false, 3},
	{"DC and AC in one band", func(nc int) []scan {
		return perComponent(nc, dcAll(nc), func(ci int) []scan { return []scan{{[]int{ci}, 0, 63, 0, 0}} })
	}, false, false, 1},
}

// TestProgressiveScripts re-encodes the coefficients of progressive files
// with many scan scripts: the scripts that code every coefficient give
// the original's pixels; those libjpeg would warn about, reject or smooth
// are declined.
func TestProgressiveScripts(t *testing.T) {
	for _, name := range progFiles {
		file := readFile(t, name)
		want, err := decodeFresh(file)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		snap := snapshot(t, file)
		nc := len(snap.comp)
		for _, tc := range progScripts {
			if nc < tc.minNC {
				continue
			}
			got, err := decodeFresh(snap.encode(tc.script(nc), nil, nil))
			switch {
			case tc.same && err != nil:
				t.Errorf("%s, %s: %v", name, tc.name, err)
			case tc.same && !bytes.Equal(got, want):
				t.Errorf("%s, %s: pixels differ from the original's", name, tc.name)
			case tc.noRef && err != nil:
				t.Errorf("%s, %s: %v", name, tc.name, err)
			case !tc.same && !tc.noRef && !errors.Is(err, ErrUnsupported):
				t.Errorf("%s, %s: decoded (%v), want ErrUnsupported", name, tc.name, err)
			}
		}
	}
}

// TestProgressiveBetweenScans: tables and other segments between scans.
// libjpeg keeps each component's quantisation table as it was at the
// component's first scan (jdinput.c latch_quant_tables), so a DQT after
// the scans started changes nothing; a restart interval is declined.
func TestProgressiveBetweenScans(t *testing.T) {
	file := readFile(t, progFixture)
	want, _ := decodeFresh(file)
	snap := snapshot(t, file)
	// Tables 0 and 1 all 3s (the file's are all 1s: quality 100).
	threes := append([]byte{0xff, 0xdb, 0, 2 + 2*65}, 0)
	threes = append(threes, bytes.Repeat([]byte{3}, 64)...)
	threes = append(threes, 1)
	threes = append(threes, bytes.Repeat([]byte{3}, 64)...)
	com := []byte{0xff, 0xfe, 0, 5, 'a', 'b', 'c'}
	dri := []byte{0xff, 0xdd, 0, 4, 0, 0}
	const same, differs, declined = 0, 1, 2
	for _, tc := range []struct {
		name  string
		extra map[int][]byte
		want  int
	}{
		{"DQT after the first scan", map[int][]byte{1: threes, 5: threes}, same},
		{"COM and DHT between scans", map[int][]byte{2: com, 3: universalDHT(), 9: com}, same},
		{"DRI of 0 between scans", map[int][]byte{4: dri}, same},
		{"DQT before the first scan", map[int][]byte{0: threes}, differs},
		{"restart interval", map[int][]byte{0: {0xff, 0xdd, 0, 4, 0, 8}}, declined},
		{"stray byte after a scan", map[int][]byte{3: {0x12}}, declined},
		{"SOF between scans", map[int][]byte{3: snap.header[bytes.Index(snap.header, []byte{0xff, 0xc2}):][:19]}, declined},
	} {
		got, err := decodeFresh(snap.encode(stdScript(3), tc.extra, nil))
		res := declined
		if err == nil {
			res = map[bool]int{true: same, false: differs}[bytes.Equal(got, want)]
		}
		if res != tc.want {
			t.Errorf("%s: %d (%v), want %d (0 same, 1 differs, 2 declined)", tc.name, res, err, tc.want)
		}
	}
}

// TestProgressiveScanLimit: TurboJPEG refuses more than 500 scans
// (TJFLAG_LIMITSCANS); so does jpegx, and takes 382.
func TestProgressiveScanLimit(t *testing.T) {
	file := readFile(t, progFixture)
	want, _ := decodeFresh(file)
	snap := snapshot(t, file)
	script := dcAll(3)
	for ci := range 3 {
		for k := 1; k < 64; k++ {
			for al := 2; al >= 0; al-- {
				ah := al + 1
				if al == 2 {
					ah = 0
				}
				script = append(script, scan{[]int{ci}, k, k, ah, al})
			}
		}
	}
	if _, err := decodeFresh(snap.encode(script, nil, nil)); !errors.Is(err, ErrUnsupported) || len(script) != 568 {
		t.Errorf("%d scans: %v, want ErrUnsupported", len(script), err)
	}
	short := append(slices.Clone(script[:1+2*63*3]), scan{[]int{2}, 1, 63, 0, 2}, scan{[]int{2}, 1, 63, 2, 1}, scan{[]int{2}, 1, 63, 1, 0})
	if got, err := decodeFresh(snap.encode(short, nil, nil)); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%d scans: %v, equal %v", len(short), err, bytes.Equal(got, want))
	}
}

// sosOffsets returns where each SOS marker of a JPEG starts.
func sosOffsets(b []byte) []int {
	var out []int
	for i := 2; i+4 <= len(b); {
		m := b[i+1]
		if m == 0xd9 {
			break
		}
		n := int(b[i+2])<<8 | int(b[i+3])
		if m != 0xda {
			i += 2 + n
			continue
		}
		out = append(out, i)
		for i += 2 + n; i+1 < len(b) && (b[i] != 0xff || b[i+1] == 0 || b[i+1] >= 0xd0 && b[i+1] <= 0xd7); i++ {
		}
	}
	return out
}

// TestProgressiveDeclines: a real progressive file, edited the ways
// libjpeg complains about, or that would make it smooth the blocks, is
// declined.
func TestProgressiveDeclines(t *testing.T) {
	file := readFile(t, progFixture)
	sos := sosOffsets(file)
	if len(sos) != 10 {
		t.Fatalf("%d scans, want libjpeg's 10", len(sos))
	}
	eoi := []byte{0xff, 0xd9}
	cat := func(parts ...[]byte) []byte { return slices.Concat(parts...) }
	edit := func(at int, v byte) []byte {
		b := bytes.Clone(file)
		b[at] = v
		return b
	}
	last := sos[9]
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"cut in the last scan", file[:last+200]},
		{"cut in the last scan, EOI after", cat(file[:last+200], eoi)},
		{"cut in the first scan, EOI after", cat(file[:sos[0]+30], eoi)},
		{"no EOI", file[:len(file)-2]},
		{"last scan dropped", cat(file[:last], eoi)},
		{"last three scans dropped", cat(file[:sos[7]], eoi)},
		{"only the DC scan", cat(file[:sos[1]], eoi)},
		{"refinement with the wrong Ah", edit(sos[5]+2+2+1+2+2, 0x32)}, // Y 1..63 Ah 2 Al 1 → Ah 3 Al 2
		{"refinement of two bits", edit(sos[5]+2+2+1+2+2, 0x20)},       // Ah 2 Al 0
		{"AC first scan twice", cat(file[:sos[2]], file[sos[1]:])},     // Y 1..5 again
		{"stray byte after a scan", cat(file[:sos[4]], []byte{0x55}, file[sos[4]:])},
		{"garbage for a refinement scan", cat(file[:last+12], bytes.Repeat([]byte{0xfe}, 40), file[last+52:])},
	} {
		if _, err := decodeFresh(tc.data); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", tc.name, err)
		}
	}
}

// TestProgressiveGivenUpLeavesNoState: a progressive image given up
// halfway leaves coefficients behind; the next image, progressive or not,
// decodes as with a fresh Decoder.
func TestProgressiveGivenUpLeavesNoState(t *testing.T) {
	var d Decoder
	for _, name := range progFiles {
		file := readFile(t, name)
		want, _ := decodeFresh(file)
		sos := sosOffsets(file)
		for _, cut := range []int{sos[len(sos)-1] + 20, sos[2], sos[0] + 20} {
			bad := append(bytes.Clone(file[:cut]), 0xff, 0xd9)
			if d.DecodeRGB(bad, make([]byte, len(want))) == nil {
				t.Fatalf("%s cut at %d: decoded", name, cut)
			}
			got := make([]byte, len(want))
			if err := d.DecodeRGB(file, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s after one cut at %d: %v, equal %v", name, cut, err, bytes.Equal(got, want))
			}
		}
	}
}

// TestProgressiveOutOfBand: a run that takes a first AC scan past its
// band, or a refinement's new coefficient past it, makes libjpeg write a
// coefficient outside the band; a refinement's new coefficient of more
// than one bit makes it warn. jpegx declines all three, in scans that are
// otherwise complete (EOB runs over the other blocks).
func TestProgressiveOutOfBand(t *testing.T) {
	snap := snapshot(t, readFile(t, "testdata/prog420.jpg"))
	y := snap.comp[0]
	var blocks []int // Y's blocks in a scan of it alone
	for by := range y.rbh {
		for bx := range y.rbw {
			blocks = append(blocks, y.coff+(by*y.bw+bx)*64)
		}
	}
	// refine is the data of a refinement of coefficient k (Al 1 to 0): the
	// first block's (code, sign bit and, if it is nonzero, its correction
	// bit), then an EOB run with the others' correction bits.
	refine := func(k, code int, bits uint64, n uint) func(*progEnc) {
		return func(e *progEnc) {
			e.ac(code)
			e.put(bits, n)
			if snap.coef[blocks[0]+k]/2 != 0 {
				e.put(0, 1)
			}
			e.eobrun = len(blocks) - 1
			for _, b := range blocks[1:] {
				if snap.coef[b+k]/2 != 0 {
					e.be = append(e.be, 0)
				}
			}
		}
	}
	chroma := []scan{{[]int{1}, 1, 63, 0, 0}, {[]int{2}, 1, 63, 0, 0}}
	for _, tc := range []struct {
		name   string
		script []scan
		raw    func(*progEnc) // scan 1's data
	}{
		{"first scan of 1..5, run to 8", append([]scan{dcAll(3)[0], {[]int{0}, 1, 5, 0, 0}, {[]int{0}, 6, 63, 0, 0}}, chroma...),
			func(e *progEnc) { e.ac(0x71); e.put(1, 1); e.eobrun = len(blocks) - 1 }},
		{"refinement of 1..1, new coefficient at 2", append([]scan{dcAll(3)[0], {[]int{0}, 1, 1, 1, 0}, {[]int{0}, 1, 1, 0, 1}, {[]int{0}, 2, 63, 0, 0}}, chroma...),
			refine(1, 0x11, 1, 1)},
		{"refinement of 63..63, new coefficient of 2 bits", append([]scan{dcAll(3)[0], {[]int{0}, 63, 63, 1, 0}, {[]int{0}, 63, 63, 0, 1}, {[]int{0}, 1, 62, 0, 0}}, chroma...),
			refine(63, 0x02, 3, 2)},
	} {
		// The refinements' scans come after their first scans.
		script := tc.script
		raw := map[int]func(*progEnc){1: tc.raw}
		if script[1].ah != 0 {
			script = append([]scan{script[0], script[2], script[1]}, script[3:]...)
			raw = map[int]func(*progEnc){2: tc.raw}
		}
		if _, err := decodeFresh(snap.encode(script, nil, raw)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", tc.name, err)
		}
	}
}
