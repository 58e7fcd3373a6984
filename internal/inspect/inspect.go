package inspect

import (
	"context"
	"errors"
	"fmt"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"

	"github.com/loaderd/loaderd/internal/bytesize"
)

// Options describe one inspection.
type Options struct {
	Source string // FORMAT:PATH

	Sheet     string // write a PNG contact sheet here; "" for none
	Samples   int    // samples on the sheet, spread evenly over the dataset; 0: 64
	Columns   int    // 0: 8
	Scale     int    // each pixel drawn Scale×Scale; 0: cells at least 64 pixels wide (size=any thumbnails: 64·Scale, 0: 128)
	Augmented bool   // draw the samples after augmentation
	// Ops is the augmentation for Augmented, in augment.ParseOps form; its
	// resize, crops and flip are drawn, value ops (totensor, normalize,
	// out) are left out since they do not change what a person sees. Empty
	// means crop=SIZE:4,flip where SIZE is the image's shorter side; images
	// of varying size (size=any) have no such size and need Ops opening
	// with resize, center_crop or random_resized_crop.
	Ops   string
	Seed  uint64 // augmentation seed
	Epoch int64  // augmentation epoch

	Verify  bool // decode every sample and count the unreadable ones (and, for size=any, measure every size)
	Workers int  // goroutines for Verify; 0: 2
}

// ClassCount is one class and its number of samples.
type ClassCount struct {
	Name  string
	Count int64
}

// Report is what Run found.
type Report struct {
	Source      string
	Len         int64
	Spec        augment.Spec
	Classes     []ClassCount
	BadLabels   int64  // samples whose label could not be read or is out of range
	SampleBytes int64  // one decoded sample; 0 for images of varying size
	FileBytes   int64  // the dataset's files on disk; 0 when it has none
	Decoder     string // the JPEG decoder of an encoded-image source, "" for others
	// Fingerprint is loader.Fingerprint's, what the daemon serves in
	// ListDatasets: an operator compares two hosts' by eye. Empty when it
	// failed, FingerprintErr then saying why.
	Fingerprint, FingerprintErr string
	// Varying is set for images of varying size (size=any: Spec is
	// 0×0×C); Sizes then spreads the sizes of SizeSamples samples, or of
	// every sample with Verify.
	Varying bool
	Sizes   Sizes

	Verified   bool
	Unreadable int64
	Errors     []string // the first MaxErrors unreadable samples' errors

	Sheet        string  // the contact sheet written, if any
	SheetIndices []int64 // the samples on it
	SheetOps     string  // the augmentation drawn, "" when none
}

// MaxErrors bounds Report.Errors.
const MaxErrors = 20

