package tar

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
)

// The layouts: which members are samples, their classes and order.

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
			if ok, err := t.extra(s, shard, m, ext, j); ok {
				if err != nil {
					return err
				}
				continue
			}
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
			case t.extras.labels != "":
				if s.set == nil {
					return &loader.RecordError{File: shard.path + "(" + s.name + ")", Record: int64(j), Err: fmt.Errorf("%w: sample %q has no %s label set", loader.ErrLabel, key, t.extras.labels)}
				}
				s.label = s.set[0] // what single-label clients see
				for _, c := range s.set {
					maxLabel = max(maxLabel, c)
				}
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
