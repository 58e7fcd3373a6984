package folder

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/options"
	"github.com/loaderd/loaderd/loader/imagedec"
)

func init() {
	loader.RegisterFormat("folder", func(spec string) (loader.Source, error) { return open(spec) })
}

// source reads an image folder laid out as torchvision's ImageFolder:
// ROOT/CLASS/…/FILE, classes in sorted order, samples ordered by class and
// then by path. Symbolic links to class directories are followed, links
// to directories inside a class are not. Hidden files and directories (".name") and plain files
// directly in ROOT are not part of the layout and are ignored; any other
// file must have an image extension (.jpg .jpeg .jpe .png .gif .bmp .tif
// .tiff .webp), and every class must hold an image. Only regular files
// (or links to them) are read: a FIFO, device or socket in the tree fails
// the open, and one that appears later fails its sample, without ever
// blocking a worker. Images are read and decoded on each Sample into the
// worker's scratch by the embedded imagedec.Source, which reads the
// source as its imagedec.Records. It is safe for concurrent use.
//
// The options are in the package documentation.
type source struct {
	*imagedec.Source
	root     string
	classes  []string
	files    []string // relative to root
	labels   []int32
	maxBytes int64     // maxbytes=: the largest file read
	bufs     sync.Pool // *fileBuf, one per worker in practice
}

// open indexes the folder named by spec, "ROOT[?OPTIONS]".
func open(spec string) (*source, error) {
	o, err := options.Parse("folder", spec, "size", "maxpixels", "resize", "maxbytes", "decoder", "exact")
	if err != nil {
		return nil, err
	}
	opt, err := o.Images()
	if err != nil {
		return nil, err
	}
	f := &source{root: o.Path, maxBytes: opt.MaxBytes}
	if err := f.index(); err != nil {
		return nil, err
	}
	if f.Source, err = imagedec.NewSource(f, opt); err != nil { // without size=, probes the first images
		return nil, err
	}
	return f, nil
}

// index walks the class directories in sorted order.
func (f *source) index() error {
	ents, err := os.ReadDir(f.root) // sorted by name
	if err != nil {
		return &loader.RecordError{File: f.root, Record: -1, Err: err}
	}
	for _, e := range ents {
		isDir, walkRoot := e.IsDir(), filepath.Join(f.root, e.Name())
		if e.Type()&fs.ModeSymlink != 0 { // a linked class directory counts, as in torchvision
			fi, err := os.Stat(walkRoot)
			isDir = err == nil && fi.IsDir()
			walkRoot += string(filepath.Separator) // so that WalkDir follows the link
		}
		if !isDir || hidden(e.Name()) {
			continue
		}
		label := int32(len(f.classes))
		f.classes = append(f.classes, e.Name())
		before := len(f.files)
		dir := filepath.Join(f.root, e.Name())
		// WalkDir visits entries in lexical order: paths come out sorted.
		err := filepath.WalkDir(walkRoot, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if hidden(d.Name()) && p != walkRoot {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			// A link is checked when read, on the file it leads to.
			if t := d.Type(); !t.IsRegular() && t&fs.ModeSymlink == 0 {
				return &loader.RecordError{File: p, Record: -1, Err: notRegular(t)}
			}
			if !imagedec.IsImageName(p) {
				return &loader.RecordError{File: p, Record: -1, Err: fmt.Errorf("%w %q", imagedec.ErrExtension, filepath.Ext(p))}
			}
			rel, _ := filepath.Rel(f.root, p)
			f.files = append(f.files, rel)
			f.labels = append(f.labels, label)
			return nil
		})
		if err != nil {
			var re *loader.RecordError
			if errors.As(err, &re) {
				return err
			}
			return &loader.RecordError{File: dir, Record: -1, Err: err}
		}
		if len(f.files) == before {
			return &loader.RecordError{File: dir, Record: -1, Err: fmt.Errorf("%w: class %q has no image", loader.ErrEmptyClass, e.Name())}
		}
		// WalkDir puts "a/x.jpg" before "a.jpg"; the tar format sorts the
		// same paths bytewise, and the two must agree.
		sort.Strings(f.files[before:])
	}
	if len(f.classes) == 0 {
		return &loader.RecordError{File: f.root, Record: -1, Err: fmt.Errorf("%w: no class directory (want ROOT/CLASS/FILE)", loader.ErrEmptyClass)}
	}
	return nil
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") }

// Len implements imagedec.Records (and loader.Source): the images.
func (f *source) Len() int64 { return int64(len(f.files)) }

// Classes implements imagedec.Records (and loader.Source): the class
// directory names, sorted.
func (f *source) Classes() []string { return f.classes }

// Close implements imagedec.Records (and loader.Source): nothing to do,
// files are opened per sample.
func (f *source) Close() error { return nil }

// Path returns the path of image i.
func (f *source) Path(i int64) string { return filepath.Join(f.root, f.files[i]) }

// LabelOf implements imagedec.Records.
func (f *source) LabelOf(i int64) int32 { return f.labels[i] }

// Where implements imagedec.Records: the image's path.
func (f *source) Where(i int64) (string, int64) { return f.Path(i), -1 }

// SizeOf implements imagedec.Records: unknown before the file is opened
// (Encoded checks maxbytes= on the file it opened).
func (f *source) SizeOf(int64) int64 { return -1 }

// Encoded implements imagedec.Records: image i's file, read into a pooled
// buffer that the hold gives back.
func (f *source) Encoded(i int64) ([]byte, imagedec.Hold, error) {
	b, ok := f.bufs.Get().(*fileBuf)
	if !ok {
		b = &fileBuf{b: make([]byte, 0, 64<<10), pool: &f.bufs}
	}
	data, err := readFileInto(f.Path(i), &b.b, f.maxBytes)
	if err != nil {
		b.Release()
		return nil, nil, err
	}
	return data, b, nil
}

// fileBuf is a file buffer of the source's pool (imagedec.Hold).
type fileBuf struct {
	b    []byte
	pool *sync.Pool
}

// Release implements imagedec.Hold: the buffer goes back to the pool.
func (b *fileBuf) Release() { b.pool.Put(b) }

// readFileInto reads the regular file name, of at most limit bytes, into
// *buf, growing it as needed. It opens before it checks, and checks the
// file it opened (not the path, which a link or a rename could change in
// between): O_NONBLOCK makes opening a FIFO return at once instead of
// waiting for a writer (on a regular file it changes nothing), and fstat
// then refuses anything but a regular file before a byte is read.
func readFileInto(name string, buf *[]byte, limit int64) ([]byte, error) {
	fh, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	if fi.Size() > limit {
		return nil, imagedec.TooLarge(fi.Size(), limit)
	}
	b := (*buf)[:0]
	if int64(cap(b)) <= fi.Size() { // room for the file and the EOF check
		b = make([]byte, 0, fi.Size()+512)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := fh.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit { // it grew since the Stat
			return nil, imagedec.TooLarge(int64(len(b)), limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	*buf = b
	return b, nil
}

// notRegular is the error for a file of mode m, which is not regular.
func notRegular(m fs.FileMode) error {
	kind := "an irregular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	case m.IsDir():
		kind = "a directory"
	}
	return fmt.Errorf("%w: %s", loader.ErrNotRegular, kind)
}

var (
	_ imagedec.Records   = (*source)(nil)
	_ loader.SizedSource = (*source)(nil)
)