// Run inspects o.Source.
func Run(ctx context.Context, o Options) (Report, error) {
	// A serve --dataset spec may ask for a decoded cache (cache=decoded):
	// inspecting reads each sample once, so its options are taken out.
	spec, _, _, err := cache.SplitSpec(o.Source)
	if err != nil {
		return Report{}, err
	}
	src, err := loader.Open(spec)
	if err != nil {
		return Report{}, err
	}
	defer src.Close()
	r := Report{Source: o.Source, Len: src.Len(), Spec: src.Spec(), SampleBytes: int64(src.Spec().Bytes()),
		FileBytes: diskBytes(o.Source)}
	if d, ok := loader.As[loader.DecoderNamer](src); ok {
		r.Decoder = d.Decoder()
	}
	if r.Fingerprint, err = loader.Fingerprint(src); err != nil {
		r.FingerprintErr = err.Error() // a report of a broken dataset is still worth its counts
	}
	if err := r.countClasses(ctx, src); err != nil {
		return r, err
	}
	ss, varying := loader.As[loader.SizedSource](src)
	r.Varying = varying
	if varying && !o.Verify {
		if err := r.measure(ctx, ss); err != nil {
			return r, err
		}
	}
	if o.Verify {
		if err := r.verify(ctx, src, max(o.Workers, 2)); err != nil {
			return r, err
		}
	}
	if o.Sheet != "" {
		if err := r.writeSheet(src, o); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (r *Report) countClasses(ctx context.Context, src loader.Source) error {
	counts := make([]int64, len(src.Classes()))
	lb, fast := loader.As[loader.Labeler](src) // folder, tar, arrow, parquet: no decoding
	var scratch []byte
	if !fast {
		scratch = make([]byte, scratchBytes(src))
	}
	for i := range src.Len() {
		if i%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		var l int32
		var err error
		if fast {
			l, err = lb.Label(i)
		} else {
			l, _, err = src.Sample(i, scratch)
		}
		if err != nil || l < 0 || int(l) >= len(counts) {
			r.BadLabels++
			continue
		}
		counts[l]++
	}
	for k, name := range src.Classes() {
		r.Classes = append(r.Classes, ClassCount{name, counts[k]})
	}
	return nil
}

func (r *Report) verify(ctx context.Context, src loader.Source, workers int) error {
	var bad atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	ss, varying := loader.As[loader.SizedSource](src)
	sizes := make([][][2]int, workers) // per worker, for images of varying size
	for w := range int64(workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := make([]byte, scratchBytes(src))
			for i := w; i < src.Len() && ctx.Err() == nil; i += int64(workers) {
				var err error
				if varying { // at full size, as Sample: every pixel decoded
					var dec loader.Decoded
					if _, _, dec, err = ss.SampleSized(i, scratch, nil); err == nil {
						sizes[w] = append(sizes[w], [2]int{dec.H, dec.W})
					}
				} else {
					_, _, err = src.Sample(i, scratch)
				}
				if err != nil {
					bad.Add(1)
					mu.Lock()
					if len(r.Errors) < MaxErrors {
						r.Errors = append(r.Errors, err.Error())
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	r.Verified, r.Unreadable = true, bad.Load()
	if varying {
		r.Sizes = sizeStats(slices.Concat(sizes...))
	}
	return ctx.Err()
}

func (r *Report) writeSheet(src loader.Source, o Options) error {
	n := o.Samples
	if n <= 0 {
		n = 64
	}
	n = int(min(int64(n), src.Len()))
	for k := range n { // evenly spread: every class of a sorted folder shows
		r.SheetIndices = append(r.SheetIndices, int64(k)*src.Len()/int64(n))
	}
	so := SheetOptions{Columns: o.Columns, Scale: o.Scale, Seed: o.Seed, Epoch: o.Epoch, Captions: true}
	if o.Augmented {
		ops, err := SheetOps(src.Spec(), o.Ops)
		if err != nil {
			return err
		}
		so.Ops, r.SheetOps = ops, augment.FormatOps(ops)
	}
	img, err := ContactSheet(src, r.SheetIndices, so)
	if err != nil {
		return err
	}
	f, err := os.Create(o.Sheet)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("inspect: %s: %w", o.Sheet, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	r.Sheet = o.Sheet
	return nil
}

// SheetOps parses ops for drawing: the geometric ops (resize, crops) and
// the flip are kept, value ops dropped. Empty ops mean crop=SIZE:4,flip
// for the spec's shorter side; a spec of varying size (0×0) has none, and
// its ops must open with resize, center_crop or random_resized_crop.
func SheetOps(spec augment.Spec, ops string) ([]augment.Op, error) {
	varying := spec.H == 0 && spec.W == 0
	if strings.TrimSpace(ops) == "" {
		if varying {
			return nil, errFixedAugment(spec)
		}
		return []augment.Op{augment.RandomCrop{Size: min(spec.H, spec.W), Padding: 4}, augment.RandomHorizontalFlip{P: 0.5}}, nil
	}
	parsed, err := augment.ParseOps(ops)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	var out []augment.Op
	for _, op := range parsed {
		switch op.(type) {
		case augment.RandomCrop, augment.RandomHorizontalFlip, augment.Resize, augment.CenterCrop, augment.RandomResizedCrop:
			out = append(out, op)
		}
	}
	if varying {
		if len(out) == 0 {
			return nil, errFixedAugment(spec)
		}
		switch out[0].(type) {
		case augment.Resize, augment.CenterCrop, augment.RandomResizedCrop:
		default:
			return nil, errFixedAugment(spec)
		}
	}
	return out, nil
}

// diskBytes sums the sizes of the files behind FORMAT:PATH (a file, a
// directory tree or a glob); 0 when there are none (synthetic).
func diskBytes(spec string) int64 {
	_, p, _ := strings.Cut(spec, ":")
	p, _, _ = strings.Cut(p, "?")
	matches, _ := filepath.Glob(p)
	var n int64
	for _, m := range matches {
		filepath.WalkDir(m, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
	}
	return n
}

// String is the report `loaderd inspect` prints.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "source   %s\n", r.Source)
	if r.Fingerprint != "" {
		fmt.Fprintf(&b, "fingerprint %s\n", r.Fingerprint)
	} else if r.FingerprintErr != "" {
		fmt.Fprintf(&b, "fingerprint none: %s\n", r.FingerprintErr)
	}
	if r.Varying {
		r.sizesString(&b)
	} else {
		fmt.Fprintf(&b, "samples  %d of %v, %d bytes each (%s decoded", r.Len, r.Spec, r.SampleBytes, bytesize.Format(r.Len*r.SampleBytes))
		if r.FileBytes > 0 {
			fmt.Fprintf(&b, ", %s on disk", bytesize.Format(r.FileBytes))
		}
		fmt.Fprintf(&b, ")\n")
	}
	if r.Decoder != "" {
		fmt.Fprintf(&b, "decoder  %s\n", r.Decoder)
	}
	fmt.Fprintf(&b, "classes  %d\n", len(r.Classes))
	width := 0
	for _, c := range r.Classes {
		width = max(width, len(c.Name))
	}
	for k, c := range r.Classes {
		fmt.Fprintf(&b, "  %4d  %-*s  %d\n", k, width, c.Name, c.Count)
	}
	if r.BadLabels > 0 {
		fmt.Fprintf(&b, "  %d samples have no valid label\n", r.BadLabels)
	}
	if r.Verified {
		fmt.Fprintf(&b, "verified %d unreadable of %d\n", r.Unreadable, r.Len)
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	if r.Sheet != "" {
		fmt.Fprintf(&b, "sheet    %s: %d samples", r.Sheet, len(r.SheetIndices))
		if r.SheetOps != "" {
			fmt.Fprintf(&b, " after %s", r.SheetOps)
		}
		b.WriteString("\n")
	}
	return b.String()
}

var errNoSamples = errors.New("inspect: no samples to draw")
