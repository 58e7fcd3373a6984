package server

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

func TestGetSamples(t *testing.T) {
	ctx := context.Background()
	corrupt := testSource{n: 64, bad: 5, badErr: &loader.RecordError{File: "shard-0.bin", Record: 5, Err: loader.ErrCorrupt}}
	srv, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}), testDataset("corrupt", corrupt))
	many := make([]int64, maxGetSamples+1)
	for _, c := range []struct {
		name  string
		req   *pb.GetSamplesRequest
		code  codes.Code
		msg   string                                       // in the error
		check func(t *testing.T, r *pb.GetSamplesResponse) // of an OK answer
	}{
		{name: "raw", req: &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{3, 0, 63, 3}}, check: func(t *testing.T, r *pb.GetSamplesResponse) {
			if r.Dtype != pb.DType_DTYPE_U8 || r.Layout != pb.Layout_LAYOUT_HWC || r.Augment != "" || r.Params != nil || len(r.Samples) != 4 {
				t.Fatalf("got %v %v %q %v, %d samples", r.Dtype, r.Layout, r.Augment, r.Params, len(r.Samples))
			}
			for k, i := range []int64{3, 0, 63, 3} {
				s := r.Samples[k]
				if s.Index != i || s.Label != int32(i%2) || len(s.Shape) != 3 || s.Shape[0] != 8 || s.Shape[1] != 8 || s.Shape[2] != 3 ||
					!bytes.Equal(s.Data, bytes.Repeat([]byte{byte(i)}, 8*8*3)) {
					t.Fatalf("sample %d: index %d label %d shape %v, %d bytes", k, s.Index, s.Label, s.Shape, len(s.Data))
				}
			}
		}},
		{name: "f32 chw", req: &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{1}, Dtype: pb.DType_DTYPE_F32, Layout: pb.Layout_LAYOUT_CHW}, check: func(t *testing.T, r *pb.GetSamplesResponse) {
			if s := r.Samples[0]; r.Dtype != pb.DType_DTYPE_F32 || r.Layout != pb.Layout_LAYOUT_CHW || s.Shape[0] != 3 || len(s.Data) != 8*8*3*4 {
				t.Fatalf("got %v %v shape %v, %d bytes", r.Dtype, r.Layout, s.Shape, len(s.Data))
			}
		}},
		{name: "params", req: &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{1, 2}, Augment: "crop=8:2,flip=0.5,out=u8:hwc", Seed: 3, IncludeParams: true},
			check: func(t *testing.T, r *pb.GetSamplesResponse) {
				if r.Augment == "" || len(r.Params.GetTop()) != 2 || len(r.Params.GetFlip()) != 2 {
					t.Fatalf("augment %q params %v", r.Augment, r.Params)
				}
			}},
		{name: "out of range", req: &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{0, 64}}, code: codes.InvalidArgument, msg: `index 64 outside 0..63 (dataset "good" has 64 samples)`},
		{name: "negative", req: &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{-1}}, code: codes.InvalidArgument, msg: "index -1 outside 0..63"},
		{name: "none", req: &pb.GetSamplesRequest{Dataset: "good"}, code: codes.InvalidArgument, msg: "0 indices, want 1..1024"},
		{name: "too many", req: &pb.GetSamplesRequest{Dataset: "good", Indices: many}, code: codes.InvalidArgument, msg: "1025 indices, want 1..1024"},
		{name: "over the byte bound", req: &pb.GetSamplesRequest{Dataset: "good", Indices: many[:30], Augment: "resize=1024,out=f32:chw"},
			code: codes.InvalidArgument, msg: "30 samples of 12582912 bytes are 377487360 bytes, over the 268435456-byte limit"},
		{name: "mixup", req: &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{0}, Augment: "out=f32:chw,mixup=0.2"}, code: codes.InvalidArgument, msg: "mixup and cutmix mix a batch"},
		{name: "bad spec", req: &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{0}, Augment: "nonsense=1"}, code: codes.InvalidArgument, msg: "nonsense"},
		{name: "unknown dataset", req: &pb.GetSamplesRequest{Dataset: "nope", Indices: []int64{0}}, code: codes.NotFound, msg: `unknown dataset "nope"`},
		{name: "corrupt sample", req: &pb.GetSamplesRequest{Dataset: "corrupt", Indices: []int64{4, 5}}, code: codes.DataLoss, msg: "sample 5: shard-0.bin: record 5: corrupt record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := api.GetSamples(ctx, c.req)
			if status.Code(err) != c.code || (c.msg != "" && !strings.Contains(err.Error(), c.msg)) {
				t.Fatalf("got %v, want %v with %q", err, c.code, c.msg)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
	if n := memGauge(t, srv, memGet); n != 0 {
		t.Errorf("%d bytes of GetSamples still counted after the calls", n)
	}
}

// TestGetSamplesEqualsStream: an augmented sample is the stream's sample
// of that index, seed and epoch, byte for byte, with the same params: a
// fixed-size dataset through Apply, one of varying size through
// ApplyDecoded.
func TestGetSamplesEqualsStream(t *testing.T) {
	ctx := context.Background()
	photos, err := loader.Open("folder:" + pngFolder(t))
	if err != nil {
		t.Fatal(err)
	}
	_, api, _ := serve(t, Options{}, &Dataset{Name: "synth", Spec: "synthetic", Source: synthetic.New(40, 0)},
		&Dataset{Name: "photos", Spec: "folder", Source: photos})
	for _, c := range []struct{ dataset, augment string }{
		{"synth", "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"},
		{"photos", "random_resized_crop=24,flip=0.5,out=u8:hwc"},
	} {
		st, err := openRaw(ctx, api, &pb.Open{Dataset: c.dataset, BatchSize: 4, Seed: 7, StartEpoch: 2, Epochs: 1, Augment: c.augment, IncludeParams: true, MaxInFlight: 1})
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		b := r.GetBatch()
		got, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: c.dataset, Indices: b.Indices, Augment: c.augment, Seed: 7, Epoch: 2, IncludeParams: true})
		if err != nil {
			t.Fatal(err)
		}
		data := b.GetData()
		n := len(data) / len(b.Indices)
		for k, s := range got.Samples {
			if s.Index != b.Indices[k] || s.Label != b.Labels[k] || !bytes.Equal(s.Data, data[k*n:(k+1)*n]) {
				t.Errorf("%s: sample %d (index %d): differs from the stream's", c.dataset, k, b.Indices[k])
			}
		}
		if g, w := got.Params, b.Params; !slices.Equal(g.Top, w.Top) || !slices.Equal(g.Left, w.Left) || !slices.Equal(g.Height, w.Height) || !slices.Equal(g.Flip, w.Flip) {
			t.Errorf("%s: params %v, the stream's %v", c.dataset, g, w)
		}
		st.CloseSend()
		drainRaw(st)
	}
	// Without a spec, a photo is its own size.
	r, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "photos", Indices: []int64{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Samples {
		if len(s.Shape) != 3 || int64(len(s.Data)) != s.Shape[0]*s.Shape[1]*s.Shape[2] || s.Shape[2] != 3 {
			t.Errorf("index %d: shape %v, %d bytes", s.Index, s.Shape, len(s.Data))
		}
	}
	if _, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "photos", Indices: []int64{0}, Layout: pb.Layout_LAYOUT_CHW}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("raw CHW of varying sizes: %v, want InvalidArgument", err)
	}
}

