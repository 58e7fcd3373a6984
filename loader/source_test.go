package loader_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/cifar"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

func TestOpenUnknownFormat(t *testing.T) {
	_, err := loader.Open("jpegxl:/tmp/x")
	if !errors.Is(err, loader.ErrUnknownFormat) {
		t.Fatalf("got %v, want ErrUnknownFormat", err)
	}
	for _, bad := range []string{"synthetic:0", "synthetic:-3", "synthetic:abc", "cifar:"} {
		if src, err := loader.Open(bad); err == nil {
			src.Close()
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

func TestOpenHoldout(t *testing.T) {
	train, err := loader.Open("synthetic:1000?holdout=20")
	if err != nil {
		t.Fatal(err)
	}
	val, err := loader.Open("synthetic:1000?holdout=20&part=val")
	if err != nil {
		t.Fatal(err)
	}
	if train.Len()+val.Len() != 1000 || val.Len() != 200 {
		t.Fatalf("train %d + val %d, want 800 + 200", train.Len(), val.Len())
	}
	for _, bad := range []string{"synthetic:10?part=val", "synthetic:10?holdout=x", "synthetic:10?holdout=1&part=test",
		"synthetic:10?holdout=0", "synthetic:10?holdout=1.5", "synthetic:10?holdout=-0.1", "synthetic:10?holdout=NaN"} {
		if _, err := loader.Open(bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	// A fraction holds out that share of each class: 10% of 1,000 in 10
	// classes of about 100.
	train, err = loader.Open("synthetic:1000?holdout=0.1")
	if err != nil {
		t.Fatal(err)
	}
	val, err = loader.Open("synthetic:1000?holdout=0.1&part=val")
	if err != nil {
		t.Fatal(err)
	}
	if train.Len()+val.Len() != 1000 || val.Len() < 95 || val.Len() > 105 || val.String() != "synthetic:1000?holdout=0.1&part=val" {
		t.Fatalf("holdout=0.1: train %d + val %d (%s)", train.Len(), val.Len(), val)
	}
}

// nilSource is the source of the "typednil" format, whose opener fails
// with a nil *nilSource in the Source, as an opener written
// `return open(path)` does.
type nilSource struct{ loader.Source }

func init() {
	loader.RegisterFormat("typednil", func(string) (loader.Source, error) {
		var s *nilSource
		return s, errors.New("no such dataset")
	})
}

// TestOpenErrorIsNilSource: a failed Open returns a nil interface, not an
// interface holding a nil pointer that would panic on Close. (The tar and
// folder formats' tests check theirs.)
func TestOpenErrorIsNilSource(t *testing.T) {
	for _, spec := range []string{"typednil:x", "cifar:testdata/nope", "cifar100-coarse:testdata/nope"} {
		src, err := loader.Open(spec)
		if err == nil || src != nil {
			t.Errorf("Open(%q) = %v, %v; want nil and an error", spec, src, err)
		}
	}
}

func TestSplitSynthetic(t *testing.T) {
	src := synthetic.New(3000, 0)
	train, err := loader.Split(src, 50, false)
	if err != nil {
		t.Fatal(err)
	}
	val, err := loader.Split(src, 50, true)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len()+val.Len() != 3000 || val.Len() != 500 {
		t.Fatalf("parts of %d and %d samples", train.Len(), val.Len())
	}
	perClass := map[int32]int{}
	scratch := make([]byte, src.Spec().Bytes())
	for i := range val.Len() {
		l, _, err := val.Sample(i, scratch)
		if err != nil {
			t.Fatal(err)
		}
		perClass[l]++
	}
	for c := range int32(10) {
		if perClass[c] != 50 {
			t.Errorf("class %d has %d validation samples, want 50", c, perClass[c])
		}
	}
	if got := val.String(); got != "synthetic:3000?holdout=50&part=val" {
		t.Errorf("String() = %q", got)
	}
}

// TestFormats: the formats are those the imported packages registered,
// sorted (arrow and tar for fault_test.go).
func TestFormats(t *testing.T) {
	want := []string{"arrow", "cifar", "cifar100-coarse", "synthetic", "tar", "typednil"}
	if got := loader.Formats(); !slices.Equal(got, want) {
		t.Fatalf("Formats() = %v, want %v", got, want)
	}
}
