package server

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// TestVaryingSizeDataset: a folder of images of different sizes opened
// without size= (size=any implied) gets the ImageNet default augment and
// streams through any chain that opens with a resize or crop; a chain of
// one size is refused with a message naming the fixes, not augment's
// complaint about a 0×0 input.
func TestVaryingSizeDataset(t *testing.T) {
	root := t.TempDir()
	for i, wh := range [][2]int{{40, 30}, {64, 48}, {17, 90}} {
		dir := filepath.Join(root, "c"+string(rune('0'+i%2)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, string(rune('a'+i))+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, image.NewRGBA(image.Rect(0, 0, wh[0], wh[1]))); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	src, err := loader.Open("folder:" + root)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ds := &Dataset{Name: "photos", Source: src, Augment: DefaultAugment(src.Spec())}
	if !strings.HasPrefix(ds.Augment, "random_resized_crop=224") {
		t.Errorf("default augment %q, want ImageNet's", ds.Augment)
	}
	for _, tc := range []struct {
		augment string
		err     string // "" when it builds
	}{
		{"", ""}, // the dataset's default
		{"resize=32,center_crop=32,out=u8:hwc", ""},
		{"center_crop=16", ""},
		{"random_resized_crop=24,flip=0.5", ""},
		{"crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw", `dataset "photos" has images of varying size`},
		{"flip=0.5,resize=32", `dataset "photos" has images of varying size`},
	} {
		_, err := buildPipeline(ds, &pb.Open{Augment: tc.augment})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("augment %q: %v", tc.augment, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), loader.VaryingSizeFix)):
			t.Errorf("augment %q: %v, want %q and the fixes", tc.augment, err, tc.err)
		}
	}
}