// pngFolder writes three PNGs of different sizes in two classes.
func pngFolder(t *testing.T) string {
	root := t.TempDir()
	for i, wh := range [][2]int{{40, 30}, {64, 48}, {17, 90}} {
		dir := filepath.Join(root, "c"+string(rune('0'+i%2)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		img := image.NewRGBA(image.Rect(0, 0, wh[0], wh[1]))
		for p := range img.Pix {
			img.Pix[p] = byte(p * (i + 3))
		}
		f, err := os.Create(filepath.Join(dir, string(rune('a'+i))+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return root
}

// blockedSource blocks every read until release closes, counting the
// readers at once.
type blockedSource struct {
	testSource
	release   chan struct{}
	now, most atomic.Int32
}

func (s *blockedSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	<-s.release
	return s.testSource.Sample(i, scratch)
}

// TestGetSamplesFloodLeavesStreams: calls stuck in reads hold at most
// getsWidth handlers, the others wait (to their deadline), and a stream
// of another dataset runs to its end meanwhile.
func TestGetSamplesFloodLeavesStreams(t *testing.T) {
	src := &blockedSource{testSource: testSource{n: 8}, release: make(chan struct{})}
	_, api, _ := serve(t, Options{}, &Dataset{Name: "blocked", Spec: "test:", Source: src, Augment: "out=u8:hwc"}, testDataset("good", testSource{n: 64}))
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "blocked", Indices: []int64{1}})
			errs <- err
		})
	}
	st, err := openRaw(context.Background(), api, &pb.Open{Dataset: "good", BatchSize: 8, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := drainRaw(st); err != nil || n != 8 {
		t.Fatalf("the stream beside the flood: %d batches, %v", n, err)
	}
	wg.Wait() // every call past its deadline
	close(src.release)
	close(errs)
	for err := range errs {
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("a call: %v, want DeadlineExceeded", err)
		}
	}
	if m := src.most.Load(); m < 1 || m > getsWidth {
		t.Errorf("%d calls read at once, want 1..%d", m, getsWidth)
	}
}
