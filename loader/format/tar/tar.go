package tar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

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
// scratch by the embedded imagedec.Source, with no read and no copy; the
// source is the imagedec.Records it reads, and adds the shard order and
// prefetching. It is safe for concurrent use.
//
// The layouts and options are in the package documentation.
type source struct {
	*imagedec.Source
	path    string
	shards  []tarShard
	samples []tarSample
	classes []string
	order   *sampler.Shards // order=shards: the sampler's shard-shuffle order; nil: uniform
	extras  wdsExtras       // fields=, labels= (fields.go)

	// Remote shards (remote.go).
	set       *objstore.Set
	ctx       context.Context // ends at Close: ranged reads and fills
	stop      context.CancelFunc
	indexedBy []string   // per remote shard: cache, sidecar or scan
	dropMu    sync.Mutex // one sidecar drop at a time (dropSidecar)

	// layout lays out the samples and classes of the shards' members
	// (indexFolder or indexWebDataset with the options), into a new
	// source: at open, and again when a sidecar is dropped.
	layout func(members [][]tarMember) (*source, error)
}

type tarShard struct {
	path string
	data []byte       // the whole archive, mapped (a local file); nil for a remote shard
	rem  *remoteShard // an s3:// shard
	size int64        // the archive's bytes, kept after Close for DigestRecords
}

type tarSample struct {
	name      string // member name
	shard     int32
	label     int32
	off, size int64
	fields    []tarField // fields= members, by field; nil: none of them (fields.go)
	set       []int32    // labels=: the sample's classes
}

// open indexes the shards named by spec, "PATH[?OPTIONS]".
func open(spec string) (*source, error) {
	o, err := options.Parse("tar", spec, "size", "maxpixels", "resize", "maxbytes", "decoder", "exact", "layout", "root", "image", "label", "index", "order", "fields", "maxfieldbytes", "labels")
	if err != nil {
		return nil, err
	}
	opt, err := o.Images()
	if err != nil {
		return nil, err
	}
	index := o.Str("index", "auto")
	window, err := orderWindow(o)
	if err != nil {
		return nil, err
	}
	t := &source{path: o.Path}
	if t.extras, err = extrasOptions(o); err != nil {
		return nil, err
	}
	var members [][]tarMember
	switch {
	case index != "auto" && index != "scan" && index != "whole":
		err = o.Errorf("index=%s: want auto, scan or whole", index)
	case !objstore.IsURL(o.Path) && o.Get("index") != "":
		err = o.Errorf("index= applies to s3:// shards")
	case objstore.IsURL(o.Path) && index != "whole" && len(t.extras.fields) > 0:
		err = o.Errorf("fields= with s3:// shards needs index=whole")
	case objstore.IsURL(o.Path) && index != "whole":
		members, err = t.openRemote(o, index)
		opt.Probe = 1 // each member's header is a GET: size=any must be said
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
	image, root := strings.TrimPrefix(o.Str("image", ""), "."), o.Str("root", "\x00")
	layout := o.Str("layout", "")
	if layout == "" {
		layout = "folder"
		for _, ms := range members {
			for _, m := range ms {
				if strings.HasSuffix(m.name, label) || t.extras.labels != "" && strings.HasSuffix(m.name, t.extras.labels) {
					layout = "webdataset"
				}
			}
		}
	}
	t.layout = func(members [][]tarMember) (*source, error) {
		l := &source{shards: t.shards, extras: t.extras}
		if layout == "folder" {
			return l, l.indexFolder(members, root)
		}
		return l, l.indexWebDataset(members, image, label)
	}
	if layout != "folder" && layout != "webdataset" {
		err = o.Errorf("layout=%s: want folder or webdataset", layout)
	} else if layout == "folder" && (len(t.extras.fields) > 0 || t.extras.labels != "") {
		err = o.Errorf("fields= and labels= apply to the webdataset layout")
	} else {
		var l *source
		l, err = t.layout(members)
		t.samples, t.classes = l.samples, l.classes
	}
	if err == nil && len(t.samples) == 0 {
		err = &loader.RecordError{File: o.Path, Record: -1, Err: fmt.Errorf("%w: no image member", loader.ErrEmptyClass)}
	}
	if err == nil {
		t.Source, err = imagedec.NewSource(t, opt) // without size=, probes the first members
	}
	if err == nil && window > 0 {
		t.order, err = sampler.NewShards(t.runs(), window)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
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
		t.shards = append(t.shards, tarShard{path: name, data: data, size: int64(len(data))})
		if members[k], err = indexTar(bytes.NewReader(data), int64(len(data)), false); err != nil {
			return nil, &loader.RecordError{File: name, Record: -1, Err: err}
		}
	}
	return members, nil
}

// member returns sample i's bytes: a slice of the mapped shard, or for a
// remote shard what the read holds until it is released.
func (t *source) member(i int64) (data []byte, hold imagedec.Hold, err error) {
	s := &t.samples[i]
	sh := &t.shards[s.shard]
	if sh.data != nil {
		return sh.data[s.off : s.off+s.size], nil, nil
	}
	if sh.rem == nil || t.ctx.Err() != nil {
		return nil, nil, loader.ErrClosed
	}
	return t.readRemote(sh, i)
}

// sample returns sample i as reads go: the entry the open laid out, or in
// a remote shard whose sidecar was dropped (dropSidecar), the entry its
// own headers give. A sample stays in its shard.
func (t *source) sample(i int64) tarSample {
	s := &t.samples[i]
	if rem := t.shards[s.shard].rem; rem != nil {
		if idx := rem.idx.Load(); idx != nil && idx.patch != nil {
			if p, ok := idx.patch[i]; ok {
				return p
			}
		}
	}
	return *s
}

// name returns "SHARD(MEMBER)", the way ar(1) names archive members.
func (t *source) name(i int64) string {
	s := t.sample(i)
	return t.shards[s.shard].path + "(" + s.name + ")"
}

// Len implements imagedec.Records (and loader.Source): the samples.
func (t *source) Len() int64 { return int64(len(t.samples)) }

// Classes implements imagedec.Records (and loader.Source).
func (t *source) Classes() []string { return t.classes }

// LabelOf implements imagedec.Records.
func (t *source) LabelOf(i int64) int32 { return t.sample(i).label }

// Where implements imagedec.Records: the member, as SHARD(MEMBER).
func (t *source) Where(i int64) (string, int64) { return t.name(i), -1 }

// SizeOf implements imagedec.Records: the member's size, from the index.
func (t *source) SizeOf(i int64) int64 { return t.sample(i).size }

// Encoded implements imagedec.Records: member i's bytes (member).
func (t *source) Encoded(i int64) ([]byte, imagedec.Hold, error) { return t.member(i) }

// Close implements imagedec.Records (and loader.Source): it unmaps the
// shards, and stops remote reads and fills.
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

var (
	_ imagedec.Records    = (*source)(nil)
	_ loader.SizedSource  = (*source)(nil)
	_ loader.ShardOrderer = (*source)(nil)
	_ loader.Prefetcher   = (*source)(nil)
)
