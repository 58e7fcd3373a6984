package tar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/mmap"
	"github.com/loaderd/loaderd/loader/format/internal/options"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/sampler"
)

func init() {
	loader.RegisterFormat("tar", func(spec string) (loader.Source, error) { return open(spec) })
}

// source reads images from one or more tar shards without extracting them.
// Each shard is indexed once at open (headers only) and then mapped
// read-only: a sample is a slice of the mapping, decoded into the worker's
// scratch, with no read and no copy. It is safe for concurrent use.
//
// The layouts and options are in the package documentation.
type source struct {
	path    string
	shards  []tarShard
	samples []tarSample
	classes []string
	dec     *imagedec.Pool
	max     int64           // maxbytes=: the largest member decoded
	order   *sampler.Shards // order=shards: the sampler's shard-shuffle order; nil: uniform

	// Remote shards (remote.go).
	set       *objstore.Set
	ctx       context.Context // ends at Close: ranged reads and fills
	stop      context.CancelFunc
	indexedBy []string // per remote shard: cache, sidecar or scan
}

type tarShard struct {
	path string
	data []byte       // the whole archive, mapped (a local file); nil for a remote shard
	rem  *remoteShard // an s3:// shard
}

type tarSample struct {
	name      string // member name
	shard     int32
	label     int32
	off, size int64
}

