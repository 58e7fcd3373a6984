package convert

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertVaryingSize: a source of images of varying size (size=any)
// has no one size to store raw pixels at, and is refused before anything
// is written, saying what to do; with a size it converts.
func TestConvertVaryingSize(t *testing.T) {
	root := t.TempDir()
	for i, wh := range [][2]int{{40, 30}, {17, 60}, {64, 64}, {30, 20}} {
		img := image.NewRGBA(image.Rect(0, 0, wh[0], wh[1]))
		for y := range wh[1] {
			for x := range wh[0] {
				img.Set(x, y, color.RGBA{uint8(x * 5), uint8(y * 3), uint8(i * 80), 255})
			}
		}
		dir := filepath.Join(root, "c"+string(rune('0'+i%2)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, string(rune('a'+i))+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, from := range []string{"folder:" + root + "?size=any", "folder:" + root + "?size=any&holdout=0.4&part=val"} {
		_, err := Run(context.Background(), Options{From: from, To: "arrow:" + out})
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "varying size") || !strings.Contains(err.Error(), "size=WxH&resize=bilinear") {
			t.Fatalf("%s: %v, want ErrOptions saying why and what to do", from, err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("%s: the output exists after a refusal: %v", from, err)
		}
	}
	s, err := Run(context.Background(), Options{From: "folder:" + root + "?size=16x12&resize=bilinear", To: "arrow:" + out})
	if err != nil || s.Samples != 4 || s.Spec.H != 12 || s.Spec.W != 16 {
		t.Fatalf("with a size: %+v, %v", s, err)
	}
}
