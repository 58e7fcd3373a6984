package cifar

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/mmap"
)

// CIFAR record layout: label byte(s), then 32·32·3 bytes in CHW order.
const (
	cifarPixels    = 32 * 32 * 3
	cifar10Record  = 1 + cifarPixels
	cifar100Record = 2 + cifarPixels
)

// cifar10Classes are the class names of CIFAR-10, used when no
// batches.meta.txt sits beside the data.
var cifar10Classes = []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}

func init() {
	loader.RegisterFormat("cifar", func(path string) (loader.Source, error) { return open(path, false) })
	// CIFAR-100 with its 20 coarse labels instead of the 100 fine ones.
	loader.RegisterFormat("cifar100-coarse", func(path string) (loader.Source, error) { return open(path, true) })
}

type cifarFile struct {
	path  string
	data  []byte // the whole file, mapped
	start int64  // dataset index of the first record
	n     int64
}

// source reads the CIFAR-10 and CIFAR-100 binary formats through
// read-only memory maps: Sample returns a view into the mapping, with no
// copy. It is safe for concurrent use.
type source struct {
	path     string
	files    []cifarFile
	n        int64
	record   int // 3073 (CIFAR-10) or 3074 (CIFAR-100)
	labelOff int
	classes  []string
}

// open opens path: one batch file, or a directory holding
// data_batch_N.bin (CIFAR-10) or train.bin (CIFAR-100). CIFAR-10 and
// CIFAR-100 are told apart by record size; coarse selects CIFAR-100's
// coarse labels.
func open(path string, coarse bool) (*source, error) {
	if path == "" {
		return nil, fmt.Errorf("cifar: no path given (cifar:DIR or cifar:FILE)")
	}
	names, dir, err := cifarFiles(path)
	if err != nil {
		return nil, err
	}
	c := &source{path: path}
	for _, name := range names {
		data, err := mmap.Map(name)
		if err != nil {
			c.Close()
			return nil, &loader.RecordError{File: name, Record: -1, Err: err}
		}
		c.files = append(c.files, cifarFile{path: name, data: data, start: c.n})
		f := &c.files[len(c.files)-1]
		rec, err := cifarRecordSize(name, int64(len(data)))
		if err != nil {
			c.Close()
			return nil, err
		}
		if c.record != 0 && rec != c.record {
			c.Close()
			return nil, &loader.RecordError{File: name, Record: -1, Err: fmt.Errorf("%w: %d-byte records after %d-byte records in %s",
				loader.ErrCorrupt, rec, c.record, c.files[0].path)}
		}
		c.record = rec
		f.n = int64(len(data) / rec)
		c.n += f.n
	}
	if c.n == 0 {
		c.Close()
		return nil, &loader.RecordError{File: path, Record: -1, Err: fmt.Errorf("%w: no records", loader.ErrTruncated)}
	}
	if c.record == cifar100Record && !coarse {
		c.labelOff = 1
	}
	c.classes = cifarClasses(dir, c.record, coarse)
	return c, nil
}

// cifarFiles lists the batch files of path and the directory their
// metadata lives in.
func cifarFiles(path string) (files []string, dir string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", &loader.RecordError{File: path, Record: -1, Err: err}
	}
	if !fi.IsDir() {
		return []string{path}, filepath.Dir(path), nil
	}
	batches, _ := filepath.Glob(filepath.Join(path, "data_batch_*.bin"))
	sort.Slice(batches, func(i, j int) bool { return batchNumber(batches[i]) < batchNumber(batches[j]) })
	if len(batches) > 0 {
		return batches, path, nil
	}
	for _, name := range []string{"train.bin", "test_batch.bin", "test.bin"} {
		p := filepath.Join(path, name)
		if _, err := os.Stat(p); err == nil {
			return []string{p}, path, nil
		}
	}
	return nil, "", &loader.RecordError{File: path, Record: -1, Err: fmt.Errorf("%w: no data_batch_N.bin, train.bin or test_batch.bin", fs.ErrNotExist)}
}