// open indexes the shards named by spec, "PATH[?OPTIONS]".
func open(spec string) (*source, error) {
	o, err := options.Parse("tar", spec, "size", "maxpixels", "resize", "maxbytes", "decoder", "layout", "root", "image", "label", "index", "order")
	if err != nil {
		return nil, err
	}
	h, w, maxPx, resize, err := o.Decode()
	if err != nil {
		return nil, err
	}
	backend, err := o.Backend()
	if err != nil {
		return nil, err
	}
	maxBytes, err := o.MaxBytes()
	if err != nil {
		return nil, err
	}
	index := o.Str("index", "auto")
	window, err := orderWindow(o)
	if err != nil {
		return nil, err
	}
	t := &source{path: o.Path, max: maxBytes}
	var members [][]tarMember
	switch {
	case index != "auto" && index != "scan" && index != "whole":
		err = o.Errorf("index=%s: want auto, scan or whole", index)
	case !objstore.IsURL(o.Path) && o.Get("index") != "":
		err = o.Errorf("index= applies to s3:// shards")
	case objstore.IsURL(o.Path) && index != "whole":
		members, err = t.openRemote(o, index)
	default:
		members, err = t.openLocal(o)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	for k, ms := range members {
		for _, m := range ms {
			if unsafeName(m.name) {
				t.Close()
				return nil, &loader.RecordError{File: t.shards[k].path + "(" + m.name + ")", Record: -1, Err: fmt.Errorf(
					"%w: the member name is absolute or has a .. element (it could pass for another class's member)", loader.ErrCorrupt)}
			}
		}
	}
	label := "." + strings.TrimPrefix(o.Str("label", "cls"), ".")
	layout := o.Str("layout", "")
	if layout == "" {
		layout = "folder"
		for _, ms := range members {
			for _, m := range ms {
				if strings.HasSuffix(m.name, label) {
					layout = "webdataset"
				}
			}
		}
	}
	switch layout {
	case "folder":
		err = t.indexFolder(members, o.Str("root", "\x00"))
	case "webdataset":
		err = t.indexWebDataset(members, strings.TrimPrefix(o.Str("image", ""), "."), label)
	default:
		err = o.Errorf("layout=%s: want folder or webdataset", layout)
	}
	if err == nil && len(t.samples) == 0 {
		err = &loader.RecordError{File: o.Path, Record: -1, Err: fmt.Errorf("%w: no image member", loader.ErrEmptyClass)}
	}
	if err == nil && h == 0 && !o.AnySize() {
		if t.samples[0].size > t.max {
			err = &loader.RecordError{File: t.name(0), Record: -1, Err: options.TooLarge(t.samples[0].size, t.max)}
		} else if data, bp, rerr := t.member(0); rerr != nil {
			err = &loader.RecordError{File: t.name(0), Record: -1, Err: rerr}
		} else {
			h, w, err = imagedec.Size(data, maxPx)
			release(bp)
			if err != nil {
				err = &loader.RecordError{File: t.name(0), Record: -1, Err: err}
			}
		}
	}
	if err == nil && window > 0 {
		t.order, err = sampler.NewShards(t.runs(), window)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	t.dec = imagedec.NewPool(h, w, maxPx, resize).WithBackend(backend)
	t.startFills()
	return t, nil
}

// openLocal maps and indexes local shards (and s3:// ones with
// index=whole, fetched whole into the cache first).
func (t *source) openLocal(o *options.Options) ([][]tarMember, error) {
	files, err := o.ShardFiles(".tar")
	if err != nil {
		return nil, err
	}
	members := make([][]tarMember, len(files))
	for k, name := range files {
		data, err := mmap.Map(name)
		if err != nil {
			return nil, &loader.RecordError{File: name, Record: -1, Err: err}
		}
		t.shards = append(t.shards, tarShard{path: name, data: data})
		if members[k], err = indexTar(bytes.NewReader(data), int64(len(data)), false); err != nil {
			return nil, &loader.RecordError{File: name, Record: -1, Err: err}
		}
	}
	return members, nil
}

// unsafeName reports whether a member name is absolute or has a ".."
// element. Nothing is extracted, but such a name means a careless or
// hostile archive: train/../../x/cat/0.jpg would otherwise become a sample
// of a class "..", and relabel every other one. Open refuses the archive,
// naming the member, rather than leave it out unseen.
func unsafeName(name string) bool {
	if strings.HasPrefix(name, "/") {
		return true
	}
	for _, e := range strings.Split(name, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// hiddenPath reports whether any element of a member name starts with '.'
// (macOS's ._ files, .DS_Store).
func hiddenPath(name string) bool {
	for _, e := range strings.Split(name, "/") {
		if strings.HasPrefix(e, ".") && e != "." && e != ".." {
			return true
		}
	}
	return false
}

// indexFolder orders the image members by class and path. root is
// "\x00" when not given: then it is the directory all images share.
func (t *source) indexFolder(members [][]tarMember, root string) error {
	var all []tarSample
	for k, ms := range members {
		for _, m := range ms {
			if hiddenPath(m.name) {
				continue
			}
			if !imagedec.IsImageName(m.name) {
				return &loader.RecordError{File: t.shards[k].path + "(" + m.name + ")", Record: -1, Err: fmt.Errorf("%w %q", imagedec.ErrExtension, path.Ext(m.name))}
			}
			all = append(all, tarSample{name: path.Clean(m.name), shard: int32(k), off: m.off, size: m.size})
		}
	}
	if root == "\x00" {
		root = commonDir(all)
	}
	root = strings.Trim(path.Clean("/"+root), "/")
	prefix := root + "/"
	if root == "" {
		prefix = ""
	}
	class := map[string]bool{}
	rel := make([]string, len(all))
	for i := range all {
		r, ok := strings.CutPrefix(all[i].name, prefix)
		c, _, inDir := strings.Cut(r, "/")
		if !ok || !inDir {
			return &loader.RecordError{File: t.shards[all[i].shard].path + "(" + all[i].name + ")", Record: -1,
				Err: fmt.Errorf("%w: member is not in a class directory under root %q (set root=)", loader.ErrEmptyClass, root)}
		}
		class[c] = true
		rel[i] = r
	}
	for c := range class {
		t.classes = append(t.classes, c)
	}
	sort.Strings(t.classes)
	ids := make(map[string]int32, len(t.classes))
	for i, c := range t.classes {
		ids[c] = int32(i)
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
		c, _, _ := strings.Cut(rel[i], "/")
		all[i].label = ids[c]
	}
	// The class is rel's first element, so path order is class order.
	sort.SliceStable(order, func(a, b int) bool { return rel[order[a]] < rel[order[b]] })
	t.samples = make([]tarSample, len(all))
	for i, j := range order {
		t.samples[i] = all[j]
	}
	return nil
}

// commonDir is the longest directory every sample's path starts with.
func commonDir(all []tarSample) string {
	if len(all) == 0 {
		return ""
	}
	common := strings.Split(path.Dir(all[0].name), "/")
	for _, s := range all[1:] {
		d := strings.Split(path.Dir(s.name), "/")
		n := 0
		for n < len(common) && n < len(d) && common[n] == d[n] {
			n++
		}
		common = common[:n]
	}
	if len(common) == 1 && common[0] == "." {
		return ""
	}
	return strings.Join(common, "/")
}

// indexWebDataset groups members by key (the name up to the first '.' of
// its last element) within each shard.
func (t *source) indexWebDataset(members [][]tarMember, imageExt, labelExt string) error {
	maxLabel := int32(-1)
	for k, ms := range members {
		shard := &t.shards[k]
		keys := map[string]int{} // key → index in t.samples
		var order []string       // keys in member order
		haveLabel := map[string]bool{}
		for _, m := range ms {
			if hiddenPath(m.name) {
				continue
			}
			dir, base := path.Split(m.name)
			stem, ext, _ := strings.Cut(base, ".")
			key, ext := dir+stem, "."+ext
			j, seen := keys[key]
			if !seen {
				j = len(t.samples)
				keys[key] = j
				order = append(order, key)
				t.samples = append(t.samples, tarSample{shard: int32(k), label: -1, size: -1})
			}
			s := &t.samples[j]
			where := shard.path + "(" + m.name + ")"
			switch {
			case strings.EqualFold(ext, labelExt):
				v, err := strconv.ParseInt(string(bytes.TrimSpace(labelBytes(shard, m))), 10, 32)
				if err != nil || v < 0 || m.size > smallMember {
					return &loader.RecordError{File: where, Record: int64(j), Err: fmt.Errorf("%w: label field is not a small non-negative integer", loader.ErrLabel)}
				}
				s.label, haveLabel[key] = int32(v), true
				maxLabel = max(maxLabel, s.label)
			case imageExt == "" && imagedec.IsImageName(m.name) || imageExt != "" && strings.EqualFold(ext, "."+imageExt):
				if s.size >= 0 {
					return &loader.RecordError{File: where, Record: int64(j), Err: fmt.Errorf("%w: sample %q has two images (choose one with image=EXT)", loader.ErrCorrupt, key)}
				}
				s.name, s.off, s.size = m.name, m.off, m.size
			}
		}
		for _, key := range order {
			j := keys[key]
			s := &t.samples[j]
			switch {
			case s.size < 0:
				return &loader.RecordError{File: shard.path + "(" + key + ")", Record: int64(j), Err: fmt.Errorf("%w: sample %q has no image", loader.ErrCorrupt, key)}
			case !haveLabel[key]:
				return &loader.RecordError{File: shard.path + "(" + s.name + ")", Record: int64(j), Err: fmt.Errorf("%w: sample %q has no %s label", loader.ErrLabel, key, labelExt)}
			}
		}
	}
	for i := int32(0); i <= maxLabel; i++ {
		t.classes = append(t.classes, strconv.Itoa(int(i)))
	}
	return nil
}

// member returns sample i's bytes: a slice of the mapped shard, or for a
// remote shard what the read holds (bp) until release.
func (t *source) member(i int64) (data []byte, bp lease, err error) {
	s := &t.samples[i]
	sh := &t.shards[s.shard]
	if sh.data != nil {
		return sh.data[s.off : s.off+s.size], lease{}, nil
	}
	if sh.rem == nil || t.ctx.Err() != nil {
		return nil, lease{}, loader.ErrClosed
	}
	return t.readRemote(sh, s)
}

// readErr names sample i in an error of member: the dataset for a closed
// source, as for a local one, else the member.
func (t *source) readErr(i int64, err error) error {
	if errors.Is(err, loader.ErrClosed) {
		return &loader.RecordError{File: t.path, Record: i, Err: err}
	}
	return &loader.RecordError{File: t.name(i), Record: -1, Err: err}
}

// labelBytes is a WebDataset label member's text (nil when too long).
func labelBytes(sh *tarShard, m tarMember) []byte {
	switch {
	case m.size > smallMember:
		return nil
	case m.small != nil:
		return m.small
	}
	return sh.data[m.off : m.off+m.size]
}

// name returns "SHARD(MEMBER)", the way ar(1) names archive members.
func (t *source) name(i int64) string {
	s := &t.samples[i]
	return t.shards[s.shard].path + "(" + s.name + ")"
}

// Name returns sample i's member, as SHARD(MEMBER).
func (t *source) Name(i int64) string { return t.name(i) }

// Len returns the number of samples.
func (t *source) Len() int64 { return int64(len(t.samples)) }

// Spec returns H×W×3 U8 HWC.
func (t *source) Spec() augment.Spec { return t.dec.Spec() }

// Classes returns the class names.
func (t *source) Classes() []string { return t.classes }

// Decoder implements loader.DecoderNamer: the JPEG decoder (decoder=).
func (t *source) Decoder() string { return t.dec.DecoderName() }

// String names the source as tar:PATH.
func (t *source) String() string { return "tar:" + t.path }

// Label returns the label of sample i without decoding it.
func (t *source) Label(i int64) (int32, error) {
	if i < 0 || i >= t.Len() {
		return 0, &loader.RecordError{File: t.path, Record: i, Err: loader.ErrIndex}
	}
	return t.samples[i].label, nil
}

// Sample decodes sample i from the mapped shard into scratch.
func (t *source) Sample(i int64, scratch []byte) (int32, []byte, error) {
	if i < 0 || i >= t.Len() {
		return 0, nil, &loader.RecordError{File: t.path, Record: i, Err: loader.ErrIndex}
	}
	if size := t.samples[i].size; size > t.max {
		return 0, nil, &loader.RecordError{File: t.name(i), Record: -1, Err: options.TooLarge(size, t.max)}
	}
	if t.dec.Spec().H == 0 { // size=any: at the image's own size
		label, pix, _, _, _, err := t.SampleSized(i, scratch, nil)
		return label, pix, err
	}
	data, bp, err := t.member(i)
	if err != nil {
		return 0, nil, t.readErr(i, err)
	}
	pix, err := t.dec.Decode(data, scratch)
	release(bp)
	if err != nil {
		return 0, nil, &loader.RecordError{File: t.name(i), Record: -1, Err: err}
	}
	return t.samples[i].label, pix, nil
}

// Close unmaps the shards, and stops remote reads and fills.
func (t *source) Close() error {
	var errs []error
	if t.stop != nil {
		t.stop()
	}
	if t.set != nil {
		errs = append(errs, t.set.Close()) // waits for the fills
	}
	for i := range t.shards {
		errs = append(errs, mmap.Unmap(t.shards[i].data))
		t.shards[i].data = nil
		if rem := t.shards[i].rem; rem != nil {
			if m := rem.mapped.Swap(nil); m != nil {
				errs = append(errs, mmap.Unmap(*m))
			}
		}
	}
	return errors.Join(errs...)
}
