package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"

	"github.com/loaderd/loaderd/internal/bytesize"
)

// Options describe one conversion.
type Options struct {
	From string // the source, FORMAT:PATH (any registered format)
	// To is arrow:PATH. A PATH ending in .arrow is one file; any other
	// PATH is a directory that receives part-00000.arrow, part-00001.arrow…
	To        string
	Shard     int64              // samples per part file (directory output only); 0: one part
	BatchRows int                // rows per record batch; 0: DefaultBatchRows
	Workers   int                // decoding goroutines; 0: GOMAXPROCS
	OnError   loader.ErrorPolicy // fail (default), or skip: leave unreadable samples out and list them
	Progress  io.Writer          // a one-line progress bar, redrawn with \r; nil: none
	// Overwrite replaces an output that exists and is not empty (an
	// empty directory or file is replaced either way); without it such
	// an output is an ErrExists error, before anything is read.
	Overwrite bool
}

// Summary says what a conversion did.
type Summary struct {
	From, To string
	Spec     augment.Spec // of each written sample (always HWC)
	Classes  []string
	Samples  int64    // samples written
	Skipped  int64    // samples left out (OnError skip)
	Errors   []string // the first MaxErrors of the skipped samples' errors
	Files    []string // the files written, in order
	Bytes    int64    // their total size
	Elapsed  time.Duration
}

// MaxErrors bounds Summary.Errors.
const MaxErrors = 20

// String is the human summary `loaderd convert` prints.
func (s Summary) String() string {
	var b strings.Builder
	rate := float64(s.Samples+s.Skipped) / max(s.Elapsed.Seconds(), 1e-9)
	fmt.Fprintf(&b, "converted %s\n       to %s\n", s.From, s.To)
	fmt.Fprintf(&b, "  samples  %d (%v, %d classes)\n", s.Samples, s.Spec, len(s.Classes))
	fmt.Fprintf(&b, "  files    %d, %s\n", len(s.Files), bytesize.Format(s.Bytes))
	fmt.Fprintf(&b, "  time     %v (%.0f images/s)\n", s.Elapsed.Round(time.Millisecond), rate)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, "  skipped  %d unreadable samples:\n", s.Skipped)
		for _, e := range s.Errors {
			fmt.Fprintf(&b, "    %s\n", e)
		}
		if int64(len(s.Errors)) < s.Skipped {
			fmt.Fprintf(&b, "    … and %d more\n", s.Skipped-int64(len(s.Errors)))
		}
	}
	return b.String()
}

// ErrOptions marks a problem with Options.
var ErrOptions = errors.New("convert: invalid options")

// Run converts o.From into o.To. Samples keep their order (minus skipped
// ones), so sample i of the output is sample i of the source when none is
// skipped. The output is written into a new directory created next to it
// (exclusively, with a random name: nothing there is followed or
// overwritten) and moved into place when complete, replacing an old
// output in one step where the system allows (see install); on error or
// cancellation nothing partial is left, and the old output is untouched.
func Run(ctx context.Context, o Options) (Summary, error) {
	start := time.Now()
	out, ok := strings.CutPrefix(o.To, "arrow:")
	if !ok || out == "" {
		return Summary{}, fmt.Errorf("%w: --to %q: want arrow:PATH", ErrOptions, o.To)
	}
	single := strings.HasSuffix(out, ".arrow")
	if single && o.Shard > 0 {
		return Summary{}, fmt.Errorf("%w: --shard needs a directory output, not %s", ErrOptions, out)
	}
	if o.Shard < 0 || o.BatchRows < 0 || o.Workers < 0 {
		return Summary{}, fmt.Errorf("%w: negative shard, batch rows or workers", ErrOptions)
	}
	// Refused now rather than after the conversion; install checks again.
	if err := checkOutput(out, o.Overwrite); err != nil {
		return Summary{}, err
	}
	src, err := loader.Open(o.From)
	if err != nil {
		return Summary{}, err
	}
	defer src.Close()
	if sp := src.Spec(); sp.H == 0 && sp.W == 0 {
		// size=any: no one size to store raw pixels at. A tar of the
		// encoded images is already read in place (mapped, sliced), so
		// there is nothing to gain by repacking the bytes.
		return Summary{}, fmt.Errorf("%w: %s has images of varying size (size=any), and Arrow output holds raw pixels of one size: "+
			"read the source as it is with size=any, or give it a size to convert at (size=WxH&resize=bilinear stretches every image to W×H)",
			ErrOptions, o.From)
	}
	// Arrow files hold HWC pixels; a CHW source (CIFAR's binary) is
	// transposed on the way, through the fused kernel.
	spec := src.Spec()
	spec.Layout = sample.HWC
	pipe, err := augment.NewPipeline(src.Spec(), augment.Output{Layout: sample.HWC})
	if err != nil {
		return Summary{}, fmt.Errorf("convert: %w", err)
	}
	s := Summary{From: o.From, To: o.To, Spec: spec, Classes: src.Classes()}
	stage, release, err := newStage(out)
	if err != nil {
		return s, err
	}
	defer release()           // after the removal: the lock keeps other runs off the stage
	defer os.RemoveAll(stage) // what is left of it: nothing, or the replaced output
	target := stage
	if single {
		target = filepath.Join(stage, filepath.Base(out))
	}
	c := &converter{o: o, src: src, pipe: pipe, spec: spec, s: &s, start: start}
	if c.workers = o.Workers; c.workers == 0 {
		c.workers = runtime.GOMAXPROCS(0)
	}
	if c.rows = o.BatchRows; c.rows == 0 {
		c.rows = DefaultBatchRows
	}
	err = c.run(ctx, target, single)
	if err == nil {
		err = install(target, out, o.Overwrite)
	}
	if err == nil {
		for i, f := range s.Files { // named where they are now
			rel, _ := filepath.Rel(target, f)
			s.Files[i] = filepath.Join(out, rel)
		}
	}
	s.Elapsed = time.Since(start)
	c.progress(true)
	return s, err
}

