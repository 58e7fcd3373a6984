package client_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
)

// fieldsTar writes a WebDataset shard of n 32×32 PNGs, each with a .txt
// caption, a .json for even samples only and a .tags label set (tagsOf),
// and returns its path.
func fieldsTar(t *testing.T, n int) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	put := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	for i := range n {
		img := image.NewGray(image.Rect(0, 0, 32, 32))
		for p := range img.Pix {
			img.Pix[p] = uint8(i*7 + p)
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%03d", i)
		put(key+".png", b.Bytes())
		put(key+".txt", []byte(fmt.Sprintf("caption of %d", i)))
		if i%2 == 0 {
			put(key+".json", []byte(fmt.Sprintf(`{"i":%d}`, i)))
		}
		put(key+".tags", []byte(strings.Trim(fmt.Sprint(tagsOf(i)), "[]")))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shard-0.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tagsOf is sample i's label set: one to three of 5 classes.
func tagsOf(i int) []int32 {
	return [][]int32{{int32(i % 5)}, {0, 4}, {1, 2, 3}}[i%3]
}

// TestFieldsEndToEnd streams a WebDataset shard's captions, JSON
// documents (half of them absent) and label sets through the daemon,
// inline and over shared memory, and checks each against its sample.
func TestFieldsEndToEnd(t *testing.T) {
	path := fieldsTar(t, 40)
	d := clienttest.Start(t, "--dataset", "wds=tar:"+path+"?fields=txt,json&labels=tags", "--workers", "2")
	c := d.Dial(t)
	for _, shm := range []bool{false, true} {
		ctx := context.Background()
		s, err := c.Open(ctx, client.StreamConfig{Dataset: "wds", BatchSize: 16, Seed: 3, SharedMemory: shm, Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		h := s.Header()
		if !slices.Equal(h.GetFieldNames(), []string{"txt", "json"}) || !h.GetMultiLabel() || h.GetNumClasses() != 5 {
			t.Fatalf("header: fields %q, multi-label %v, %d classes", h.GetFieldNames(), h.GetMultiLabel(), h.GetNumClasses())
		}
		seen := 0
		hot := make([]float32, 16*5)
		for {
			b, err := s.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := b.MultiHot(hot); err != nil {
				t.Fatal(err)
			}
			for k, idx := range b.Indices {
				i := int(idx)
				want := tagsOf(i)
				if got := string(b.Field("txt", k)); got != fmt.Sprintf("caption of %d", i) || !b.FieldPresent("txt", k) {
					t.Errorf("sample %d txt %q", i, got)
				}
				js, wantJS := string(b.Field("json", k)), ""
				if i%2 == 0 {
					wantJS = fmt.Sprintf(`{"i":%d}`, i)
				}
				if js != wantJS || b.FieldPresent("json", k) != (i%2 == 0) || b.Field("nope", k) != nil {
					t.Errorf("sample %d json %q present %v", i, js, b.FieldPresent("json", k))
				}
				if got := b.LabelSet(k); !slices.Equal(got, want) || b.Labels[k] != want[0] {
					t.Errorf("sample %d label set %v label %d, want %v", i, got, b.Labels[k], want)
				}
				for c := range int32(5) {
					if h := hot[k*5+int(c)]; h != 0 && h != 1 || (h == 1) != slices.Contains(want, c) {
						t.Errorf("sample %d multi-hot %v, want %v", i, hot[k*5:k*5+5], want)
					}
				}
				seen++
			}
			b.Release()
		}
		if seen != 40 {
			t.Errorf("shm %v: %d samples", shm, seen)
		}
		s.Close()
	}
}
