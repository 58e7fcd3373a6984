package tar

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
)

// fieldShards writes two WebDataset shards of 6 samples each: a PNG, a
// .cls, a .txt caption, a .json for even samples only, and a .tags label
// set of one to three classes; it returns their directory.
func fieldShards(t *testing.T) string {
	dir := t.TempDir()
	for k := range 2 {
		var ms []entry
		for i := range 6 {
			key := fmt.Sprintf("s%d/%02d", k, i)
			ms = append(ms, entry{name: key + ".png", data: flatPNG(t, color.NRGBA{R: uint8(40 * i), G: uint8(100 * k)})},
				entry{name: key + ".cls", data: []byte(fmt.Sprint(i % 3))},
				entry{name: key + ".txt", data: []byte(fmt.Sprintf("caption %d/%d", k, i))})
			if i%2 == 0 {
				ms = append(ms, entry{name: key + ".json", data: []byte(fmt.Sprintf(`{"k":%d}`, i))})
			}
			ms = append(ms, entry{name: key + ".tags", data: []byte(tagsOf(k, i))})
		}
		writeTar(t, filepath.Join(dir, fmt.Sprintf("shard-%d.tar", k)), ms...)
	}
	return dir
}

// tagsOf is sample (k, i)'s label set as text, separated as WebDataset
// writers do: spaces, commas, a newline.
func tagsOf(k, i int) string {
	switch i % 3 {
	case 0:
		return fmt.Sprint(i + k)
	case 1:
		return fmt.Sprintf("%d,%d\n", i, 6)
	}
	return fmt.Sprintf("%d %d  %d", 2, i, k)
}

func TestFields(t *testing.T) {
	dir := fieldShards(t)
	s := openT(t, dir+"?size=8x8&fields=txt,.json")
	if got := s.FieldNames(); !slices.Equal(got, []string{"txt", "json"}) || s.MultiLabel() {
		t.Fatalf("FieldNames %q, MultiLabel %v", got, s.MultiLabel())
	}
	for i := range s.Len() {
		k, j := int(i/6), int(i%6)
		txt, ok, err := s.AppendField(nil, i, 0)
		if err != nil || !ok || string(txt) != fmt.Sprintf("caption %d/%d", k, j) {
			t.Errorf("sample %d txt: %q %v %v", i, txt, ok, err)
		}
		js, ok, err := s.AppendField([]byte("x"), i, 1)
		want := "x"
		if j%2 == 0 {
			want += fmt.Sprintf(`{"k":%d}`, j)
		}
		if err != nil || ok != (j%2 == 0) || string(js) != want {
			t.Errorf("sample %d json: %q %v %v", i, js, ok, err)
		}
		if l, _ := s.Label(i); l != int32(j%3) {
			t.Errorf("sample %d label %d, want %d", i, l, j%3)
		}
	}
}

// TestFieldIsLabel: a field may be the label member too, its bytes
// carried and its value the label.
func TestFieldIsLabel(t *testing.T) {
	s := openT(t, fieldShards(t)+"?size=8x8&fields=cls")
	for i := range s.Len() {
		v, ok, err := s.AppendField(nil, i, 0)
		if l, _ := s.Label(i); err != nil || !ok || string(v) != fmt.Sprint(i%6%3) || l != int32(i%6%3) {
			t.Errorf("sample %d: field %q %v %v, label %d", i, v, ok, err, l)
		}
	}
}

func TestLabelSets(t *testing.T) {
	dir := fieldShards(t)
	s := openT(t, dir+"?size=8x8&labels=tags")
	if !s.MultiLabel() || len(s.FieldNames()) != 0 || len(s.Classes()) != 7 {
		t.Fatalf("MultiLabel %v, fields %q, classes %q", s.MultiLabel(), s.FieldNames(), s.Classes())
	}
	for i := range s.Len() {
		k, j := int(i/6), int(i%6)
		var want []int32
		for _, f := range strings.FieldsFunc(tagsOf(k, j), func(r rune) bool { return r == ' ' || r == ',' || r == '\n' }) {
			var c int32
			fmt.Sscan(f, &c)
			want = append(want, c)
		}
		got, err := s.AppendLabels(nil, i)
		if l, _ := s.Label(i); err != nil || !slices.Equal(got, want) || l != want[0] {
			t.Errorf("sample %d: set %v label %d (%v), want %v", i, got, l, err, want)
		}
	}
}

