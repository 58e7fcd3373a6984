package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	jf "github.com/loaderd/loaderd/internal/scratchfmt/jf"
	"image"
	"image/jpeg"
	"io"
	"os"
	"runtime"
	"sync"
	"time"
)

func main() {
	f, _ := os.Open("/work/shared/data/cifar10-train-jpg.tar")
	tr := tar.NewReader(f)
	var imgs [][]byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, _ := io.ReadAll(tr)
		imgs = append(imgs, b)
	}
	kinds := map[string]int{}
	for _, b := range imgs[:2000] {
		im, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			panic(err)
		}
		switch m := im.(type) {
		case *image.YCbCr:
			kinds[fmt.Sprint("ycbcr ", m.SubsampleRatio, m.Bounds())]++
		default:
			kinds[fmt.Sprintf("%T", im)]++
		}
	}
	fmt.Println(len(imgs), kinds)
	for _, fork := range []bool{false, true} {
		for _, w := range []int{1, 2} {
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			t := time.Now()
			var wg sync.WaitGroup
			for k := 0; k < w; k++ {
				wg.Add(1)
				go func(k int) {
					defer wg.Done()
					r := bytes.NewReader(nil)
					var dec jf.Decoder
					for i := k; i < len(imgs); i += w {
						r.Reset(imgs[i])
						if fork {
							if _, err := dec.Decode(r); err != nil {
								panic(err)
							}
						} else {
							jpeg.Decode(r)
						}
					}
				}(k)
			}
			wg.Wait()
			d := time.Since(t)
			runtime.ReadMemStats(&ms1)
			fmt.Printf("fork=%v workers=%d %.0f img/s, %.0f B/img, %.1f allocs/img, gc=%d\n", fork, w, float64(len(imgs))/d.Seconds(),
				float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(len(imgs)), float64(ms1.Mallocs-ms0.Mallocs)/float64(len(imgs)), ms1.NumGC-ms0.NumGC)
		}
	}
}
