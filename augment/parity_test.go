package augment

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// torchvisionPython is the interpreter with Debian's torchvision 0.14.
const torchvisionPython = "/usr/bin/python3"

type parityCase struct {
	In   string  `json:"in"`
	Out  string  `json:"out"`
	H    int     `json:"h"`
	W    int     `json:"w"`
	C    int     `json:"c"`
	Op   string  `json:"op"`
	Size int     `json:"size,omitempty"`
	Crop int     `json:"crop,omitempty"`
	Box  *[4]int `json:"box,omitempty"` // top, left, height, width
}

// TestTorchvisionParity compares the geometric stage with torchvision 0.14
// on PIL images (testdata/tvparity.py) for resize, resize+center_crop,
// center_crop (with its zero padding) and resized_crop given the same box.
// The tolerance is zero: the resampler performs Pillow's
// ImagingResample's operations (float64 coefficients, 22-bit fixed point,
// the same rounding and clipping, horizontal pass first), so any byte
// that differs is a bug, not rounding.
func TestTorchvisionParity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torchvision")
	}
	if err := exec.Command(torchvisionPython, "-c", "import torchvision, PIL, numpy").Run(); err != nil {
		t.Skipf("no torchvision at %s: %v", torchvisionPython, err)
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	type goCase struct {
		ops []Op
		src []byte
		prm sample.Params
	}
	var cases []parityCase
	var gos []goCase
	add := func(h, w, c int, pc parityCase, ops []Op, prm sample.Params) {
		src := make([]byte, h*w*c)
		// Smooth gradients plus noise: both the filter's averaging and
		// its edges matter.
		for y := range h {
			for x := range w {
				for k := range c {
					src[(y*w+x)*c+k] = byte((x*7+y*3+k*50)/2) ^ byte(r.IntN(32))
				}
			}
		}
		i := len(cases)
		pc.In, pc.Out = fmt.Sprintf("in%d.raw", i), fmt.Sprintf("out%d.raw", i)
		pc.H, pc.W, pc.C = h, w, c
		if err := os.WriteFile(filepath.Join(dir, pc.In), src, 0o644); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, pc)
		gos = append(gos, goCase{ops, src, prm})
	}
	sizes := [][2]int{{375, 500}, {500, 333}, {64, 64}, {97, 131}, {20, 30}, {300, 17}}
	for _, hw := range sizes {
		h, w := hw[0], hw[1]
		add(h, w, 3, parityCase{Op: "resize", Size: 56}, []Op{Resize{Size: 56}}, sample.Params{})
		add(h, w, 3, parityCase{Op: "resize", Size: 80}, []Op{Resize{Size: 80}}, sample.Params{}) // upscales the small ones
		add(h, w, 3, parityCase{Op: "resize_center", Size: 73, Crop: 64},
			[]Op{Resize{Size: 73}, CenterCrop{Size: 64}}, sample.Params{})
		add(h, w, 1, parityCase{Op: "center_crop", Crop: 45}, []Op{CenterCrop{Size: 45}}, sample.Params{}) // pads the small ones
		for range 3 {
			bh, bw := 1+r.IntN(h), 1+r.IntN(w)
			y, x := r.IntN(h-bh+1), r.IntN(w-bw+1)
			box := [4]int{y, x, bh, bw}
			add(h, w, 3, parityCase{Op: "resized_crop", Size: 48, Box: &box},
				[]Op{RandomResizedCrop{Size: 48}}, sample.Params{Box: sample.Box{X: int32(x), Y: int32(y), W: int32(bw), H: int32(bh)}})
		}
	}
	js, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(torchvisionPython, filepath.Join("testdata", "tvparity.py"), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tvparity.py: %v\n%s", err, out)
	}
	var sc Scratch
	for i, pc := range cases {
		g := gos[i]
		p, err := NewPipeline(Spec{H: pc.H, W: pc.W, C: pc.C, DType: sample.U8, Layout: sample.HWC}, g.ops...)
		if err != nil {
			t.Fatalf("case %d %s: %v", i, pc.Op, err)
		}
		got := make([]byte, p.Out().Bytes())
		if err := p.ApplySized(got, g.src, pc.H, pc.W, g.prm, &sc); err != nil {
			t.Fatalf("case %d %s: %v", i, pc.Op, err)
		}
		want, err := os.ReadFile(filepath.Join(dir, pc.Out))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(got) {
			t.Errorf("case %d %s %dx%d: %d bytes, torchvision %d", i, pc.Op, pc.W, pc.H, len(got), len(want))
			continue
		}
		diff, maxd := 0, 0
		for j := range got {
			if d := max(int(got[j])-int(want[j]), int(want[j])-int(got[j])); d > 0 {
				diff++
				maxd = max(maxd, d)
			}
		}
		if diff > 0 {
			t.Errorf("case %d %s %dx%d %+v: %d of %d bytes differ, by up to %d", i, pc.Op, pc.W, pc.H, pc, diff, len(got), maxd)
		}
	}
}