func TestFieldErrors(t *testing.T) {
	dir := fieldShards(t)
	s := openT(t, dir+"?size=8x8&fields=txt&maxfieldbytes=11")
	_, _, err := s.AppendField(nil, 10, 0) // "caption 1/4", 11 bytes
	if err != nil {
		t.Fatalf("an 11-byte field under maxfieldbytes=11: %v", err)
	}
	s = openT(t, dir+"?size=8x8&fields=txt&maxfieldbytes=10")
	_, _, err = s.AppendField(nil, 10, 0)
	if !errors.Is(err, loader.ErrFieldTooLarge) || !strings.Contains(err.Error(), "shard-1.tar(s1/04.txt)") {
		t.Fatalf("an 11-byte field over maxfieldbytes=10: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.tar")
	writeTar(t, bad, entry{name: "a.png", data: flatPNG(t, color.NRGBA{})}, entry{name: "a.tags", data: []byte("1 x")})
	for _, c := range []struct{ spec, want string }{
		{"tar:" + dir + "?fields=txt,txt", "distinct"},
		{"tar:" + dir + "?maxfieldbytes=0", "maxfieldbytes=0"},
		{"tar:" + dir + "?layout=folder&fields=txt", "webdataset layout"},
		{"tar:" + bad + "?labels=tags", "bad.tar(a.tags)"},
	} {
		if s, err := loader.Open(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: %v, want an error with %q", c.spec, err, c.want)
		}
	}
}

// TestFieldsWorkers: the loader delivers each sample's fields and label
// set beside it, the same with 1 worker as with 3, with the order shuffled.
func TestFieldsWorkers(t *testing.T) {
	dir := fieldShards(t)
	type row struct {
		idx       int64
		txt, json string
		hasJSON   bool
		set       string
	}
	run := func(workers int) []row {
		src, err := loader.Open("tar:" + dir + "?size=8x8&fields=txt,json&labels=tags")
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		pipe, err := augment.NewPipeline(src.Spec())
		if err != nil {
			t.Fatal(err)
		}
		pool := loader.NewPool(workers)
		defer pool.Close()
		l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: 7, Shuffle: true, BatchSize: 5, Epochs: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		fs, _ := loader.As[loader.FieldSource](src)
		var rows []row
		for {
			b, err := l.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for k := range b.Len() {
				r := row{idx: b.Indices[k], txt: string(b.Field(0, k)), json: string(b.Field(1, k)), hasJSON: b.Present(1, k), set: fmt.Sprint(b.LabelSet(k))}
				txt, _, _ := fs.AppendField(nil, b.Indices[k], 0)
				set, _ := fs.AppendLabels(nil, b.Indices[k])
				if r.txt != string(txt) || r.set != fmt.Sprint(set) || b.Labels[k] != set[0] {
					t.Errorf("batch %d sample %d: %+v, label %d; want txt %q set %v", b.Index, k, r, b.Labels[k], txt, set)
				}
				rows = append(rows, r)
			}
			b.Release()
		}
		return rows
	}
	one, three := run(1), run(3)
	if len(one) != 2*12 || !slices.Equal(one, three) {
		t.Fatalf("1 worker: %v\n3 workers: %v", one, three)
	}
}

// TestFieldsFingerprint: the fields and label sets are part of what a
// dataset is, so pools of daemons serving other ones are told apart.
func TestFieldsFingerprint(t *testing.T) {
	dir := fieldShards(t)
	seen := map[string]string{}
	for _, opts := range []string{"", "&fields=txt", "&fields=json", "&fields=txt&maxfieldbytes=99", "&labels=tags", "&fields=cls"} {
		src, err := loader.Open("tar:" + dir + "?size=8x8" + opts)
		if err != nil {
			t.Fatal(err)
		}
		fp, err := loader.Fingerprint(src)
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
		seen[opts] = fp
	}
	if seen[""] == seen["&fields=txt"] || seen["&fields=txt"] == seen["&fields=json"] || seen[""] == seen["&labels=tags"] ||
		seen["&fields=txt"] != seen["&fields=txt&maxfieldbytes=99"] || seen["&fields=cls"] == seen[""] {
		t.Errorf("fingerprints %v", seen)
	}
}
