package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// namedSource is a testSource whose samples have file names.
type namedSource struct{ testSource }

func (s namedSource) Name(i int64) string { return fmt.Sprintf("shard-%d.tar:img%05d.png", i/10, i) }

func TestSampleNamesPages(t *testing.T) {
	ctx := context.Background()
	_, api, _ := serve(t, Options{}, &Dataset{Name: "named", Spec: "test:", Source: namedSource{testSource{n: 25}}, Augment: "out=u8:hwc"},
		testDataset("plain", testSource{n: 12345}))

	r, err := api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "named", Start: 8, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"shard-0.tar:img00008.png", "shard-0.tar:img00009.png", "shard-1.tar:img00010.png"}; !r.Named || r.Start != 8 || r.Size != 25 || strings.Join(r.Names, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want names %v from 8 of 25", r, want)
	}
	// The last page is short, and start == size is the empty end of a walk.
	if r, err = api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "named", Start: 20, Count: 10000}); err != nil || len(r.Names) != 5 || r.Names[4] != "shard-2.tar:img00024.png" {
		t.Fatalf("last page: %v, %v", r, err)
	}
	if r, err = api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "named", Start: 25, Count: 1}); err != nil || len(r.Names) != 0 {
		t.Fatalf("start == size: %v, %v", r, err)
	}

	// A source without names: decimal indices, named false; paging covers
	// every index once.
	var all []string
	for start := int64(0); ; {
		r, err := api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "plain", Start: start, Count: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if r.Named || r.Size != 12345 || r.Start != start {
			t.Fatalf("page at %d: named %v size %d start %d", start, r.Named, r.Size, r.Start)
		}
		if len(r.Names) == 0 {
			break
		}
		all = append(all, r.Names...)
		start += int64(len(r.Names))
	}
	if len(all) != 12345 || all[0] != "0" || all[10000] != "10000" || all[12344] != "12344" {
		t.Fatalf("%d names, first %q last %q", len(all), all[0], all[len(all)-1])
	}
}

func TestSampleNamesRefuses(t *testing.T) {
	ctx := context.Background()
	srv, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
	for _, c := range []struct {
		req  *pb.SampleNamesRequest
		code codes.Code
		msg  string
	}{
		{&pb.SampleNamesRequest{Dataset: "good", Start: -1, Count: 1}, codes.InvalidArgument, "start -1 outside 0..64"},
		{&pb.SampleNamesRequest{Dataset: "good", Start: 65, Count: 1}, codes.InvalidArgument, "start 65 outside 0..64"},
		{&pb.SampleNamesRequest{Dataset: "good", Count: 0}, codes.InvalidArgument, "count 0 outside 1..10000"},
		{&pb.SampleNamesRequest{Dataset: "good", Start: 99, Count: 10001}, codes.InvalidArgument, "start 99 outside 0..64; count 10001"},
		{&pb.SampleNamesRequest{Dataset: strings.Repeat("x", 257), Count: 1}, codes.InvalidArgument, "257 bytes"},
		{&pb.SampleNamesRequest{Dataset: "gone", Count: 1}, codes.NotFound, `unknown dataset "gone" (registered: good)`},
	} {
		_, err := api.SampleNames(ctx, c.req)
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: got %v, want %v naming %q", c.req, err, c.code, c.msg)
		}
	}
	// Shutting down: UNAVAILABLE from the handler itself, before gRPC stops.
	srv.stopOnce.Do(func() { close(srv.stopping) })
	if _, err := srv.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "good", Count: 1}); status.Code(err) != codes.Unavailable {
		t.Fatalf("while stopping: %v", err)
	}
}

// longNames names every sample with 2 KiB.
type longNames struct{ testSource }

func (longNames) Name(i int64) string { return strings.Repeat("n", 2048) }

// A SampleNames page is built in the memory budget (issue 29, case 5): a
// page of 10,000 names of 2 KiB is refused under 8 MiB, naming the limit,
// a smaller one is answered, and nothing stays counted.
func TestSampleNamesBudget(t *testing.T) {
	ctx := context.Background()
	srv, api, _ := serve(t, Options{MemoryLimit: 8 << 20},
		&Dataset{Name: "long", Spec: "test:", Source: longNames{testSource{n: 20000}}, Augment: "out=u8:hwc"})
	_, err := api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "long", Start: 0, Count: 10000})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "a page of 10000 names") || !strings.Contains(err.Error(), "--memory-limit") {
		t.Fatalf("a 20 MiB page under 8 MiB: %v", err)
	}
	r, err := api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "long", Start: 0, Count: 1000})
	if err != nil || len(r.Names) != 1000 {
		t.Fatalf("a 2 MiB page: %d names, %v", len(r.GetNames()), err)
	}
	if n := memGauge(t, srv, memNames); n != 0 {
		t.Fatalf("%d bytes of names still counted", n)
	}
}
