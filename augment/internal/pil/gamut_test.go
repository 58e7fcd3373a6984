package pil

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestHueGamut compares Hue (and Saturation, Grayscale) with torchvision
// on an image holding each of the 2^24 RGB colours once, so that every
// branch and rounding of Pillow's HSV conversions is exercised.
func TestHueGamut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torchvision on 16M pixels")
	}
	if err := exec.Command(torchvisionPython, "-c", "import torchvision, PIL, numpy").Run(); err != nil {
		t.Skipf("no torchvision at %s: %v", torchvisionPython, err)
	}
	dir := t.TempDir()
	src := Image{Pix: make([]byte, 1<<24*3), H: 4096, W: 4096, C: 3}
	for i := range 1 << 24 {
		src.Pix[3*i], src.Pix[3*i+1], src.Pix[3*i+2] = byte(i>>16), byte(i>>8), byte(i)
	}
	if err := os.WriteFile(filepath.Join(dir, "gamut.raw"), src.Pix, 0o644); err != nil {
		t.Fatal(err)
	}
	type gcase struct {
		oc  oracleCase
		run func(dst, src Image)
	}
	var cases []gcase
	for i, f := range []float64{0.5, -0.21} {
		cases = append(cases, gcase{
			oracleCase{In: "gamut.raw", Out: "hue" + string(rune('0'+i)), H: 4096, W: 4096, C: 3, Op: "hue", P: map[string]any{"factor": f}},
			func(d, s Image) { Hue(d, s, f) }})
	}
	cases = append(cases, gcase{
		oracleCase{In: "gamut.raw", Out: "sat", H: 4096, W: 4096, C: 3, Op: "saturation", P: map[string]any{"factor": 1.7}},
		func(d, s Image) { Saturation(d, s, 1.7) }})
	ocs := make([]oracleCase, len(cases))
	for i := range cases {
		ocs[i] = cases[i].oc
	}
	js, err := json.Marshal(ocs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(torchvisionPython, filepath.Join("testdata", "tvpil.py"), dir).CombinedOutput(); err != nil {
		t.Fatalf("tvpil.py: %v\n%s", err, out)
	}
	dst := Image{Pix: make([]byte, len(src.Pix)), H: 4096, W: 4096, C: 3}
	for _, c := range cases {
		c.run(dst, src)
		want, err := os.ReadFile(filepath.Join(dir, c.oc.Out))
		if err != nil {
			t.Fatal(err)
		}
		diff, first := 0, -1
		for j := range want {
			if want[j] != dst.Pix[j] {
				if first < 0 {
					first = j / 3
				}
				diff++
			}
		}
		if diff > 0 {
			t.Errorf("%s %v: %d bytes differ; first colour %06x gives %v, torchvision %v", c.oc.Op, c.oc.P, diff,
				first, dst.Pix[3*first:3*first+3], want[3*first:3*first+3])
		}
	}
}