func batchNumber(p string) int {
	s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "data_batch_"), ".bin")
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1 << 30
	}
	return n
}

// cifarRecordSize infers the record size from the file size, with the
// file name as tie-breaker when the size fits both formats.
func cifarRecordSize(name string, size int64) (int, error) {
	fits10, fits100 := size%cifar10Record == 0, size%cifar100Record == 0
	switch {
	case size == 0:
		return 0, &loader.RecordError{File: name, Record: -1, Err: fmt.Errorf("%w: empty file", loader.ErrTruncated)}
	case fits10 && !fits100:
		return cifar10Record, nil
	case fits100 && !fits10:
		return cifar100Record, nil
	case fits10 && fits100:
		base := filepath.Base(name)
		if strings.HasPrefix(base, "data_batch") || base == "test_batch.bin" {
			return cifar10Record, nil
		}
		if base == "train.bin" || base == "test.bin" {
			return cifar100Record, nil
		}
		return 0, &loader.RecordError{File: name, Record: -1, Err: fmt.Errorf("%w: %d bytes fit both CIFAR-10 and CIFAR-100 records", loader.ErrCorrupt, size)}
	}
	return 0, &loader.RecordError{File: name, Record: size / cifar10Record, Err: fmt.Errorf(
		"%w: %d bytes is not a whole number of %d-byte (CIFAR-10) or %d-byte (CIFAR-100) records",
		loader.ErrTruncated, size, cifar10Record, cifar100Record)}
}

func cifarClasses(dir string, record int, coarse bool) []string {
	var meta string
	var n int
	switch {
	case record == cifar10Record:
		meta, n = "batches.meta.txt", 10
	case coarse:
		meta, n = "coarse_label_names.txt", 20
	default:
		meta, n = "fine_label_names.txt", 100
	}
	if names := readLines(filepath.Join(dir, meta)); len(names) == n {
		return names
	}
	if n == 10 {
		return append([]string(nil), cifar10Classes...)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return names
}

func readLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Len returns the number of records over all files.
func (c *source) Len() int64 { return c.n }

// Spec returns 32×32×3 U8 in CHW order, the on-disk layout.
func (c *source) Spec() augment.Spec {
	return augment.Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
}

// Classes returns the class names.
func (c *source) Classes() []string { return c.classes }

// String names the source as cifar:PATH.
func (c *source) String() string { return "cifar:" + c.path }

// file returns the file holding sample i, 0 ≤ i < Len().
func (c *source) file(i int64) *cifarFile {
	for k := len(c.files) - 1; k > 0; k-- {
		if i >= c.files[k].start {
			return &c.files[k]
		}
	}
	return &c.files[0]
}

// Name returns sample i's batch file and record in it, as FILE#RECORD.
func (c *source) Name(i int64) string {
	f := c.file(i)
	return f.path + "#" + strconv.FormatInt(i-f.start, 10)
}

// Sample returns a view of record i in the mapped file; scratch is unused.
func (c *source) Sample(i int64, _ []byte) (int32, []byte, error) {
	if i < 0 || i >= c.n {
		return 0, nil, &loader.RecordError{File: c.path, Record: i, Err: loader.ErrIndex}
	}
	f := c.file(i)
	r := i - f.start
	off := r * int64(c.record)
	rec := f.data[off : off+int64(c.record)]
	label := int32(rec[c.labelOff])
	if int(label) >= len(c.classes) {
		return 0, nil, &loader.RecordError{File: f.path, Record: r, Err: fmt.Errorf("%w: %d with %d classes", loader.ErrLabel, label, len(c.classes))}
	}
	return label, rec[c.record-cifarPixels:], nil
}

// Close unmaps every file.
func (c *source) Close() error {
	var errs []error
	for i := range c.files {
		errs = append(errs, mmap.Unmap(c.files[i].data))
		c.files[i].data = nil
	}
	return errors.Join(errs...)
}