type converter struct {
	o       Options
	src     loader.Source
	pipe    *augment.Pipeline
	spec    augment.Spec
	s       *Summary
	workers int
	rows    int
	start   time.Time
	done    int64
	drawn   time.Time
	part    *part
}

// part is an output file being written, in the staging directory.
type part struct {
	name string
	f    *os.File
	w    *ArrowWriter
}

// run writes the output at out (in the staging directory).
func (c *converter) run(ctx context.Context, out string, single bool) (err error) {
	defer func() {
		if c.part != nil { // an error left a part open (Run removes the stage)
			c.part.f.Close()
		}
	}()
	n := c.src.Len()
	chunk := newChunk(c.rows, c.spec.Bytes())
	for lo := int64(0); lo < n; lo += int64(c.rows) {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+int64(c.rows), n)
		c.decode(chunk, lo, hi)
		for k := range hi - lo {
			if e := chunk.errs[k]; e != nil {
				if c.o.OnError != loader.SkipOnError || errors.Is(e, loader.ErrIndex) {
					return e
				}
				c.s.Skipped++
				if len(c.s.Errors) < MaxErrors {
					c.s.Errors = append(c.s.Errors, e.Error())
				}
				continue
			}
			if c.part == nil || (c.o.Shard > 0 && c.part.w.Rows() == c.o.Shard) {
				if err := c.closePart(); err != nil {
					return err
				}
				name := out
				if !single {
					name = filepath.Join(out, fmt.Sprintf("part-%05d.arrow", len(c.s.Files)))
				}
				if err := c.openPart(name); err != nil {
					return err
				}
			}
			b := c.spec.Bytes()
			if err := c.part.w.Write(chunk.labels[k], chunk.pix[int(k)*b:int(k+1)*b]); err != nil {
				return err
			}
			c.s.Samples++
		}
		c.done = hi
		c.progress(false)
	}
	if c.part == nil { // nothing readable: still write a valid, empty file? No: an error.
		return fmt.Errorf("convert: %s: no sample could be read", c.o.From)
	}
	return c.closePart()
}

type chunk struct {
	pix    []byte
	labels []int32
	errs   []error
}

func newChunk(rows, size int) *chunk {
	return &chunk{pix: make([]byte, rows*size), labels: make([]int32, rows), errs: make([]error, rows)}
}

// decode reads samples [lo, hi) into the chunk with the workers, each
// taking every workers-th sample.
func (c *converter) decode(ch *chunk, lo, hi int64) {
	var wg sync.WaitGroup
	b := c.spec.Bytes()
	for w := range int64(c.workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := make([]byte, c.src.Spec().Bytes())
			for i := lo + w; i < hi; i += int64(c.workers) {
				k := i - lo
				label, pix, err := c.src.Sample(i, scratch)
				if err == nil {
					err = c.pipe.Apply(ch.pix[int(k)*b:int(k+1)*b], pix, sample.Params{})
				}
				ch.labels[k], ch.errs[k] = label, err
			}
		}()
	}
	wg.Wait()
}

// openPart creates a part file in the staging directory, which is new
// and ours: O_EXCL all the same.
func (c *converter) openPart(name string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	w, err := NewArrowWriter(f, c.spec, c.s.Classes, c.rows)
	if err != nil {
		f.Close()
		return err
	}
	c.part = &part{name: name, f: f, w: w}
	return nil
}

func (c *converter) closePart() error {
	p := c.part
	if p == nil {
		return nil
	}
	err := p.w.Close()
	if err == nil {
		err = p.f.Sync()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: %s: %w", p.name, err)
	}
	c.part = nil
	fi, err := os.Stat(p.name)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	c.s.Files = append(c.s.Files, p.name)
	c.s.Bytes += fi.Size()
	return nil
}

// progress redraws the bar at most ten times a second, and once at the end.
func (c *converter) progress(final bool) {
	if c.o.Progress == nil || (!final && time.Since(c.drawn) < 100*time.Millisecond) {
		return
	}
	c.drawn = time.Now()
	n := c.src.Len()
	frac := float64(c.done) / float64(max(n, 1))
	const width = 30
	bar := strings.Repeat("=", int(frac*width)) + strings.Repeat(" ", width-int(frac*width))
	rate := float64(c.done) / max(time.Since(c.start).Seconds(), 1e-9)
	eta := time.Duration(float64(n-c.done) / max(rate, 1e-9) * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(c.o.Progress, "\rconvert [%s] %d/%d %5.1f%% %7.0f img/s ETA %v ", bar, c.done, n, 100*frac, rate, eta)
	if final {
		fmt.Fprintln(c.o.Progress)
	}
}
